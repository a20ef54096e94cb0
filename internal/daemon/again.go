package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// Retrying a task the scheduler no longer holds.
//
// The scheduler retires a finished task (gpusched.WithRetirement), and a
// task that had finished before the daemon started was never submitted
// to this scheduler: neither is there for its Retry. Such a task is
// retried by submitting its definition, as the state database holds it,
// again (gpusched.Scheduler.SubmitAgain): the same id, owner,
// environment and folder, its attempts kept and their numbers going on,
// with the tasks it blocked, found through the runs' dependencies. The
// answer is the scheduler's Retry's: the tasks that run again, or a
// refusal naming the task that stands in the way. A task taken up with
// them that a dependency outside them now makes not needed (on: failure
// of a task that completed) stays blocked, as not needed, as the
// scheduler's Retry leaves it; and the tasks the scheduler holds that
// counted a retried task's end (on: any, on: failure) wait for its new
// end (the scheduler links them to the task taken up again).

// held reports whether the scheduler holds task id.
func held(d *Daemon, id string) bool {
	_, ok := d.sched.Record(id)
	return ok
}

// retryable reports whether a task in state s can be retried.
func retryable(s gpusched.State) bool {
	return s == gpusched.StateFailed || s == gpusched.StateCancelled || s == gpusched.StateBlocked
}

// submitAgain retries ids, tasks the scheduler does not hold, with the
// tasks they blocked, directly or not. It returns the ids of the tasks
// that run again.
func (d *Daemon) submitAgain(ctx context.Context, ids []string) ([]string, error) {
	tasks := map[string]gpusched.StoredTask{}
	var set []string
	add := func(id string) (gpusched.StoredTask, error) {
		st, ok, err := d.sched.Lookup(id)
		switch {
		case err != nil:
			return st, fmt.Errorf("retry task %s: %w", d.show(id), err)
		case !ok:
			return st, errorf(http.StatusNotFound, "task %s is not in the scheduler", d.show(id))
		}
		tasks[id] = st
		set = append(set, id)
		return st, nil
	}
	for _, id := range ids {
		if _, ok := tasks[id]; ok {
			continue
		}
		st, err := add(id)
		if err != nil {
			return nil, err
		}
		if !retryable(st.Record.State) {
			return nil, errorf(http.StatusConflict, "task %s: it is %s; only a failed, cancelled or blocked task can be retried",
				d.show(id), st.Record.State)
		}
	}
	// The tasks they blocked, directly or not, that the scheduler does not
	// hold either (it holds none of a task it retired or never had).
	dependents := d.dependents()
	for i := 0; i < len(set); i++ {
		for _, dep := range dependents[set[i]] {
			if _, ok := tasks[dep]; ok || held(d, dep) {
				continue
			}
			if rec, ok := d.stored(dep); !ok || rec.State != gpusched.StateBlocked || rec.NotNeeded {
				continue // a task not needed is, whatever these do
			}
			if _, err := add(dep); err != nil {
				return nil, err
			}
		}
	}
	// Their definitions as stored, dependencies and all: each dependency
	// outside the set met (by the condition the task depends on it with)
	// or the retry refused. The scheduler judges them again, and a later
	// retry of one of those finished dependencies makes these wait for
	// its new end.
	specs := make([]gpusched.TaskSpec, 0, len(set))
	for _, id := range set {
		sp := tasks[id].Spec
		for _, dep := range sp.Dependencies {
			if _, ok := tasks[dep]; ok || held(d, dep) {
				continue
			}
			on := sp.DependencyOn[dep]
			rec, ok := d.stored(dep)
			if !ok {
				return nil, errorf(http.StatusConflict, "task %s: it depends on %s, which is gone; retry that too", d.show(id), d.show(dep))
			}
			switch task.Condition(on).Judge(task.State(rec.State), rec.NotNeeded) {
			case task.Met:
				continue
			case task.NotNeeded:
				if slices.Contains(ids, id) {
					return nil, errorf(http.StatusConflict, "task %s: it is not needed: it depends on %s%s, which is complete or not needed",
						d.show(id), d.show(dep), task.Condition(on).Phrase())
				}
				// Taken up with them, it stays blocked, as not needed now
				// (the scheduler blocks it so on admission, by this
				// dependency), as the scheduler's Retry leaves it.
				continue
			case task.Unmet, task.Unsettled:
			}
			return nil, errorf(http.StatusConflict, "task %s: it depends on %s, which is %s; retry that too", d.show(id), d.show(dep), rec.State)
		}
		specs = append(specs, sp)
	}
	if id, err := d.ownLogDirsOf(set); err != nil { // their owners' log folders, as at submit
		return nil, fmt.Errorf("retry task %s: %w", d.show(id), err)
	}
	if err := d.sched.SubmitAgain(ctx, specs); err != nil {
		return nil, d.controlError(fmt.Errorf("retry: %w", err))
	}
	done := make([]string, 0, len(set))
	for _, id := range set {
		d.tasks.forget(id)
		if st, ok, err := d.sched.Lookup(id); err == nil && ok && st.Record.State == gpusched.StateBlocked && st.Record.NotNeeded {
			continue // not needed: blocked again on admission
		}
		done = append(done, id)
	}
	return done, nil
}

// dependents returns, by the scheduler's id, the tasks that depend on each
// task, as the runs have them.
func (d *Daemon) dependents() map[string][]string {
	out := map[string][]string{}
	for _, rn := range d.runs.all() {
		for i := range rn.tasks {
			m := &rn.tasks[i]
			for _, dep := range m.deps {
				id := qualify(rn.id, m.inner)
				if !slices.Contains(out[dep], id) {
					out[dep] = append(out[dep], id)
				}
			}
		}
	}
	return out
}
