package engine

import "sync/atomic"

// maxIdleWorkers bounds the workers that wait for the next attempt.
const maxIdleWorkers = 64

// workers runs the attempts' goroutines (a Runner's Run each). A worker
// whose attempt ended waits for the next one rather than exiting: a new
// goroutine's stack starts small and grows, copied each time, through
// the runner, the executor and the fork (runtime.newstack was 2-5% of
// the scheduler's CPU with 2,000 one-millisecond tasks), while a worker
// keeps the stack it grew. Idle workers exit when the loop ends, and
// beyond maxIdleWorkers.
type workers struct {
	jobs   chan func()   // unbuffered: a send succeeds only to an idle worker
	idle   atomic.Int32  // workers waiting on jobs
	closed chan struct{} // the engine's: closed when the loop has ended
}

func newWorkers(closed chan struct{}) *workers {
	return &workers{jobs: make(chan func()), closed: closed}
}

// run runs f on an idle worker, or on a new one when none is idle.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	for {
		f()
		f = nil // what it holds is not kept while idle
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.jobs:
			w.idle.Add(-1)
		case <-w.closed:
			w.idle.Add(-1)
			return
		}
	}
}
