package engine

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// Pausing, resuming and retrying tasks.
//
// A paused task (task.Record.Paused) is kept out of the ready queue, so
// decide never sees it and costs nothing more for it: makeReady parks it
// with the reason WaitPaused instead. Pausing a running task lets its
// attempt run on (or, with stop, stops its processes with SIGSTOP); if
// that attempt fails and the task would run again, it waits paused. The
// flag is saved with the task's row, so a scheduler opened after a crash
// keeps the task paused from its first turn. A task that finishes is no
// longer paused.
//
// Retry makes a failed, cancelled or blocked task pending again with its
// retries renewed, and with it every task it blocked, directly or not.

// ErrNotRetryable is the kind of error Retry returns for a task that is
// pending, running or complete, or that depends on a task that failed, was
// cancelled or is blocked and is not retried with it.
var ErrNotRetryable = errors.New("cannot retry")

// Signaler is a Runner that can send a signal to the processes of a
// running attempt, found by the attempt's handle (Pause with stop sends
// SIGSTOP, Resume SIGCONT). A Runner that is not one cannot stop tasks.
type Signaler interface {
	Signal(h executor.Handle, sig syscall.Signal) error
}

// Pause pauses the tasks ids names: a pending one does not start until
// resumed (it waits with WaitPaused), a running one runs on but does not
// start again until resumed. With stop, the processes of each running
// attempt among them are stopped with SIGSTOP (see Resume). Finished tasks
// are left as they are. It returns the tasks it paused (or stopped), in
// the order given, once that is committed; an id that names no task in
// memory fails the call before anything is paused.
func (e *Engine) Pause(ids []string, stop bool) ([]string, error) {
	return e.control(controlEvent{op: opPause, ids: ids, stop: stop})
}

// Resume resumes the paused tasks ids names: a pending one may start
// again, and the processes of a running one that Pause stopped (or that
// is paused and may have been stopped by an earlier scheduler) get
// SIGCONT. Tasks not paused are left as they are. It returns the tasks it
// resumed, once that is committed; an unknown id fails the call.
func (e *Engine) Resume(ids []string) ([]string, error) {
	return e.control(controlEvent{op: opResume, ids: ids})
}

// Retry makes each failed, cancelled or blocked task ids names pending
// again, its retries renewed, together with the tasks it blocked,
// directly or not. All or nothing: a task pending, running or complete,
// one whose dependency outside those retried fails its condition (a
// failed, cancelled or blocked task it needs to complete), or a task named
// that is not needed, fails the call (ErrNotRetryable), as does an unknown
// id. A task it takes up that turns out not needed stays blocked, as not
// needed. It returns every task made pending, the named ones first, once
// that is committed.
func (e *Engine) Retry(ids []string) ([]string, error) {
	return e.control(controlEvent{op: opRetry, ids: ids})
}

func (e *Engine) control(ev controlEvent) ([]string, error) {
	ev.reply = make(chan controlResult, 1)
	if !e.send(ev) {
		return nil, ErrClosed
	}
	r, ok := await(e, ev.reply)
	if !ok {
		return nil, ErrClosed
	}
	return r.ids, r.err
}

type controlOp uint8

const (
	opPause controlOp = iota + 1
	opResume
	opRetry
)

var controlVerbs = [...]string{opPause: "pause", opResume: "resume", opRetry: "retry"}

type controlEvent struct {
	op    controlOp
	ids   []string
	stop  bool
	reply chan controlResult
}

type controlResult struct {
	ids []string
	err error
}

func (ev controlEvent) apply(e *Engine) {
	if e.closing != nil {
		ev.reply <- controlResult{err: ErrClosed}
		return
	}
	if e.broken != nil {
		ev.reply <- controlResult{err: e.broken}
		return
	}
	nodes := make([]*node, 0, len(ev.ids))
	for _, id := range ev.ids {
		n := e.node(id)
		if n == nil {
			ev.reply <- controlResult{err: &task.Error{TaskID: id, Reason: "no such task to " + controlVerbs[ev.op], Kind: task.ErrUnknownTask}}
			return
		}
		nodes = append(nodes, n)
	}
	var done []string
	var signals []func() error
	switch ev.op {
	case opPause:
		done, signals = e.pause(nodes, ev.stop)
	case opResume:
		done, signals = e.resume(nodes)
	case opRetry:
		var err error
		if done, err = e.retry(nodes); err != nil {
			ev.reply <- controlResult{err: err}
			return
		}
	}
	e.effects = append(e.effects, func(err error) {
		if err != nil {
			ev.reply <- controlResult{err: err}
			return
		}
		var errs []error
		for _, s := range signals {
			errs = append(errs, s())
		}
		ev.reply <- controlResult{ids: done, err: errors.Join(errs...)}
	})
}

