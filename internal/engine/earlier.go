package engine

import (
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Tasks an earlier engine left finished.
//
// Open loads every row of the store (Engine.earlier). To a batch with
// Again, a task that had finished then, and that no batch of this
// engine's has submitted since, is what a retired task is (retire.go):
//
//   - the batch's tasks may depend on it: each such dependency is judged
//     by its stored end, through a stand-in node, as if it were in
//     memory (a pending task whose condition that end met waits for
//     nothing more from it; one whose condition it cannot meet is
//     blocked);
//   - the batch may name it: it is taken up again with its history
//     (newNode), and the tasks held that depend on it are linked to its
//     new node (relinkAgain), so that a pending one that counted its end
//     (on: any, on: failure) waits for the new one.
//
// That is how a daemon queues again, after a restart, the tasks an
// earlier daemon left unfinished (with all their dependencies), and how
// it retries a task that had finished before it started: the dependents
// then wait for the task's new end exactly as they do without a restart.
// A batch without Again may not depend on such a task: it names a task of
// an earlier run, which a run submits again itself (a workflow resumed).
//
// The rows are in memory already; what a batch adds is a stand-in per
// finished task its tasks depend on (shared by the batch), and nothing
// per finished task otherwise.

// finishedEarlier returns task id's row as Open loaded it when it had
// finished then; nil otherwise. The caller has looked for it in memory
// and among the retired tasks first: a task submitted to this engine is
// in one or the other, and its row in earlier is out of date.
func (e *Engine) finishedEarlier(id string) *store.Row {
	if r := e.earlier[id]; r != nil && r.State.Terminal() {
		return r
	}
	return nil
}

// standIn returns a node that stands for a finished task a new task
// depends on, with what the new task needs of it: its id, end and
// blocker. kept says that it completed in an earlier run and did not run
// in this one: a task complete from an earlier run that depends on it
// stays complete.
func standIn(r *store.Row, kept bool) *node {
	return &node{spec: &task.Spec{ID: r.ID}, seq: r.Seq, card: -1, kept: kept,
		rec: task.Record{ID: r.ID, State: r.State, BlockedBy: r.BlockedBy, Error: r.Error, NotNeeded: r.NotNeeded}}
}

// earlierNode returns a stand-in for task id when an earlier engine left
// it finished and this one has not had it since (the caller has looked in
// memory and among the retired tasks); nil otherwise.
func (e *Engine) earlierNode(id string) *node {
	r := e.finishedEarlier(id)
	if r == nil {
		return nil
	}
	return standIn(r, r.State == task.Complete)
}
