package task

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpusched/gpusched/internal/elide"
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

// Error returns the message on one line, the task id quoted (and, when it
// is long, cut in the middle).
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("task ")
	b.WriteString(elide.Quote(e.TaskID))
	b.WriteString(": ")
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

// Error returns the cycle on one line. A long cycle is cut in the middle
// and its length said, and a long id is cut too:
//
//	dependency cycle of 100000 tasks: a -> b -> c -> … -> y -> z -> a
func (e *CycleError) Error() string {
	n := len(e.Path) - 1 // tasks in the cycle; the last id repeats the first
	if n < 1 {
		return "dependency cycle"
	}
	var b strings.Builder
	if n <= cycleShown {
		b.WriteString("dependency cycle: ")
		for i, id := range e.Path {
			writeCycleID(&b, i, id)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "dependency cycle of %d tasks: ", n)
	for i, id := range e.Path[:cycleHead] {
		writeCycleID(&b, i, id)
	}
	b.WriteString(" -> …")
	for i, id := range e.Path[len(e.Path)-cycleTail-1:] {
		writeCycleID(&b, i+1, id)
	}
	return b.String()
}

// A cycle of more than cycleShown tasks shows its first cycleHead ids and
// its last cycleTail ones (then the first again).
const (
	cycleShown = 7
	cycleHead  = 3
	cycleTail  = 2
	cycleIDLen = 40 // bytes of an id shown in a cycle before it is cut
)

func writeCycleID(b *strings.Builder, i int, id string) {
	if i > 0 {
		b.WriteString(" -> ")
	}
	if _, ok := ValidID(id); ok {
		b.WriteString(elide.Middle(id, cycleIDLen))
		return
	}
	b.WriteString(elide.Quote(id)) // a cycle among tasks that are invalid too
}

// Unwrap returns ErrCycle.
func (e *CycleError) Unwrap() error { return ErrCycle }