// pause pauses nodes; it returns those it paused or stopped, and the
// signals to send once that is committed.
func (e *Engine) pause(nodes []*node, stop bool) (done []string, signals []func() error) {
	for _, n := range nodes {
		switch n.rec.State {
		case task.Pending:
			if n.rec.Paused {
				continue
			}
			n.rec.Paused = true
			e.unready(n) // out of the ready queue, or of the retry delays
			e.setWait(n, task.WaitReason{Kind: task.WaitPaused})
			e.writeTask(n)
			done = append(done, n.spec.ID)
		case task.Running:
			stopNow := stop && !e.stopped[n] && n.cancel != nil && !n.cancelled
			if n.rec.Paused && !stopNow {
				continue
			}
			if !n.rec.Paused {
				n.rec.Paused = true
				e.writeTask(n)
			}
			if stopNow {
				s := e.signal(n, syscall.SIGSTOP)
				if s != nil {
					signals = append(signals, e.whileStopWanted(n, s))
				}
				if _, can := e.cfg.Runner.(Signaler); s != nil || can {
					// Without a handle yet (its start not recorded), the
					// attempt is stopped when its start is: stopWanted.
					if e.stopped == nil {
						e.stopped = map[*node]bool{}
					}
					e.stopped[n] = true
				}
			}
			done = append(done, n.spec.ID)
		case task.Complete, task.Failed, task.Cancelled, task.Blocked:
		}
	}
	return done, signals
}

// resume resumes nodes; it returns those it resumed, and the signals to
// send once that is committed.
func (e *Engine) resume(nodes []*node) (done []string, signals []func() error) {
	for _, n := range nodes {
		if !n.rec.Paused {
			continue
		}
		n.rec.Paused = false
		switch n.rec.State {
		case task.Pending:
			if n.waiting == 0 {
				e.makeReady(n)
			} else {
				e.setWait(n, task.WaitReason{Kind: task.WaitDependencies})
			}
		case task.Running:
			// SIGCONT whether or not this engine stopped it: an earlier
			// one may have, and to a process that runs it does nothing.
			if s := e.signal(n, syscall.SIGCONT); s != nil {
				signals = append(signals, s)
			}
			delete(e.stopped, n)
		case task.Complete, task.Failed, task.Cancelled, task.Blocked:
		}
		e.writeTask(n)
		done = append(done, n.spec.ID)
	}
	return done, signals
}

// recount counts again the dependencies pending task d waits for, one of
// which went back to pending (Retry): it waits for that one's new end.
func (e *Engine) recount(d *node) {
	d.waiting = 0
	for j, dep := range d.deps {
		if d.spec.On(d.spec.Dependencies[j]).Judge(dep.rec.State, dep.rec.NotNeeded) == task.Unsettled {
			d.waiting++
		}
	}
	if d.waiting == 0 {
		return
	}
	e.unready(d)
	if !d.rec.Paused {
		e.setWait(d, task.WaitReason{Kind: task.WaitDependencies})
	}
	e.staleDeps(d)
}

// notNeededState says how a dependency ended that a task it makes not
// needed depends on: "complete", or "not needed" itself.
func notNeededState(d *node) string {
	if d.rec.NotNeeded {
		return "not needed"
	}
	return d.rec.State.String()
}

// signal returns a function that sends sig to the processes of n's running
// attempt, or nil when that cannot be done: the Runner cannot signal, or
// the attempt has no handle yet.
func (e *Engine) signal(n *node, sig syscall.Signal) func() error {
	s, ok := e.cfg.Runner.(Signaler)
	if !ok || len(n.rec.Attempts) == 0 {
		return nil
	}
	number := len(n.rec.Attempts)
	h, ok := n.handles[number]
	if !ok || h.IsZero() {
		return nil
	}
	id := n.spec.ID
	return func() error {
		if err := s.Signal(h, sig); err != nil {
			return fmt.Errorf("send %s to task %q (attempt %d): %w", executor.SignalName(sig), id, number, err)
		}
		return nil
	}
}

// stopWanted sends SIGSTOP to n's attempt, whose start (and handle) is
// recorded now, when Pause asked to stop it before that: the task runs,
// and pause --stop must not be told done and leave it running.
func (e *Engine) stopWanted(n *node) {
	if !e.stopped[n] {
		return
	}
	if s := e.signal(n, syscall.SIGSTOP); s != nil {
		s = e.whileStopWanted(n, s)
		e.effects = append(e.effects, func(err error) {
			if err == nil {
				_ = s() // gone meanwhile: its end is recorded as any
			}
		})
	}
}

