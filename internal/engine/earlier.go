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
// The rows are in memory already. A batch makes a stand-in per finished
// task its tasks depend on, while it is checked; once linked, the
// dependencies whose condition the finished task's end met (nearly all
// of a restore's: the tasks would be blocked otherwise) go to one node
// the batch shares per end (shareStandIns), and the stand-ins are
// garbage. What a restore keeps per dependency on a finished task is
// then a pointer.

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
// memory and among the retired tasks); nil otherwise. It is kept: it did
// not run in this engine, so a task complete from an earlier run that
// depends on it stays complete.
func (e *Engine) earlierNode(id string) *node {
	r := e.finishedEarlier(id)
	if r == nil {
		return nil
	}
	return standIn(r, true)
}

// shareStandIns replaces, in the dependency lists of a batch's nodes,
// each stand-in for a task an earlier engine left finished whose end
// meets the dependent's condition by a node the batch shares for that end
// (state and not-needed flag). Such a dependency is only ever judged
// (admit, recount, retry, waiting reasons) until a batch takes the task
// up again and relinkAgain replaces it by the new node, which it finds by
// the dependent's own list of ids: the stand-in's id and error are read
// only for a dependency that blocks its task. retired holds the batch's
// stand-ins by id.
func (e *Engine) shareStandIns(nodes []*node, retired map[string]*node) {
	type end struct {
		state     task.State
		notNeeded bool
	}
	var shared map[end]*node
	for _, n := range nodes {
		ids := n.spec.Dependencies
		for j, d := range n.deps {
			if !d.kept || d.seq >= e.svc.firstSeq || retired[ids[j]] != d {
				continue // not an earlier engine's finished task (a retired one's stand-in is not kept)
			}
			if n.spec.On(ids[j]).Judge(d.rec.State, d.rec.NotNeeded) != task.Met {
				continue
			}
			k := end{d.rec.State, d.rec.NotNeeded}
			s := shared[k]
			if s == nil {
				if shared == nil {
					shared = map[end]*node{}
				}
				s = &node{spec: &task.Spec{ID: "(finished before this scheduler opened)"}, seq: -1, card: -1, kept: true,
					rec: task.Record{State: k.state, NotNeeded: k.notNeeded}}
				shared[k] = s
			}
			n.deps[j] = s
		}
	}
}
