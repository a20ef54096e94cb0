package daemon

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpusched/gpusched"
)

// Restoring what an earlier daemon on the state directory left.
//
// The scheduler opens with every task of the state database stored, but
// runs only what is submitted to it again. At start the daemon submits
// again, in one batch and in their order, the tasks that had not
// finished: a running one is claimed as it is (the scheduler adopted its
// attempt, still running under its supervisor, or recorded how it ended
// meanwhile), a pending one is queued again with its history. The batch
// is submitted "again" (Scheduler.SubmitAgain), so their dependencies on
// finished tasks are kept: the scheduler judges each by the finished
// task's stored end (a task still pending had its condition met, unless
// the task it needed was stopped with the daemon, --kill-tasks: it is
// blocked now), and a retry of the finished task makes the pending ones
// that counted its end (on: any, on: failure) wait for its new end, as
// without the restart. The finished tasks are not submitted again (a
// failed one would run again): like the tasks the scheduler retires (see
// retire.go), they are read from the state database when asked for.

// taskIndex is what the daemon knows of tasks besides the scheduler.
type taskIndex struct {
	mu sync.Mutex
	// ended holds, by the scheduler's id, what the daemon knows of the
	// finished tasks the scheduler may no longer hold (those finished
	// before the daemon started and those it has seen finish since): at
	// least their end state, which the metrics count, and mostly what the
	// queue shows of them (summary.go). Guarded by mu.
	ended map[string]summary
	// forgets counts forget calls, so that summaries read from the state
	// database before one are not noted after it. Guarded by mu.
	forgets uint64
	// unqueued holds the records of the tasks of runs saved in runs.db
	// that never reached the state database (markUnqueued); set at start,
	// never changed after.
	unqueued map[string]gpusched.Record
}

// note notes what the queue shows of finished task id.
func (x *taskIndex) note(id string, sm summary) {
	x.mu.Lock()
	x.ended[id] = sm
	x.mu.Unlock()
}

// forget forgets that task id had finished: it runs again.
func (x *taskIndex) forget(id string) {
	x.mu.Lock()
	delete(x.ended, id)
	x.forgets++
	x.mu.Unlock()
}

// endedAs returns the state task id finished in, if it is known to have.
func (x *taskIndex) endedAs(id string) (gpusched.State, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.ended[id]
	return s.state, ok
}