// whileStopWanted is the SIGSTOP s for n, sent (by an effect, on the
// loop) only if n is still to be stopped then: a cancel or a resume
// applied in the same turn has sent SIGCONT, and a SIGSTOP after it
// would leave the task stopped.
func (e *Engine) whileStopWanted(n *node, s func() error) func() error {
	return func() error {
		if !e.stopped[n] {
			return nil
		}
		return s()
	}
}

// continueStopped lets a stopped attempt that is being stopped for good
// handle its SIGTERM.
func (e *Engine) continueStopped(n *node) {
	if !e.stopped[n] {
		return
	}
	delete(e.stopped, n)
	if s := e.signal(n, syscall.SIGCONT); s != nil {
		go func() { _ = s() }()
	}
}

// retry makes nodes pending again with the tasks they blocked; it returns
// their ids, or why it cannot, having changed nothing.
func (e *Engine) retry(nodes []*node) ([]string, error) {
	in := make(map[*node]bool, len(nodes))
	set := make([]*node, 0, len(nodes))
	for _, n := range nodes {
		switch n.rec.State {
		case task.Failed, task.Cancelled, task.Blocked:
		case task.Pending, task.Running, task.Complete:
			return nil, &task.Error{TaskID: n.spec.ID, Kind: ErrNotRetryable,
				Reason: "it is " + n.rec.State.String() + "; only a failed, cancelled or blocked task can be retried"}
		}
		if !in[n] {
			in[n] = true
			set = append(set, n)
		}
	}
	// The tasks they blocked, directly or not (not those blocked as not
	// needed: they are, whatever these do).
	for i := 0; i < len(set); i++ {
		for _, d := range set[i].dependents {
			if d.rec.State == task.Blocked && !d.rec.NotNeeded && !in[d] && e.tasks[d.spec.ID] == d {
				in[d] = true
				set = append(set, d)
			}
		}
	}
	// What the tasks outside the set that they depend on mean to them, by
	// their conditions: one that failed there refuses the retry (retry
	// that too); a task named that is not needed is refused too, and one
	// taken up with them that is not needed stays blocked, as not needed
	// now (it was blocked by a failure too), with what depends on it.
	named := len(nodes)
	spared := map[*node]*node{} // a task taken up that is not needed -> the dependency that says so
	for i, n := range set {
		for j, d := range n.deps {
			if in[d] {
				continue // pending again with n
			}
			on := n.spec.On(n.spec.Dependencies[j])
			switch on.Judge(d.rec.State, d.rec.NotNeeded) {
			case task.Unmet:
				return nil, &task.Error{TaskID: n.spec.ID, Kind: ErrNotRetryable,
					Reason: fmt.Sprintf("it depends on %s, which is %s; retry that too", d.spec.ID, d.rec.State)}
			case task.NotNeeded:
				if i < named {
					return nil, &task.Error{TaskID: n.spec.ID, Kind: ErrNotRetryable,
						Reason: fmt.Sprintf("it is not needed: it depends on %s%s, which is %s", d.spec.ID, on.Phrase(), notNeededState(d))}
				}
				if spared[n] == nil {
					spared[n] = d
				}
			case task.Met, task.Unsettled:
			}
		}
	}
	for _, n := range set {
		was, rerun := n.rec.State, n.rec.Rerun
		n.rec.State, n.rec.Error, n.rec.BlockedBy, n.rec.NotNeeded = task.Pending, "", "", false
		n.rec.Rerun = "retried (was " + was.String() + ")"
		if spared[n] != nil {
			n.rec.Rerun = rerun // blocked again below: it does not run
		}
		n.failures, n.envFaults = 0, 0 // its retries renewed
		n.cancelled, n.userCancelled = false, false
	}
	// Dependencies first: each counts those that have not ended now (the
	// others meet its conditions, but for the spared ones).
	for _, n := range set {
		n.waiting = 0
		for j, d := range n.deps {
			if n.spec.On(n.spec.Dependencies[j]).Judge(d.rec.State, d.rec.NotNeeded) == task.Unsettled {
				n.waiting++
			}
		}
		if n.waiting == 0 {
			e.makeReady(n)
		} else {
			e.setWait(n, task.WaitReason{Kind: task.WaitDependencies})
		}
		e.writeTask(n)
	}
	for _, n := range set {
		if d := spared[n]; d != nil && n.rec.State == task.Pending {
			e.block(n, e.rootOf(d), d, true)
			e.settle(n)
		}
	}
	// A pending task outside the set whose condition one of them met as
	// it ended (on: any, on: failure) waits for its new end.
	for _, n := range set {
		for _, d := range n.dependents {
			if !in[d] && d.rec.State == task.Pending && e.tasks[d.spec.ID] == d {
				e.recount(d)
			}
		}
	}
	ids := make([]string, 0, len(set))
	for _, n := range set {
		if n.rec.State == task.Pending {
			ids = append(ids, n.spec.ID)
		}
	}
	return slices.Clip(ids), nil
}
