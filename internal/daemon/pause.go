package daemon

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// pause serves POST /v1/pause: the tasks the ids name (none: every task of
// the caller's, every task for root) are paused, and with stop, the
// running ones among them stopped. Tasks of another user are refused, all
// or nothing, before anything is paused.
func (d *Daemon) pause(w http.ResponseWriter, r *http.Request, p peer) error {
	var req client.PauseRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ids, err := d.controlTargets(p, req.IDs, "pause", func(rec gpusched.Record) bool { return !rec.State.Terminal() })
	if err != nil {
		return err
	}
	out := client.Paused{Paused: []string{}}
	if len(ids) > 0 {
		done, err := d.sched.Pause(ids, req.Stop)
		out.Paused = d.showAll(done)
		if err != nil {
			// Paused, but a process could not be stopped: say so.
			return d.controlError(err)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// resume serves POST /v1/resume: the paused tasks the ids name (none:
// every paused task of the caller's, every one for root) may start again;
// those pause --stop stopped get SIGCONT.
func (d *Daemon) resume(w http.ResponseWriter, r *http.Request, p peer) error {
	var req client.ResumeRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ids, err := d.controlTargets(p, req.IDs, "resume", func(rec gpusched.Record) bool { return rec.Paused })
	if err != nil {
		return err
	}
	out := client.Resumed{Resumed: []string{}}
	if len(ids) > 0 {
		done, err := d.sched.Resume(ids)
		out.Resumed = d.showAll(done)
		if err != nil {
			return d.controlError(err)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// retry serves POST /v1/retry: each failed, cancelled or blocked task the
// ids name (a run's id: those of its tasks) runs again, with the tasks it
// blocked. A task named by its own id that cannot be retried fails the
// request, and nothing is retried.
func (d *Daemon) retry(w http.ResponseWriter, r *http.Request, p peer) error {
	var req client.RetryRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ts, err := d.resolveOwned(p, req.IDs, "retry")
	if err != nil {
		return err
	}
	named := map[string]bool{} // tasks named by their own id (a command run's id is its task's), not by their run's
	for _, id := range req.IDs {
		if rts, err := d.resolve(id); err == nil && (strings.Contains(id, "/") || (len(rts) == 1 && rts[0].run.kind == client.KindCommand)) {
			named[rts[0].id] = true
		}
	}
	var ids, again []string // the scheduler's to retry; those it no longer holds, to submit again
	for _, t := range ts {
		rec, inMemory := d.sched.Record(t.id)
		if !inMemory {
			var ok bool
			if rec, ok = d.stored(t.id); !ok {
				return errorf(http.StatusNotFound, "task %s is not in the scheduler (its run is being submitted, or its submission was lost)", t.show)
			}
		}
		switch {
		case !named[t.id] && !retryable(rec.State):
		case inMemory:
			ids = append(ids, t.id)
		default:
			again = append(again, t.id)
		}
	}
	out := client.Retried{Retried: []string{}}
	if len(again) > 0 {
		done, err := d.submitAgain(r.Context(), again)
		if err != nil {
			return err
		}
		out.Retried = d.showAll(done)
	}
	if len(ids) > 0 {
		done, err := d.sched.Retry(ids)
		if err != nil {
			return d.controlError(err)
		}
		for _, id := range done {
			d.tasks.forget(id)
		}
		out.Retried = append(out.Retried, d.showAll(done)...)
	}
	return writeJSON(w, http.StatusOK, out)
}

// controlTargets returns the scheduler's ids of the tasks a pause or
// resume names, refusing (all or nothing) tasks of another user; with no
// ids, every task of the caller's (every task for root) that is in the
// scheduler and for which want holds.
func (d *Daemon) controlTargets(p peer, ids []string, verb string, want func(gpusched.Record) bool) ([]string, error) {
	var out []string
	if len(ids) == 0 {
		for _, rn := range d.runs.all() {
			if !owns(p, rn) {
				continue
			}
			for i := range rn.tasks {
				id := qualify(rn.id, rn.tasks[i].inner)
				if rec, ok := d.sched.Record(id); ok && want(rec) {
					out = append(out, id)
				}
			}
		}
		return out, nil
	}
	ts, err := d.resolveOwned(p, ids, verb)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if _, ok := d.sched.Record(t.id); ok {
			out = append(out, t.id) // finished tasks before a restart are not: nothing to pause
		}
	}
	return out, nil
}

// controlError is the scheduler's refusal of a pause, resume or retry on
// one line, naming the task as the daemon shows it.
func (d *Daemon) controlError(err error) error {
	var te *gpusched.TaskError
	if !errors.As(err, &te) {
		return err
	}
	status := http.StatusConflict
	if errors.Is(err, gpusched.ErrUnknownTask) {
		status = http.StatusNotFound
	}
	return errorf(status, "task %s: %s", d.show(te.TaskID), te.Reason)
}

// showAll is how the daemon prints the scheduler's task ids.
func (d *Daemon) showAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = d.show(id)
	}
	return out
}
