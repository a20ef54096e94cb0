package cli

import (
	"encoding/json"
	"math"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// "gpusched run --events FILE" writes one JSON object per line per event,
// for other programs to tail. The names below are a stable interface: add
// fields, never rename or remove them.

// The values of "event".
const (
	evStarted         = "started"          // an attempt started
	evAttemptEnded    = "attempt-ended"    // an attempt's process ended (or it could not start)
	evComplete        = "complete"         // the task completed
	evRetrying        = "retrying"         // the attempt failed; the task will run again
	evFailed          = "failed"           // the task failed for good
	evBlocked         = "blocked"          // the condition of a dependency can no longer be met (it failed or was cancelled; or "not_needed")
	evCancelled       = "cancelled"        // the task was cancelled (Ctrl-C, SIGTERM)
	evCardQuarantined = "card-quarantined" // a GPU was put in quarantine
	evEventFailed     = "event-failed"     // a completion handler (on_complete) failed; it is retried
	evGPUUnknown      = "gpu-unknown"      // the GPUs cannot be read (nvidia-smi fails or hangs); GPU tasks wait
	evGPUKnown        = "gpu-known"        // the GPUs can be read again
	evAdopted         = "adopted"          // an attempt left running by an earlier scheduler was adopted
	evJob             = "job"              // what the batch system running an attempt (Slurm) says of its job changed
)

// eventJSONLine is one line of --events. Fields that do not apply to an
// event are left out, except that "time" and "event" are always there.
type eventJSONLine struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	Task    string    `json:"task,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Card    *int      `json:"card,omitempty"`
	// Cards are, for an attempt on several cards, every one of them in
	// the order chosen ("card" is the first); absent otherwise.
	Cards     []int  `json:"cards,omitempty"`
	MemoryMiB int64  `json:"memory_mib,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Signal    string `json:"signal,omitempty"`
	Error     string `json:"error,omitempty"`
	BlockedBy string `json:"blocked_by,omitempty"`
	// NotNeeded, with "blocked": the task is not needed (a clean-up whose
	// dependency completed), which is no failure.
	NotNeeded bool       `json:"not_needed,omitempty"`
	RetryAt   *time.Time `json:"retry_at,omitempty"` // retrying: the next attempt starts no earlier
	Log       string     `json:"log,omitempty"`
	Rerun     string     `json:"rerun,omitempty"`
	Duration  *float64   `json:"duration_s,omitempty"`
	// Job is the attempt's job in a batch system (Slurm): {"system",
	// "id", "state", "node", "reason"}, as that system last said; with
	// "job", "attempt-ended" and "adopted" of an attempt that has one.
	// ("started" comes before the job is submitted: the "job" events
	// that follow name it.)
	Job *task.RemoteJob `json:"job,omitempty"`
}

// eventJSONLines turns a transition into its lines: an attempt that ended
// gives "attempt-ended" first, then what became of the task.
func eventJSONLines(ev gpusched.Event) []eventJSONLine {
	a := ev.Attempt
	base := eventJSONLine{Time: ev.Time, Task: ev.TaskID}
	if a.Number > 0 {
		base.Attempt = a.Number
	}
	var out []eventJSONLine
	ended := func() {
		if a.Number == 0 || !a.Ended() {
			return
		}
		l := base
		l.Event = evAttemptEnded
		l.Card, l.Cards, l.ExitCode, l.Signal, l.Error, l.Log, l.Job = a.GPU, a.GPUs, a.ExitCode, a.Signal, a.Error, a.LogPath, a.Job
		d := math.Round(a.End.Sub(a.Start).Seconds()*1000) / 1000 // to the millisecond
		l.Duration = &d
		out = append(out, l)
	}
	l := base
	switch ev.Kind {
	case gpusched.EventStarted:
		l.Event = evStarted
		l.Card, l.Cards, l.Log, l.Rerun = a.GPU, a.GPUs, a.LogPath, ev.Rerun
		if a.GPU != nil {
			l.MemoryMiB = a.MemRequestedMiB
		}
	case gpusched.EventComplete:
		ended()
		l.Event = evComplete
	case gpusched.EventRetrying:
		ended()
		l.Event, l.Error = evRetrying, a.Error
		if !ev.RetryAt.IsZero() {
			at := ev.RetryAt
			l.RetryAt = &at
		}
	case gpusched.EventFailed:
		ended()
		l.Event, l.Error = evFailed, ev.Error
		if a.Number > 0 {
			l.Error, l.Log = a.Error, a.LogPath
		}
	case gpusched.EventBlocked:
		l.Event, l.BlockedBy, l.NotNeeded, l.Error = evBlocked, ev.BlockedBy, ev.NotNeeded, ev.Error
	case gpusched.EventCancelled:
		ended()
		l.Event = evCancelled
	case gpusched.EventDeliveryFailed:
		l.Event, l.Error = evEventFailed, ev.Error
	case gpusched.EventCardQuarantined:
		card := ev.Card
		l.Event, l.Card, l.Error = evCardQuarantined, &card, ev.Error
	case gpusched.EventGPUUnknown:
		l.Event, l.Error = evGPUUnknown, ev.Error
	case gpusched.EventGPUKnown:
		l.Event = evGPUKnown
	case gpusched.EventAdopted:
		l.Event, l.Card, l.Cards, l.Log, l.Job = evAdopted, a.GPU, a.GPUs, a.LogPath, a.Job
		if a.GPU != nil {
			l.MemoryMiB = a.MemRequestedMiB
		}
		if ev.Ended {
			l.Error = "ended while no scheduler ran"
		}
	case gpusched.EventJob:
		l.Event, l.Job = evJob, a.Job
	default:
		l.Event = ev.Kind.String()
	}
	return append(out, l)
}

// eventLog writes --events through a lineQueue: the observer never waits
// for the file or the pipe.
type eventLog struct {
	q *lineQueue
}

func newEventLog(q *lineQueue) *eventLog { return &eventLog{q: q} }

func (l *eventLog) observe(ev gpusched.Event) {
	for _, line := range eventJSONLines(ev) {
		b, err := json.Marshal(line)
		if err != nil {
			continue // cannot happen: plain data
		}
		l.q.add(string(b) + "\n")
	}
}

// close writes out what is queued; it returns the first write error.
func (l *eventLog) close() error { return l.q.close() }
