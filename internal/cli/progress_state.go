package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// The live display's model of the run: every task's state, the running
// tasks, and the lines to print above the display. The scheduler's observer
// updates it (under liveDisplay's mutex); progress_render.go draws it.

// maxLinesAbove is how many lines a frame prints above the display; more
// are counted, not printed.
const maxLinesAbove = 200

// progressState is what the live display knows of the run.
type progressState struct {
	total    int
	state    map[string]gpusched.State
	counts   [gpusched.StateCancelled + 1]int // by state
	kept     int                              // complete from an earlier run
	ended    int                              // attempts that ended a task (complete or failed) in this run
	running  map[string]runningTask
	lines    []string // to print above the display
	dropped  int      // lines not printed (more than maxLinesAbove in a frame)
	stopping bool
	// gpuUnknown is why the GPUs cannot be read, while they cannot (GPU
	// tasks wait).
	gpuUnknown string
	// notNeeded holds the blocked tasks that are not needed (counted
	// blocked too).
	notNeeded map[string]bool
	// line formats an event as a line above the display; nil: eventLine.
	line func(gpusched.Event) string
}

type runningTask struct {
	id      string
	attempt int
	start   time.Time
	// cards are the cards it runs on (gpusched.Attempt.Cards), nil on
	// none; reqMiB is its budget on each.
	cards   []int
	reqMiB  int64
	adopted bool // started by an earlier scheduler, adopted by this one
	// job is its job in a batch system (Slurm), as it last said; nil for
	// a task run here.
	job *task.RemoteJob
}

func newProgressState(total int) progressState {
	return progressState{total: total, state: map[string]gpusched.State{}, running: map[string]runningTask{}, notNeeded: map[string]bool{}}
}

func (s *progressState) set(id string, st gpusched.State) {
	if old, ok := s.state[id]; ok {
		s.counts[old]--
	}
	delete(s.notNeeded, id)
	s.state[id] = st
	s.counts[st]++
}

// reset sets every task's state from the records, as they are before the
// run starts.
func (s *progressState) reset(records []gpusched.Record) {
	s.total = len(records)
	s.state = make(map[string]gpusched.State, len(records))
	s.counts = [len(s.counts)]int{}
	clear(s.notNeeded)
	for _, r := range records {
		s.set(r.ID, r.State)
		if r.NotNeeded {
			s.notNeeded[r.ID] = true
		}
	}
	s.kept = s.counts[gpusched.StateComplete]
}

func (s *progressState) apply(ev gpusched.Event) {
	a := ev.Attempt
	switch ev.Kind {
	case gpusched.EventStarted:
		s.set(ev.TaskID, gpusched.StateRunning)
		s.running[ev.TaskID] = runningTask{id: ev.TaskID, attempt: a.Number, start: a.Start, cards: (*task.Attempt)(&a).Cards(), reqMiB: a.MemRequestedMiB}
	case gpusched.EventRetrying:
		s.set(ev.TaskID, gpusched.StatePending)
		delete(s.running, ev.TaskID)
	case gpusched.EventComplete:
		s.set(ev.TaskID, gpusched.StateComplete)
		delete(s.running, ev.TaskID)
		s.ended++
	case gpusched.EventFailed:
		s.set(ev.TaskID, gpusched.StateFailed)
		delete(s.running, ev.TaskID)
		s.ended++
	case gpusched.EventBlocked:
		s.set(ev.TaskID, gpusched.StateBlocked)
		if ev.NotNeeded {
			s.notNeeded[ev.TaskID] = true
		}
	case gpusched.EventCancelled:
		s.set(ev.TaskID, gpusched.StateCancelled)
		delete(s.running, ev.TaskID)
	case gpusched.EventGPUUnknown:
		s.gpuUnknown = ev.Error
	case gpusched.EventGPUKnown:
		s.gpuUnknown = ""
	case gpusched.EventAdopted:
		if !ev.Ended {
			s.set(ev.TaskID, gpusched.StateRunning)
			s.running[ev.TaskID] = runningTask{id: ev.TaskID, attempt: a.Number, start: a.Start, cards: (*task.Attempt)(&a).Cards(), reqMiB: a.MemRequestedMiB,
				adopted: true, job: a.Job}
		}
	case gpusched.EventJob:
		if t, ok := s.running[ev.TaskID]; ok && t.attempt == a.Number {
			t.job, t.start = a.Job, a.Start // once its command runs, its real start
			s.running[ev.TaskID] = t
		}
	case gpusched.EventDeliveryFailed, gpusched.EventCardQuarantined:
	}
	switch ev.Kind {
	case gpusched.EventRetrying, gpusched.EventFailed, gpusched.EventCancelled,
		gpusched.EventDeliveryFailed, gpusched.EventCardQuarantined, gpusched.EventGPUUnknown, gpusched.EventGPUKnown,
		gpusched.EventAdopted:
		if s.line != nil {
			s.addLine(s.line(ev))
		} else {
			s.addLine(eventLine(ev))
		}
	case gpusched.EventStarted, gpusched.EventComplete, gpusched.EventBlocked, gpusched.EventJob:
	}
}

func (s *progressState) addLine(line string) {
	if len(s.lines) >= maxLinesAbove {
		s.dropped++
		return
	}
	s.lines = append(s.lines, printable(strings.ReplaceAll(line, "\n", " ")))
}

// takeLines returns the lines to print above the display and forgets them.
func (s *progressState) takeLines() []string {
	lines := s.lines
	if s.dropped > 0 {
		lines = append(lines, fmt.Sprintf("(%d more lines not shown here; the summary and gpusched status have every task)", s.dropped))
	}
	s.lines, s.dropped = nil, 0
	return lines
}
