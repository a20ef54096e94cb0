package engine

// Recovery at Open: attempts an earlier scheduler left running are
// adopted, recorded from their result, or recorded interrupted.

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// adoption is an attempt recovered at Open, to be watched once the loop runs.
type adoption struct {
	n   *node
	req AttemptRequest
	rc  executor.Recovery
}

// recoverOrphans finds, through the Runner, the attempts recorded running in
// rows. Those that still run or ended while no scheduler ran become adopted
// tasks (in e.adopted until a submission claims them); those whose outcome
// is lost are recorded interrupted and their tasks pending, as the rows the
// next submission resumes from. Writes go to e.batch.
func (e *Engine) recoverOrphans(rows []store.Row) []adoption {
	now := e.cfg.Now()
	var orphans []Orphan
	var owners []*store.Row
	var specs []*task.Spec
	for i := range rows {
		r := &rows[i]
		e.earlier[r.ID] = r
		e.nextSeq = max(e.nextSeq, r.Seq+1)
		if r.State != task.Running {
			continue
		}
		last := len(r.Attempts) - 1
		var sp task.Spec
		err := json.Unmarshal(r.Spec, &sp)
		if last < 0 || r.Attempts[last].Ended() || err != nil || sp.ID != r.ID {
			e.interrupt(r, stoppedDuring)
			continue
		}
		// Attempts before the last that never ended are from a crash
		// long ago: nothing of them can be found.
		for j := range last {
			if a := &r.Attempts[j]; !a.Ended() {
				e.endInterrupted(r, a, now, stoppedDuring)
			}
		}
		a := r.Attempts[last]
		req := AttemptRequest{Spec: &sp, Number: a.Number, LogPath: a.LogPath, KillNow: e.killNow, Timeout: e.timeoutOf(&sp)}
		switch {
		case e.placed(&sp):
			req.GPUMiB = cmp.Or(a.MemRequestedMiB, max(sp.Resources.MemoryMiB, r.GPURequestMiB))
		case a.GPU != nil:
			req.GPU = &Assignment{Index: *a.GPU, UUID: a.GPUUUID, MemoryMiB: a.MemRequestedMiB}
			if len(a.GPUs) > 1 {
				for _, c := range a.GPUs {
					req.GPU.More = append(req.GPU.More, AssignedCard{Index: c})
				}
				req.GPU.More[0].UUID = a.GPUUUID
			}
		}
		id, number := r.ID, a.Number
		progress := func(p executor.Progress) { e.send(progressEvent{id: id, number: number, p: p}) }
		orphans = append(orphans, Orphan{Req: req, Handle: r.Handles[a.Number], Progress: progress})
		owners = append(owners, r)
		specs = append(specs, &sp)
	}
	if len(orphans) == 0 {
		return nil
	}
	found := e.cfg.Runner.Recover(orphans)
	var out []adoption
	for k, rc := range found {
		r, sp := owners[k], specs[k]
		if rc.Wait == nil && rc.Result.Reason == executor.Lost {
			a := &r.Attempts[len(r.Attempts)-1]
			why := stoppedDuring
			if rc.Result.Err != nil {
				why = "interrupted: " + rc.Result.Err.Error()
			}
			end := rc.Result.End
			if end.IsZero() {
				end = now
			}
			a.EndReason = executor.Lost.String()
			e.endInterrupted(r, a, end, why)
			e.interrupt(r, why)
			continue
		}
		n := e.adopt(r, sp, rc)
		out = append(out, adoption{n: n, req: orphans[k].Req, rc: rc})
	}
	return out
}

// stoppedDuring is why an attempt whose outcome is lost was interrupted,
// when its executor says no more.
const stoppedDuring = "interrupted: the scheduler stopped during the attempt"

// endInterrupted records an attempt of r whose outcome is lost.
func (e *Engine) endInterrupted(r *store.Row, a *task.Attempt, end time.Time, why string) {
	a.End, a.Interrupted, a.Error = end, true, why
	e.batch.Attempts = append(e.batch.Attempts, store.AttemptWrite{TaskID: r.ID, Attempt: *a, Handle: r.Handles[a.Number]})
}

// interrupt makes task r, recorded running, pending again: every attempt of
// it not ended is recorded interrupted with why.
func (e *Engine) interrupt(r *store.Row, why string) {
	now := e.cfg.Now()
	for j := range r.Attempts {
		if a := &r.Attempts[j]; !a.Ended() {
			e.endInterrupted(r, a, now, why)
		}
	}
	r.State = task.Pending
	e.batch.Tasks = append(e.batch.Tasks, store.TaskWrite{ID: r.ID, Seq: r.Seq, Kind: r.Kind, State: task.Pending,
		ExitCode: r.ExitCode, Error: "interrupted", GPURequestMiB: r.GPURequestMiB, Paused: r.Paused})
}

