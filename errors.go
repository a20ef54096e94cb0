package gpusched

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/store"
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
	// ErrNotRetryable: Retry named a task that is pending, running or
	// complete, or one that depends on a failed, cancelled or blocked task
	// not retried with it (a *TaskError says which).
	ErrNotRetryable = engine.ErrNotRetryable
	// ErrStaleDependency: SubmitOptions.Only or From picked a task that
	// depends on one not picked that would run again (not complete, or
	// not intact): a *TaskError names them and says why.
	ErrStaleDependency = errors.New("a dependency would run again")

	// ErrStateDamaged: New found the run directory's state database
	// damaged (SQLite's quick_check failed); nothing was written to it.
	ErrStateDamaged = store.ErrCorrupt
	// ErrStateGone: the state database was deleted or replaced while the
	// scheduler used it; Run stops with it, as nothing can be saved.
	ErrStateGone = store.ErrGone
)

// TaskError is a validation error about one task, and usually one of its
// fields. It unwraps to one of the sentinels above (ErrInvalidTask,
// ErrDuplicateTask, ...), so callers test it with errors.Is.
type TaskError struct {
	TaskID string // the task the error is about
	Field  string // the field at fault, e.g. "dependencies" or "resources.memory_mib"; may be empty
	Reason string // what is wrong, for a person
	Kind   error  // the sentinel this error is an instance of
}

// Error returns the message on one line, e.g. `task "train":
// dependencies: "prep" is not defined (did you mean "prepare"?)`; a long
// task id is cut in the middle.
func (e *TaskError) Error() string { return (*task.Error)(e).Error() }

// Unwrap returns the sentinel Kind.
func (e *TaskError) Unwrap() error { return e.Kind }

// CycleError reports a dependency cycle. Path starts and ends with the same
// task: [a b c a] means a depends on b, b on c and c on a.
type CycleError struct {
	Path []string
}

// Error returns the cycle on one line: `dependency cycle: a -> b -> c ->
// a`; a long cycle is cut in the middle and its length said.
func (e *CycleError) Error() string { return (*task.CycleError)(e).Error() }

// Unwrap returns ErrCycle.
func (e *CycleError) Unwrap() error { return ErrCycle }

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