// restore reads the state database, indexes every task under its run,
// and submits the unfinished ones again. Of the finished tasks, most of
// them, it reads only what the index and the queue show (store.Brief),
// never their whole definitions.
func (d *Daemon) restore() error {
	d.tasks = &taskIndex{ended: map[string]summary{}, unqueued: map[string]gpusched.Record{}}
	open, err := d.sched.StoredUnfinished()
	if err != nil {
		return err
	}
	briefs, err := d.summaries.briefs()
	if err != nil {
		return err
	}
	// The runs' tasks as runs.db has them (inner ids, in order), and
	// their definitions from the state database.
	metas := map[string]*taskMeta{}
	for _, r := range d.runs.all() {
		for i := range r.tasks {
			metas[qualify(r.id, r.tasks[i].inner)] = &r.tasks[i]
		}
	}
	// Unfinished as the scheduler loaded them: a task it adopted may have
	// ended since in the database, and is submitted again all the same.
	unfinished := make(map[string]*gpusched.StoredTask, len(open))
	for i := range open {
		unfinished[open[i].Spec.ID] = &open[i]
	}
	have := make(map[string]bool, len(briefs))
	for i := range briefs {
		have[briefs[i].ID] = true
	}
	var again []gpusched.TaskSpec
	for i := range briefs {
		b := &briefs[i]
		runID, inner, ok := splitTaskID(b.ID)
		if !ok {
			continue // not a daemon's task (a gpusched run on this folder?)
		}
		st := unfinished[b.ID]
		if st == nil && !b.State.Terminal() {
			continue // cannot be: nothing was submitted since the scheduler loaded it
		}
		m := metas[b.ID]
		if m == nil {
			uid := d.uid
			if n, err := strconv.Atoi(b.Owner); err == nil {
				uid = n
			}
			r := d.runs.adopt(runID, uid, d.userName(uid))
			r.tasks = append(r.tasks, taskMeta{inner: inner})
			m = &r.tasks[len(r.tasks)-1]
			for i := range r.tasks { // the append may have moved them
				metas[qualify(r.id, r.tasks[i].inner)] = &r.tasks[i]
			}
		}
		if st == nil {
			m.command, m.dir, m.deps = b.Argv, b.Dir, b.Dependencies
			d.tasks.ended[b.ID] = summaryOfStored(&b.Summary)
			continue
		}
		m.command, m.dir, m.deps = commandOf(st.Spec.Payload), st.Spec.Dir, st.Spec.Dependencies
		m.on, m.gpuAuto, m.hostAuto = st.Spec.DependencyOn, st.Spec.Resources.MemoryAuto, st.Spec.Resources.MemoryHostAuto
		// Its Owner is part of its definition, kept as it was submitted;
		// so are its dependencies, but for one the state database does
		// not hold (none should be missing: it would refuse the batch).
		sp := st.Spec
		if !slices.ContainsFunc(sp.Dependencies, func(dep string) bool { return !have[dep] }) {
			again = append(again, sp)
			continue
		}
		sp.Dependencies, sp.DependencyOn = nil, nil
		for _, dep := range st.Spec.Dependencies {
			if !have[dep] {
				d.log.Printf("task %s: its dependency %s is not in the state database; queued without it", b.ID, dep)
				continue
			}
			sp.Dependencies = append(sp.Dependencies, dep)
			if on, ok := st.Spec.DependencyOn[dep]; ok {
				if sp.DependencyOn == nil {
					sp.DependencyOn = map[string]gpusched.DependencyCondition{}
				}
				sp.DependencyOn[dep] = on
			}
		}
		again = append(again, sp)
	}
	d.markUnqueued(have)
	if len(again) == 0 {
		return nil
	}
	ids := make([]string, len(again))
	for i := range again {
		ids[i] = again[i].ID
	}
	if _, err := d.ownLogDirsOf(ids); err != nil { // their owners' log folders, as at submit
		return fmt.Errorf("queue again the tasks an earlier daemon left unfinished: %w", err)
	}
	if err := d.sched.SubmitAgain(context.Background(), again); err != nil {
		return fmt.Errorf("queue again the %d tasks an earlier daemon left unfinished: %w", len(again), err)
	}
	d.log.Printf("took up %d unfinished tasks an earlier daemon left", len(again))
	return nil
}

// unqueued is the error of a task of a run that runs.db kept and the
// state database never got: the daemon stopped between saving the run
// and queueing its tasks (submit). The request is not kept, so it cannot
// be queued again.
const unqueued = "the daemon stopped before queueing its tasks; submit it again"

// markUnqueued records as failed (unqueued), among the finished tasks,
// every task of a run of runs.db that is not in the state database
// (have, by id), so that its run is never shown empty nor waited for in
// vain.
func (d *Daemon) markUnqueued(have map[string]bool) {
	n := 0
	for _, r := range d.runs.all() {
		for _, m := range r.tasks {
			if id := qualify(r.id, m.inner); !have[id] {
				rec := gpusched.Record{ID: id, State: gpusched.StateFailed, Error: unqueued, Submitted: r.created}
				d.tasks.unqueued[id] = rec
				d.tasks.note(id, summaryOf(&rec))
				n++
			}
		}
	}
	if n > 0 {
		d.log.Printf("%d tasks of runs saved before a stop were never queued: shown failed (%s)", n, unqueued)
	}
}

// commandOf returns a command task's argv (Scheduler.Stored gives it as
// []string).
func commandOf(payload any) []string {
	argv, _ := payload.([]string)
	return argv
}

// qualify is the scheduler's id of task inner of run id.
func qualify(runID int64, inner string) string {
	return strconv.FormatInt(runID, 10) + "/" + inner
}

// splitTaskID splits the scheduler's id of a daemon's task.
func splitTaskID(id string) (runID int64, inner string, ok bool) {
	r, inner, ok := strings.Cut(id, "/")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.ParseInt(r, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, inner, true
}
