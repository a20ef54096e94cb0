package slurm

import (
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// system names Slurm in what the executor tells of its jobs.
const system = "Slurm"

// reporter tells one attempt's Hooks.Progress what Slurm says of its job,
// each time that changes: never the same twice in a row, so that a job
// that waits for hours costs nothing per tracking round. It is used by
// the goroutine that runs or follows the attempt only.
type reporter struct {
	tell func(executor.Progress) // nil: nobody listens
	last executor.Progress
	told bool
}

// report tells p unless it was the last told.
func (r *reporter) report(p executor.Progress) {
	if r == nil || r.tell == nil {
		return
	}
	p.System = system
	if r.told && p == r.last {
		return
	}
	r.told, r.last = true, p
	r.tell(p)
}

// progressOf is what s says of the job, for an attempt whose command
// has started (running) or not.
func progressOf(s jobState, running bool) executor.Progress {
	reason := s.Reason
	if reason == "None" {
		reason = "" // Slurm's word for no reason
	}
	return executor.Progress{Job: s.ID, State: s.State, Reason: reason, Node: s.Node, Queued: !running && queued(s.State)}
}

// endState is the state Slurm gives a job whose helper wrote result r,
// as the helper's exit code decides it: COMPLETED when that is 0 (the
// command ran and exited 0), else FAILED. A state last seen that already
// ends the job (TIMEOUT, CANCELLED...) is kept: it is Slurm's own word.
func endState(r executor.Result, last string) string {
	switch {
	case terminal(last):
		return last
	case r.Started && r.Signal == 0 && r.ExitCode == 0:
		return "COMPLETED"
	}
	return "FAILED"
}

// queued reports whether Slurm's state means the job waits to run: in
// the queue, or for its node to boot, or to be queued again.
func queued(state string) bool {
	switch state {
	case "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED":
		return true
	}
	return false
}

// unreachable is what a submission that waits for the controller
// reports: no job yet, and why it waits, since when.
func unreachable(since time.Time) executor.Progress {
	return executor.Progress{Queued: true,
		Reason: "Slurm controller unreachable since " + since.Local().Format(time.TimeOnly) + ": submission waits"}
}
