package gpusched

import (
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// forgetter is an executor that keeps how attempts ended outside the
// state until it is told that their ends are committed: the supervisor's
// results file (supervise.Executor, supervise.Journaled), which is
// compacted once they are.
type forgetter interface {
	Forget(token string, pid int)
}

// observer returns what the engine tells of each committed transition:
// the user's observer f, and, when the local executor keeps ends outside
// the state, the news that an attempt's end is committed. The engine
// calls it only after the commit, so a scheduler killed before it keeps
// the end in the results file for the next one's Recover.
func (s *Scheduler) observer(f func(Event)) func(engine.Event) {
	pub := publicObserver(f)
	fg, ok := s.executors[local.Name].(forgetter)
	if !ok {
		return pub
	}
	return func(ev engine.Event) {
		if ended(ev.Kind) && ev.Attempt.Number > 0 {
			fg.Forget(s.token(ev.TaskID, ev.Attempt.Number), ev.Attempt.PID)
		}
		if pub != nil {
			pub(ev)
		}
	}
}

// ended says whether an event of kind k commits an attempt's end.
func ended(k engine.EventKind) bool {
	return k == engine.Retrying || k == engine.Completed || k == engine.Failed || k == engine.TaskCancelled
}

// sweeper is a forgetter that can be told, once the state is loaded,
// every attempt it shows running (supervise.Executor.Sweep): the ends of
// the others are committed, so those that an earlier scheduler never
// forgot (it exited without closing) may go too.
type sweeper interface {
	Sweep(running []string)
}

// sweepResults tells the local executor, when it keeps ends outside the
// state, which of its attempts the state showed running at Open (all of
// them: the engine recovers every orphan at Open, before anything
// starts, and this scheduler holds the run directory's lock).
func (s *Scheduler) sweepResults() {
	if sw, ok := s.executors[local.Name].(sweeper); ok {
		sw.Sweep(s.localRunning)
	}
	s.localRunning = nil
}
