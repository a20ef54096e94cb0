package fakeremote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// Why the controller stops a job: the cause of its context.
var (
	errCancelled   = errors.New("cancelled by its owner")
	errAbandoned   = errors.New("abandoned: its handle was never saved")
	errPreempted   = errors.New("preempted")
	errNodeFailure = errors.New("the node running it failed")
)

// Controller stands in for a batch system's controller: it holds jobs by
// id, queues them, runs them (on this machine, with the local executor)
// and remembers how they ended, whatever becomes of the executors that
// submitted them. It is safe for concurrent use.
type Controller struct {
	queueDelay time.Duration  // how long a released job waits before it runs
	runner     local.Executor // runs the jobs; read-only

	mu   sync.Mutex     // guards the fields below
	last int64          // the last job id handed out
	jobs map[int64]*job // every job ever submitted, by id; never forgotten
}

// NewController returns a controller whose released jobs wait queueDelay
// before they run.
func NewController(queueDelay time.Duration) *Controller {
	return &Controller{queueDelay: queueDelay, jobs: map[int64]*job{}}
}

// job is one batch job. Its channels are closed once each; the field set
// before a channel is closed is read only after it is.
type job struct {
	id   int64
	spec executor.Job // as submitted, with the controller's own KillNow

	ctx  context.Context // done when the job is to stop; its cause says why
	stop context.CancelCauseFunc

	killNow  chan struct{} // closed: SIGKILL now
	killOnce sync.Once
	release  chan struct{} // closed: it may run
	relOnce  sync.Once

	running chan struct{} // closed when the command runs; since is set before
	since   time.Time
	done    chan struct{} // closed when the job has ended; result is set before
	result  executor.Result
}

// submit holds a new job: it runs only once released.
func (c *Controller) submit(spec executor.Job) *job {
	ctx, stop := context.WithCancelCause(context.Background())
	j := &job{
		spec: spec, ctx: ctx, stop: stop,
		killNow: make(chan struct{}), release: make(chan struct{}),
		running: make(chan struct{}), done: make(chan struct{}),
	}
	j.spec.KillNow = j.killNow
	c.mu.Lock()
	c.last++
	j.id = c.last
	c.jobs[j.id] = j
	c.mu.Unlock()
	go c.run(j)
	return j
}

// run takes j from held to its end.
func (c *Controller) run(j *job) {
	neverRan := func() {
		now := time.Now()
		j.result = executor.Result{Reason: executor.Cancelled, Start: now, End: now,
			Err: fmt.Errorf("%s job %d never ran: %w", Name, j.id, context.Cause(j.ctx))}
		close(j.done)
	}
	select {
	case <-j.release:
	case <-j.ctx.Done():
		neverRan()
		return
	}
	queued := time.NewTimer(c.queueDelay)
	defer queued.Stop()
	select {
	case <-queued.C:
	case <-j.ctx.Done():
		neverRan()
		return
	}
	res := c.runner.Execute(j.ctx, j.spec, executor.Hooks{Running: func(r executor.Running) {
		j.since = r.Since
		close(j.running)
	}})
	if res.Started {
		switch cause := context.Cause(j.ctx); cause {
		case errPreempted:
			res.Reason = executor.Preempted
		case errNodeFailure:
			res.Reason = executor.NodeFailure
			res.Err = fmt.Errorf("%s job %d: %w", Name, j.id, cause)
		}
	}
	j.result = res
	close(j.done)
}

// cancel stops j as scancel does: SIGTERM, its kill grace, SIGKILL; a
// job not yet running never will.
func (j *job) cancel(cause error) { j.stop(cause) }

// kill stops j with SIGKILL at once.
func (j *job) kill(cause error) {
	j.killOnce.Do(func() { close(j.killNow) })
	j.stop(cause)
}

// let releases a held job.
func (j *job) let() { j.relOnce.Do(func() { close(j.release) }) }

// isRunning reports whether j's command runs now.
func (j *job) isRunning() bool {
	select {
	case <-j.done:
		return false
	default:
	}
	select {
	case <-j.running:
		return true
	default:
		return false
	}
}

// lookup returns the job with id, or nil.
func (c *Controller) lookup(id int64) *job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs[id]
}

// stopToken kills every job not yet ended whose token is token, waits
// for their end and returns how many there were.
func (c *Controller) stopToken(token string) int {
	if token == "" {
		return 0
	}
	c.mu.Lock()
	var found []*job
	for _, j := range c.jobs {
		if j.spec.Token == token {
			found = append(found, j)
		}
	}
	c.mu.Unlock()
	n := 0
	for _, j := range found {
		select {
		case <-j.done:
			continue
		default:
		}
		j.kill(errAbandoned)
		<-j.done
		n++
	}
	return n
}

// runningJob returns the running job with id, or an error.
func (c *Controller) runningJob(id int64) (*job, error) {
	j := c.lookup(id)
	switch {
	case j == nil:
		return nil, fmt.Errorf("%s job %d: no such job", Name, id)
	case !j.isRunning():
		return nil, fmt.Errorf("%s job %d: not running", Name, id)
	}
	return j, nil
}

// Preempt takes back the running job id, as a batch system does for a
// job of higher priority: SIGTERM, the job's kill grace, then SIGKILL. It
// ends Preempted.
func (c *Controller) Preempt(id int64) error {
	j, err := c.runningJob(id)
	if err != nil {
		return fmt.Errorf("preempt: %w", err)
	}
	j.cancel(errPreempted)
	return nil
}

// FailNode fails the machine running job id: its processes die at once
// and it ends NodeFailure.
func (c *Controller) FailNode(id int64) error {
	j, err := c.runningJob(id)
	if err != nil {
		return fmt.Errorf("fail node: %w", err)
	}
	j.kill(errNodeFailure)
	return nil
}
