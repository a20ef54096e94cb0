package cli

import (
	"context"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// reserved is a run directory taken, and its state database checked,
// while its workflow was read (loadReserving); or why it could not be.
type reserved struct {
	r   *gpusched.Reservation
	err error
}

// open makes the run's scheduler on the reservation, or gives the error
// that kept it from being made: where gpusched.New would have given it.
func (r *reserved) open(s gpusched.Scheduling, opts ...gpusched.Option) (*gpusched.Scheduler, error) {
	if r.err != nil {
		return nil, r.err
	}
	return r.r.New(s, opts...)
}

// release gives the run directory back if no scheduler took it.
func (r *reserved) release() {
	if r.r != nil {
		r.r.Release()
	}
}

// loadReserving reads the workflow (load) while another goroutine takes
// the run directory dir, checks its state database and reads its tasks
// (gpusched.Reserve: SQLite's quick_check, which reads every page, then
// store.Load through the same read-only connection; about 0.4 s on
// 100,000 tasks, beside the 0.3-0.4 s of reading the workflow). Nothing
// in the run directory's state changes before the workflow is found
// valid: an invalid one (or an interruption, w nil) gives load's answer,
// whatever became of the reservation, which is released. A reservation
// that failed (a directory another scheduler holds, a damaged state
// database) is said by open, where New would have said it.
//
// The two halves overlap only with the garbage collector off while they
// run (collectNone): a collection while both allocate made each slower
// by as much as they overlapped, the system time up threefold
// (docs/benchmarks.md, "Seventh round: the parse and the load").
func loadReserving(ctx context.Context, dir string, load func() (*workflow.Workflow, error)) (*workflow.Workflow, *reserved, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan *reserved, 1)
	go func() {
		r, err := gpusched.Reserve(ctx, dir)
		done <- &reserved{r: r, err: err}
	}()
	w, err := load()
	if err != nil || w == nil {
		cancel() // a wait for the lock ends at once
		(<-done).release()
		return nil, nil, err
	}
	return w, <-done, nil
}
