package gpusched

import (
	"runtime"
	"time"
)

// Scheduling holds the queue's settings. The zero value is valid: every
// field has a default.
type Scheduling struct {
	// MaxParallelTasks bounds the attempts running at once. Default: the
	// number of CPUs.
	MaxParallelTasks int
	// DefaultTimeout bounds each attempt of a task that sets no Timeout.
	// Default 0: no timeout.
	DefaultTimeout time.Duration
	// DefaultRetries is the extra attempts of a failing task that sets no
	// Retries. Default 0.
	DefaultRetries int
	// KillGrace is the time between SIGTERM and SIGKILL when an attempt is
	// stopped. Default 10s.
	KillGrace time.Duration
}

// DefaultKillGrace is KillGrace's default.
const DefaultKillGrace = 10 * time.Second

// Validate reports the first invalid setting as a *SchedulingError.
func (s Scheduling) Validate() error {
	switch {
	case s.MaxParallelTasks < 0:
		return &SchedulingError{"max_parallel_tasks", "must be at least 1 (or 0 for the number of CPUs)"}
	case s.DefaultTimeout < 0:
		return &SchedulingError{"timeout", "must not be negative"}
	case s.DefaultRetries < 0:
		return &SchedulingError{"retries", "must not be negative"}
	case s.KillGrace < 0:
		return &SchedulingError{"kill_grace", "must not be negative"}
	}
	return nil
}

// withDefaults returns s with zero fields set to their defaults.
func (s Scheduling) withDefaults() Scheduling {
	if s.MaxParallelTasks == 0 {
		s.MaxParallelTasks = runtime.NumCPU()
	}
	if s.KillGrace == 0 {
		s.KillGrace = DefaultKillGrace
	}
	return s
}
