package gpusched

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/task"
)

// Sentinel errors, for errors.Is. Validation errors are *TaskError or
// *CycleError values that unwrap to one of the first six.
var (
	ErrInvalidTask       = task.ErrInvalidTask       // a field of a spec is invalid
	ErrDuplicateTask     = task.ErrDuplicateTask     // a task id is used twice
	ErrUnknownDependency = task.ErrUnknownDependency // a dependency names no task
	ErrCycle             = task.ErrCycle             // the dependencies form a cycle
	ErrUnknownTask       = task.ErrUnknownTask       // an operation named no task
	ErrUnknownKind       = task.ErrUnknownKind       // no handler for a task's kind

	ErrInvalidScheduling = errors.New("invalid scheduling settings")
	ErrRunDirLocked      = errors.New("run directory in use")
	ErrClosed            = engine.ErrClosed  // the scheduler was closed
	ErrRunning           = engine.ErrRunning // Run while another Run is in progress
)

// TaskError is a validation error about one task and one of its fields.
type TaskError = task.Error

// CycleError reports a dependency cycle; Path is e.g. [a b c a].
type CycleError = task.CycleError

// SchedulingError is an invalid Scheduling field. Field uses the workflow
// file's names, e.g. "max_parallel_tasks".
type SchedulingError struct {
	Field  string
	Reason string
}

func (e *SchedulingError) Error() string {
	return fmt.Sprintf("scheduling.%s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidScheduling.
func (e *SchedulingError) Unwrap() error { return ErrInvalidScheduling }

// LockedError reports that another scheduler holds the run directory.
type LockedError struct {
	Dir string
	PID int // the holder's PID, 0 if unknown
}

func (e *LockedError) Error() string {
	holder := "another gpusched"
	if e.PID > 0 {
		holder = fmt.Sprintf("another gpusched (pid %d)", e.PID)
	}
	return fmt.Sprintf("run directory %s is in use by %s; wait for it to finish or choose another --run-dir", e.Dir, holder)
}

// Unwrap returns ErrRunDirLocked.
func (e *LockedError) Unwrap() error { return ErrRunDirLocked }
