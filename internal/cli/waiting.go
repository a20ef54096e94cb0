package cli

import (
	"github.com/gpusched/gpusched/internal/task"
)

// noScheduler is the note of a pending task when no scheduler holds the
// run directory: whatever reason was saved is of the past.
const noScheduler = "not started: no scheduler is running"

// notSubmitted is the note of a pending task the running scheduler has
// decided nothing about: it was not submitted to it (or not yet).
const notSubmitted = "not submitted to the running scheduler"

// explainWaiting says, for each pending task, why it has not started: the
// reason the scheduler's loop decided and saved with the task, worded for
// a person; and, for a running task whose attempt waits in the batch
// system that runs it (Slurm's queue), why, while a scheduler runs to
// follow it. Whether a scheduler runs is the view's own fact.
func (v *runView) explainWaiting() {
	v.waiting = map[string]string{}
	for _, r := range v.rows {
		if r.State == task.Running && r.Waiting.Kind == task.WaitQueued && v.pid != 0 {
			v.waiting[r.ID] = r.Waiting.Text(v.now)
			continue
		}
		if r.State != task.Pending {
			continue
		}
		switch {
		case v.pid == 0:
			v.waiting[r.ID] = noScheduler
		case !r.Waiting.Waiting():
			v.waiting[r.ID] = notSubmitted
		default:
			v.waiting[r.ID] = r.Waiting.Text(v.now)
		}
	}
}

// waitingKind is the kind of a task's saved reason, when a scheduler runs
// to stand by it; NotWaiting otherwise.
func (v *runView) waitingKind(r *task.Record) task.WaitKind {
	if v.pid == 0 || r.State != task.Pending && r.Waiting.Kind != task.WaitQueued {
		return task.NotWaiting
	}
	return r.Waiting.Kind
}
