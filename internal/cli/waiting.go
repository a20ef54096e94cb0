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

// waitingNote says why the task of row r has not started: for a pending
// task, the reason the scheduler's loop decided and saved with the task,
// worded for a person; and, for a running task whose attempt waits in the
// batch system that runs it (Slurm's queue), why, while a scheduler runs
// to follow it; "" for any other. Whether a scheduler runs is the view's
// own fact. It is worded when asked for, not kept by task: status asks
// once a task.
func (v *runView) waitingNote(r *task.Record) string {
	switch {
	case r.State == task.Running && r.Waiting.Kind == task.WaitQueued && v.pid != 0:
		return r.Waiting.Text(v.now)
	case r.State != task.Pending:
		return ""
	case v.pid == 0:
		return noScheduler
	case !r.Waiting.Waiting():
		return notSubmitted
	}
	return r.Waiting.Text(v.now)
}

// waitingKind is the kind of a task's saved reason, when a scheduler runs
// to stand by it; NotWaiting otherwise.
func (v *runView) waitingKind(r *task.Record) task.WaitKind {
	if v.pid == 0 || r.State != task.Pending && r.Waiting.Kind != task.WaitQueued {
		return task.NotWaiting
	}
	return r.Waiting.Kind
}
