package task

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every validation error wraps exactly one of them, so
// callers test with errors.Is; *Error and *CycleError carry the details.
var (
	// ErrInvalidTask: a field of a task spec has a value gpusched refuses.
	ErrInvalidTask = errors.New("invalid task")
	// ErrDuplicateTask: two tasks share an id, in one batch or across batches.
	ErrDuplicateTask = errors.New("duplicate task id")
	// ErrUnknownDependency: a task depends on an id that was never submitted.
	ErrUnknownDependency = errors.New("unknown dependency")
	// ErrCycle: the dependencies form a cycle.
	ErrCycle = errors.New("dependency cycle")
	// ErrUnknownTask: an operation named a task id the scheduler doesn't have.
	ErrUnknownTask = errors.New("unknown task")
	// ErrUnknownKind: a task's kind has no registered handler.
	ErrUnknownKind = errors.New("unknown task kind")
)

// Error is a validation error about one task, and usually one of its fields.
// It unwraps to one of the sentinel errors above.
type Error struct {
	TaskID string // the task the error is about
	Field  string // the field at fault, e.g. "dependencies" or "resources.memory_mib"; may be empty
	Reason string // what is wrong, for a person
	Kind   error  // the sentinel this error is an instance of
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %q: ", e.TaskID)
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns the sentinel, so errors.Is(err, ErrDuplicateTask) works.
func (e *Error) Unwrap() error { return e.Kind }

// Invalid returns an ErrInvalidTask error for one field of a task.
func Invalid(id, field, format string, args ...any) *Error {
	return &Error{TaskID: id, Field: field, Reason: fmt.Sprintf(format, args...), Kind: ErrInvalidTask}
}

// CycleError reports a dependency cycle. Path starts and ends with the same
// task: [a b c a] means a depends on b, b on c and c on a.
type CycleError struct {
	Path []string
}

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Path, " -> ")
}

// Unwrap returns ErrCycle.
func (e *CycleError) Unwrap() error { return ErrCycle }