// adopt makes a node of task r, whose last attempt is recovered (running
// or ended while no scheduler watched): it runs in this engine from now,
// its GPU memory held on its card before anything else is admitted.
func (e *Engine) adopt(r *store.Row, sp *task.Spec, rc executor.Recovery) *node {
	n := &node{spec: sp, seq: r.Seq, fingerprint: r.Fingerprint, card: -1, adopted: true, placed: e.remote(sp)}
	n.rec = r.Record
	n.rec.Attempts = slices.Clone(r.Attempts)
	n.rec.Artifacts = slices.Clone(r.Artifacts)
	n.handles = maps.Clone(r.Handles)
	n.rec.State = task.Running
	n.rec.Waiting = task.WaitReason{} // an earlier scheduler's, if any: it runs
	number := len(n.rec.Attempts)
	a := &n.rec.Attempts[number-1]
	a.Adopted = true
	if rc.Wait != nil {
		if !rc.Running.Since.IsZero() {
			a.Start = rc.Running.Since
		}
		if rc.Running.PID > 0 {
			a.PID = rc.Running.PID
		}
		if !rc.Running.Handle.IsZero() {
			n.setHandle(number, rc.Running.Handle)
		}
	}
	var mib int64 // GPU memory charged to its owner
	if sp.Resources.GPU() {
		n.need = needOf(sp.Resources)
		if r.GPURequestMiB > n.need.MiB {
			n.need.MiB = r.GPURequestMiB
		}
		if cards := a.Cards(); len(cards) > 0 && !n.placed {
			// Every card it runs on is charged, before anything else
			// is admitted.
			n.card = int16(cards[0])
			if len(cards) > 1 {
				e.setMulti(n, slices.Clone(cards))
			}
			held := n.need
			if a.MemRequestedMiB > 0 {
				held.MiB = a.MemRequestedMiB
			}
			for _, c := range cards {
				e.board.HoldSince(sp.ID, c, held, a.Start)
				if a.PID > 0 {
					e.board.SetPID(sp.ID, c, a.PID)
				}
			}
			if e.cfg.Token != nil {
				e.board.SetToken(sp.ID, e.cfg.Token(sp.ID, number))
			}
			e.gpuRunning++
			e.cardsDirty = true
			mib = held.MiB * int64(len(cards))
		}
	}
	e.running++
	e.charge(n, mib)
	e.takeHost(n)
	if e.adopted == nil {
		e.adopted = map[string]*node{}
	}
	e.adopted[sp.ID] = n
	e.writeTask(n)
	e.writeAttempt(n, number)
	e.notify(Event{Kind: Adopted, TaskID: sp.ID, Attempt: *a, Ended: rc.Wait == nil})
	return n
}

// watch follows an adopted attempt to its end on a goroutine of its own,
// judges its result as Run would have, and hands it to the loop.
func (e *Engine) watch(ad adoption) {
	n, number := ad.n, ad.req.Number
	ctx, cancel := context.WithCancelCause(context.Background())
	n.cancel = cancel
	go func() {
		res := ad.rc.Result
		if ad.rc.Wait != nil {
			res = ad.rc.Wait(ctx)
		}
		out := e.cfg.Runner.Finish(ctx, ad.req, res)
		e.send(exitEvent{n: n, number: number, out: out, cause: context.Cause(ctx)})
	}()
}

// claim takes over, for a submitted spec, the adopted node of the same id:
// the task was running when its scheduler died and is submitted again. Its
// running attempt goes on under the definition it started with; when the
// definition changed, the task runs again once that attempt completes.
func (e *Engine) claim(n *node, s *task.Spec, specJSON []byte, fingerprint string, now time.Time) {
	delete(e.adopted, s.ID)
	n.adopted, n.claimed = false, true
	if fingerprint != "" && n.fingerprint != "" && fingerprint != n.fingerprint {
		n.rerunAfter = "definition changed while it ran"
	}
	n.spec, n.specJSON = s, specJSON
	if fingerprint != "" {
		n.fingerprint = fingerprint
	}
	if n.spec.Resources.GPU() && n.need.MiB < s.Resources.MemoryMiB {
		n.need.MiB = s.Resources.MemoryMiB
	}
	// It takes its place in submission order; the queues it may be in
	// (it ended and waits to retry) are ordered by that place.
	wasReady, wasDelayed, retryAt := n.inReady, n.inDelayed, n.rec.RetryAt
	e.unready(n)
	n.placed = e.remote(s)
	n.seq = e.nextSeq
	e.nextSeq++
	n.rec.Submitted = now
	if wasDelayed {
		n.rec.RetryAt = retryAt
		e.delay(n)
	} else if wasReady {
		e.makeReady(n)
	}
}

// notTheTasks says why a failed attempt does not use up a retry.
func notTheTasks(out Outcome) string {
	switch out.Reason {
	case executor.Lost:
		return "its outcome was lost, not the task's fault: it does not use up a retry"
	case executor.Preempted:
		return "preempted, not the task's fault: it does not use up a retry"
	case executor.NodeFailure:
		return "its node failed, not the task's fault: it does not use up a retry"
	}
	return "a fault of the environment, not the task's: it does not use up a retry"
}

// runEffects performs the effects queued so far, after a commit that
// returned err.
func (e *Engine) runEffects(err error) {
	effects := e.effects
	e.effects = nil
	for _, f := range effects {
		f(err)
	}
}
