package task

import (
	"cmp"
	"fmt"
	"time"
)

// WaitKind says why a pending task has not started, as the scheduler's
// loop decided, or (WaitQueued) why a running task's attempt has not
// started in the batch system that runs it. Kinds persist as the stable
// lowercase strings returned by String; never renumber or rename them,
// only append.
type WaitKind uint8

// The kinds of waiting. NotWaiting is the zero value: the task is not
// pending, or no scheduler has decided about it yet (a row written before
// schema 7, a task the running scheduler was not given).
const (
	NotWaiting WaitKind = iota
	// WaitDependencies: some of its dependencies are not complete yet;
	// the detail names them (at most MaxNamedDependencies, then a count).
	WaitDependencies
	// WaitSlot: it is ready, and every parallel slot is taken (or the
	// tasks before it in the queue took the free ones).
	WaitSlot
	// WaitGPUMemory: no card that takes work has room for it now; the
	// detail says what it needs and what the best card has left.
	WaitGPUMemory
	// WaitCardReserved: a card would hold it, but that card is reserved
	// for a task that has waited longer (a starving big task).
	WaitCardReserved
	// WaitCardUnavailable: a card would hold it, but that card is cooling
	// down after a task left it, or quarantined after repeated failures.
	WaitCardUnavailable
	// WaitGPUUnknown: the GPUs cannot be read (the detail says why), so no
	// GPU task starts.
	WaitGPUUnknown
	// WaitRetryDelay: its last attempt failed and it waits out its retry
	// delay, until Until; the detail is the attempt's error.
	WaitRetryDelay
	// WaitBackoff: its last attempt failed for a fault of the environment,
	// not charged to its retries, and it backs off until Until; the detail
	// is the attempt's error.
	WaitBackoff
	// WaitPaused: someone paused it (a daemon's pause); it starts only once
	// resumed. The detail may say who paused it.
	WaitPaused
	// WaitUserCap: its owner already has as many tasks running, or as much
	// GPU memory charged, as a per-user cap allows; the detail says which.
	WaitUserCap
	// WaitQueued: the task is running (its attempt exists), and the
	// attempt waits in the batch system that runs it (Slurm's queue), or
	// to be submitted there (its controller does not answer); the detail
	// says what that system says ("queued in Slurm as job 4242:
	// Priority"). The only kind a task that is not pending has.
	WaitQueued
)

var waitNames = [...]string{
	NotWaiting:          "",
	WaitDependencies:    "dependencies",
	WaitSlot:            "slot",
	WaitGPUMemory:       "gpu-memory",
	WaitCardReserved:    "card-reserved",
	WaitCardUnavailable: "card-unavailable",
	WaitGPUUnknown:      "gpu-unknown",
	WaitRetryDelay:      "retry-delay",
	WaitBackoff:         "backoff",
	WaitPaused:          "paused",
	WaitUserCap:         "user-cap",
	WaitQueued:          "queued",
}

// String returns the kind's persisted name, e.g. "gpu-memory"; "" for
// NotWaiting.
func (k WaitKind) String() string {
	if int(k) < len(waitNames) {
		return waitNames[k]
	}
	return fmt.Sprintf("wait(%d)", uint8(k))
}

// ParseWaitKind returns the kind named s, as written by String.
func ParseWaitKind(s string) (WaitKind, error) {
	for i, n := range waitNames {
		if n == s {
			return WaitKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown waiting reason %q", s)
}

// MarshalText writes the kind's name.
func (k WaitKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *WaitKind) UnmarshalText(b []byte) error {
	v, err := ParseWaitKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// MaxNamedDependencies is how many unfinished dependencies a
// WaitDependencies reason names; the rest are counted.
const MaxNamedDependencies = 10

// WaitReason is why a pending task has not started, from where the
// scheduler decided it: the loop's queue, its dependencies, the admission
// of GPU tasks, its retry delay. The zero value means not waiting.
type WaitReason struct {
	Kind WaitKind `json:"kind"`
	// Detail says more, for a person; what depends on Kind (see the kinds).
	Detail string `json:"detail,omitempty"`
	// Until, for WaitRetryDelay and WaitBackoff, is when the task may
	// start again (its record's RetryAt).
	Until time.Time `json:"until,omitzero"`
}

// Waiting reports whether w is a reason to wait (its kind is not
// NotWaiting).
func (w WaitReason) Waiting() bool { return w.Kind != NotWaiting }

// Text says why the task waits, for a person: "waiting for prep, fetch",
// "waiting for a free slot", "needs 24000 MiB; best card 1 has 5047 MiB
// left (...)", "retry at 10:14:49 (in 3s) after: exit code 1". With now not
// zero, a retry's time is followed by how long is left.
func (w WaitReason) Text(now time.Time) string {
	switch w.Kind {
	case NotWaiting:
		return ""
	case WaitDependencies:
		return "waiting for " + cmp.Or(w.Detail, "its dependencies")
	case WaitSlot:
		return "waiting for a free slot"
	case WaitGPUMemory:
		return cmp.Or(w.Detail, "waiting for GPU memory")
	case WaitCardReserved:
		return cmp.Or(w.Detail, "waiting for a card reserved for another task")
	case WaitCardUnavailable:
		return cmp.Or(w.Detail, "waiting for a card to come back from its cooldown or quarantine")
	case WaitGPUUnknown:
		return "GPU state unknown: " + w.Detail
	case WaitPaused:
		return cmp.Or(w.Detail, "paused")
	case WaitUserCap:
		return cmp.Or(w.Detail, "its owner is at a per-user cap")
	case WaitQueued:
		return cmp.Or(w.Detail, "queued in the batch system that runs it")
	case WaitRetryDelay, WaitBackoff:
		s := "retry at " + w.Until.Format(time.TimeOnly)
		if !now.IsZero() && w.Until.After(now) {
			s += " (in " + roundWait(w.Until.Sub(now)).String() + ")"
		}
		if w.Detail == "" {
			return s
		}
		if w.Kind == WaitBackoff {
			return s + "; not counted against its retries: " + w.Detail
		}
		return s + " after: " + w.Detail
	}
	return w.Kind.String() + ": " + w.Detail
}

// roundWait rounds a time left for a person: milliseconds under a second,
// tenths under a minute, else seconds.
func roundWait(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
