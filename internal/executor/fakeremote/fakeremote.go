package fakeremote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// Executor hands jobs to a Controller and follows them there. Several
// executors may share one controller; see the package documentation.
type Executor struct {
	c         *Controller
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

var _ executor.Executor = (*Executor)(nil)

// New returns an executor over c.
func New(c *Controller) *Executor {
	return &Executor{c: c, closed: make(chan struct{})}
}

// Close makes e behave as the executor of a scheduler that died: its
// Execute and Wait calls return at once, Lost, and its jobs go on in the
// controller. Execute after Close fails.
func (e *Executor) Close() { e.closeOnce.Do(func() { close(e.closed) }) }

func (e *Executor) isClosed() bool {
	select {
	case <-e.closed:
		return true
	default:
		return false
	}
}

// Name is "fakeremote".
func (e *Executor) Name() string { return Name }

var _ executor.Placer = (*Executor)(nil)

// PlacesWork is true, as for the batch system it plays: a GPU task of it
// is not admitted by this machine's cards.
func (e *Executor) PlacesWork() bool { return true }

// MaxGPUMiB is 0: the fake's GPUs have no known size.
func (e *Executor) MaxGPUMiB(*task.Spec) int64 { return 0 }

// HonoursGate: Execute waits for Job.Gate before it submits anything.
func (e *Executor) HonoursGate() {}

var _ executor.Gated = (*Executor)(nil)

// Execute submits job to the controller held, tells hooks.Submitted its
// handle, releases it and follows it to its end; see the package
// documentation. Running is told with PID 0: the job runs elsewhere.
func (e *Executor) Execute(ctx context.Context, job executor.Job, hooks executor.Hooks) executor.Result {
	if e.isClosed() {
		now := time.Now()
		return executor.Result{Reason: executor.Infrastructure, Start: now, End: now,
			Err: errors.New("submit to " + Name + ": executor closed")}
	}
	if err := job.AwaitGate(); err != nil {
		now := time.Now()
		return executor.Result{Reason: executor.Infrastructure, Start: now, End: now, Err: err}
	}
	j := e.c.submit(job)
	if hooks.Submitted != nil {
		if err := hooks.Submitted(EncodeHandle(j.id)); err != nil {
			j.kill(errAbandoned)
			<-j.done
			return executor.Result{Reason: executor.Infrastructure, Start: j.result.Start, End: j.result.End,
				Err: fmt.Errorf("save the handle of %s job %d: %w", Name, j.id, err)}
		}
	}
	if e.isClosed() {
		// The scheduler died after it saved the handle: the job stays
		// held until one recovers it.
		return e.detached(j)
	}
	j.let()
	return e.watch(ctx, j, job.KillNow, hooks.Running)
}

// watch follows j until it ends or e is closed: ctx done cancels it,
// killNow closed kills it, and running, when not nil, is told when it
// runs.
func (e *Executor) watch(ctx context.Context, j *job, killNow <-chan struct{}, running func(executor.Running)) executor.Result {
	tell := func() {
		if running != nil {
			running(executor.Running{Handle: EncodeHandle(j.id), Since: j.since})
			running = nil
		}
	}
	started, done := j.running, ctx.Done()
	for {
		select {
		case <-started:
			tell()
			started = nil
		case <-j.done:
			if j.result.Started {
				tell()
			}
			return j.result
		case <-done:
			j.cancel(errCancelled)
			done = nil
		case <-killNow:
			j.kill(errCancelled)
			killNow = nil
		case <-e.closed:
			return e.detached(j)
		}
	}
}

// detached is the result of a call that stopped following j because e
// was closed.
func (e *Executor) detached(j *job) executor.Result {
	now := time.Now()
	return executor.Result{Reason: executor.Lost, Start: now, End: now,
		Err: fmt.Errorf("%s executor closed: job %d goes on without it", Name, j.id)}
}

// Recover finds each orphan's job in the controller by the id in its
// handle: one not ended is reattached to (released, if it was still
// held), one ended reports its result. An orphan without a handle, with
// an unreadable one or with an id the controller does not know is Lost;
// without a handle, the jobs carrying its token are killed first.
func (e *Executor) Recover(orphans []executor.Orphan) []executor.Recovery {
	out := make([]executor.Recovery, len(orphans))
	for i, o := range orphans {
		lost := func(why error) {
			out[i].Result = executor.Result{Reason: executor.Lost, End: time.Now(), Err: why}
		}
		if o.Handle.IsZero() {
			n := e.c.stopToken(o.Job.Token)
			lost(fmt.Errorf("no handle of the attempt was saved; killed %d %s job(s) carrying its token", n, Name))
			continue
		}
		id, err := JobID(o.Handle)
		if err != nil {
			lost(err)
			continue
		}
		j := e.c.lookup(id)
		if j == nil {
			lost(fmt.Errorf("%s job %d: no such job", Name, id))
			continue
		}
		select {
		case <-j.done:
			out[i].Result = j.result
			continue
		default:
		}
		j.let()
		out[i].Running = executor.Running{Handle: EncodeHandle(id)}
		if j.isRunning() {
			out[i].Running.Since = j.since
		}
		killNow := o.Job.KillNow
		out[i].Wait = func(ctx context.Context) executor.Result { return e.watch(ctx, j, killNow, nil) }
	}
	return out
}
