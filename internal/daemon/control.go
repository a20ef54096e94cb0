package daemon

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// cancel serves POST /v1/cancel: every task the ids name is cancelled,
// pending ones first (so that none starts meanwhile), then running ones
// (each once its attempt has ended). Tasks of another user are refused,
// all or nothing, before anything is cancelled.
func (d *Daemon) cancel(w http.ResponseWriter, r *http.Request, p peer) error {
	var req client.CancelRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ts, err := d.resolveOwned(p, req.IDs, "cancel")
	if err != nil {
		return err
	}
	var pending, running []target
	for _, t := range ts {
		rec, ok := d.sched.Record(t.id)
		switch {
		case !ok || rec.State.Terminal():
		case rec.State == gpusched.StateRunning:
			running = append(running, t)
		default:
			pending = append(pending, t)
		}
	}
	out := client.Cancelled{Cancelled: []string{}}
	for _, t := range pending {
		if err := d.sched.Cancel(t.id); err != nil {
			return err
		}
		out.Cancelled = append(out.Cancelled, t.show)
	}
	errs := make([]error, len(running))
	var wg sync.WaitGroup
	for i, t := range running {
		wg.Go(func() { errs[i] = d.sched.Cancel(t.id) })
	}
	wg.Wait()
	for i, t := range running {
		if errs[i] != nil {
			return errs[i]
		}
		out.Cancelled = append(out.Cancelled, t.show)
	}
	return writeJSON(w, http.StatusOK, out)
}

// wait serves POST /v1/wait: a stream with a line per task as it
// finishes (at once for those finished already), then an end line. It
// ends without its end line when the daemon stops: the client asks the
// next one.
func (d *Daemon) wait(w http.ResponseWriter, r *http.Request, p peer) error {
	var req client.WaitRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ts, err := d.resolveAll(req.IDs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-d.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	type ended struct {
		t   target
		rec gpusched.Record
		err error
	}
	// A task the scheduler holds is waited for; one it does not hold is
	// finished (retired, or before this daemon started), read once here.
	results := make(chan ended, len(ts))
	var waitFor []target
	for _, t := range ts {
		if _, held := d.sched.Record(t.id); held {
			waitFor = append(waitFor, t)
			continue
		}
		rec, ok := d.stored(t.id)
		if !ok {
			return errorf(http.StatusNotFound, "task %s is not in the scheduler (its run is being submitted, or its submission was lost)", t.show)
		}
		results <- ended{t: t, rec: rec}
	}
	for _, t := range waitFor {
		go func() {
			recs, err := d.sched.Wait(ctx, []string{t.id})
			e := ended{t: t, err: err}
			if err == nil {
				e.rec = recs[0]
			}
			results <- e
		}()
	}
	s := startStream(w)
	for range ts {
		var e ended
		select {
		case e = <-results:
		case <-ctx.Done():
			return nil
		}
		if e.err != nil {
			if !errors.Is(e.err, context.Canceled) {
				d.log.Printf("wait for %s: %v", e.t.show, e.err)
			}
			return nil // the client asks again
		}
		sh := shownOf(&e.rec) // finished: nothing more than what a finished task shows
		ti := d.info(p, e.t.run, e.t.meta, &sh, nil, nil)
		if err := s.send(client.WaitLine{Task: &ti}); err != nil {
			return nil
		}
	}
	_ = s.send(client.WaitLine{End: true})
	return nil
}

// gpus serves GET /v1/gpus: the ledger, or nvidia-smi read now while the
// scheduler has not read the cards.
func (d *Daemon) gpus(w http.ResponseWriter, r *http.Request, _ peer) error {
	out := client.GPUs{Source: "daemon", Cards: []client.Card{}}
	cards, known := d.sched.Cards()
	if !known {
		out.Source = "live"
		var err error
		cards, err = gpusched.ReadGPUs(r.Context(), d.sched.Settings())
		if err != nil {
			out.Source, out.Error = "none", oneLine(err.Error())
		}
	}
	for _, c := range cards {
		cc := client.Card{Index: c.Index, UUID: c.UUID, Name: c.Name, TotalMiB: c.TotalMiB, UsedMiB: c.UsedMiB, FreeMiB: c.FreeMiB,
			CapacityMiB: c.CapacityMiB, ForeignMiB: c.ForeignMiB, ForeignProcs: c.ForeignProcs, ChargedMiB: c.ChargedMiB,
			AvailableMiB: c.AvailableMiB, Exclusive: c.Exclusive, State: c.State.String(), Reason: c.Reason, Until: c.Until,
			ReservedFor: d.show(c.ReservedFor), Tasks: make([]client.Holding, len(c.Holders))}
		for i, h := range c.Holders {
			cc.Tasks[i] = client.Holding{Task: d.show(h.Task), PID: h.PID, RequestMiB: h.RequestMiB, ObservedMiB: h.ObservedMiB,
				PeakMiB: h.PeakMiB, Exclusive: h.Exclusive}
		}
		out.Cards = append(out.Cards, cc)
	}
	return writeJSON(w, http.StatusOK, out)
}

// events serves GET /v1/events: the committed events as a stream, from
// now on or after event from=N. Users other than root see those of their
// own tasks, and those of the GPUs.
func (d *Daemon) events(w http.ResponseWriter, r *http.Request, p peer) error {
	var from uint64
	if f := r.URL.Query().Get("from"); f != "" {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, "from %q: give an event's number", f)
		}
		from = n
	}
	sub, err := d.sched.Subscribe(from, 4096)
	if err != nil {
		return errorf(http.StatusGone, "events after %d: %v", from, err)
	}
	defer sub.Close()
	s := startStream(w)
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				return nil
			}
			if ev.TaskID != "" && p.uid != 0 {
				if rn, _, ok := d.runOf(ev.TaskID); !ok || !owns(p, rn) {
					continue
				}
			}
			if err := s.send(d.event(ev)); err != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-d.stopping:
			return nil
		}
	}
}

// runOf returns the run of the scheduler's task id.
func (d *Daemon) runOf(id string) (*run, string, bool) {
	runID, inner, ok := splitTaskID(id)
	if !ok {
		return nil, "", false
	}
	rn := d.runs.get(runID)
	return rn, inner, rn != nil
}

// event is an event as the daemon's clients see it.
func (d *Daemon) event(ev gpusched.Event) client.Event {
	out := client.Event{Seq: ev.Seq, Time: ev.Time, Kind: ev.Kind.String(), Error: ev.Error, NotNeeded: ev.NotNeeded}
	if ev.TaskID != "" {
		out.Task = d.show(ev.TaskID)
	}
	if ev.BlockedBy != "" {
		out.BlockedBy = d.show(ev.BlockedBy)
	}
	if ev.Attempt.Number > 0 {
		out.Attempt, out.ExitCode, out.GPU, out.GPUs = ev.Attempt.Number, ev.Attempt.ExitCode, ev.Attempt.GPU, ev.Attempt.GPUs
		if ev.Attempt.GPU != nil {
			out.GPUMiB = ev.Attempt.MemRequestedMiB
		}
	}
	return out
}

// resolveOwned is resolveAll of tasks p may verb: all of them are p's, or
// p is root; else nothing is done and the first of another's is refused.
func (d *Daemon) resolveOwned(p peer, ids []string, verb string) ([]target, error) {
	ts, err := d.resolveAll(ids)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if !owns(p, t.run) {
			return nil, d.forbidden(t, verb)
		}
	}
	return ts, nil
}
