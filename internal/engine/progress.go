package engine

// What the system running an attempt says of it (executor.Progress: a
// batch system's job, its state and node, why it waits). The loop
// records it in the attempt (task.Attempt.Job), and, while the attempt
// waits there, gives the running task the reason task.WaitQueued. Each
// change is written with the turn's commit: the changes of one tracking
// round (every job the executor follows) arrive together and cost one
// commit, and an executor tells only changes, so a job that waits for
// hours costs nothing meanwhile.

import (
	"cmp"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// progressEvent is what the system running attempt number of a task says
// of it.
type progressEvent struct {
	n      *node  // nil: the task is found by id (an adopted attempt's, told before its node existed)
	id     string // when n is nil
	number int
	p      executor.Progress
}

func (ev progressEvent) apply(e *Engine) {
	n := ev.n
	if n == nil {
		n = e.node(ev.id)
	}
	if n == nil || n.rec.State != task.Running || ev.number != len(n.rec.Attempts) {
		return // its end came first
	}
	a := &n.rec.Attempts[ev.number-1]
	if a.Ended() {
		return
	}
	e.setJob(n, ev.number, task.RemoteJob{System: ev.p.System, ID: ev.p.Job, State: ev.p.State, Node: ev.p.Node,
		Reason: ev.p.Reason, Queued: ev.p.Queued})
	var w task.WaitReason
	if ev.p.Queued {
		w = task.WaitReason{Kind: task.WaitQueued, Detail: queuedDetail(ev.p)}
	}
	e.setQueued(n, w)
}

// setJob records job as attempt number of n's, when it changed: the
// attempt's row is written with the turn's commit, and JobChanged told.
func (e *Engine) setJob(n *node, number int, job task.RemoteJob) {
	a := &n.rec.Attempts[number-1]
	if a.Job != nil && *a.Job == job {
		return
	}
	a.Job = &job // a new one: records handed out share the old
	e.writeAttempt(n, number)
	e.notify(Event{Kind: JobChanged, TaskID: n.spec.ID, Attempt: *a})
}

// jobRuns notes that the command of attempt number of n runs: its job, if
// it has one, no longer waits, and JobChanged tells the attempt's real
// start (the time it waited in the queue is not its run time).
func (e *Engine) jobRuns(n *node, number int) {
	if a := &n.rec.Attempts[number-1]; a.Job != nil {
		if a.Job.Queued {
			job := *a.Job
			job.Queued = false
			e.setJob(n, number, job)
		} else {
			e.notify(Event{Kind: JobChanged, TaskID: n.spec.ID, Attempt: *a})
		}
	}
	e.setQueued(n, task.WaitReason{})
}

// queuedDetail says why an attempt waits in the system that runs it:
// "queued in Slurm as job 4242: Priority"; before it has a job there, the
// system's own words ("Slurm controller unreachable since 05:20:11:
// submission waits").
func queuedDetail(p executor.Progress) string {
	system := cmp.Or(p.System, "its executor")
	if p.Job == "" {
		return cmp.Or(p.Reason, "waiting to be submitted to "+system)
	}
	s := "queued in " + system + " as job " + p.Job
	switch {
	case p.Reason != "":
		s += ": " + p.Reason
	case p.State != "":
		s += " (" + p.State + ")"
	}
	return s
}

// setQueued sets the reason w (WaitQueued, or none) of running task n,
// written with its row when it changes.
func (e *Engine) setQueued(n *node, w task.WaitReason) {
	if n.rec.Waiting == w {
		return
	}
	n.rec.Waiting = w
	e.writeTask(n)
}

// keepsWait reports whether a task in state st may have a reason of kind
// k: a pending one any but WaitQueued, a running one WaitQueued only.
func keepsWait(st task.State, k task.WaitKind) bool {
	switch st {
	case task.Pending:
		return k != task.WaitQueued
	case task.Running:
		return k == task.WaitQueued
	case task.Complete, task.Failed, task.Blocked, task.Cancelled:
	}
	return false
}
