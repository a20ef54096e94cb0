package cli

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// Exit codes.
const (
	ExitOK      = 0 // every task completed or was not needed (or the command did what it was asked)
	ExitFailed  = 1 // a task failed, was blocked or cancelled; the run was interrupted; or an operational error
	ExitInvalid = 2 // the workflow or the command line is invalid; nothing ran
)

// exitCode maps an error to the process's exit code. It is the only place
// that does, and it decides from the error's type alone: commands return
// errors as they come, wrapped with %w, and never pick a code themselves.
//
//   - nil: 0.
//   - the end of a front (*schedulerExit): its scheduler's exit code;
//     the scheduler said why.
//   - a run stopped by a signal (*interruptedError): 1, whatever else went
//     wrong while it stopped.
//   - invalid input: a command line that cannot be carried out
//     (*inputError), a workflow file that cannot be read or is invalid
//     (*workflow.Error), or a task or scheduling setting that the library
//     refuses (gpusched.ErrInvalidTask, ErrDuplicateTask,
//     ErrUnknownDependency, ErrCycle, ErrUnknownKind, ErrInvalidScheduling,
//     ErrStaleDependency): 2. Nothing has run then.
//   - everything else (a state database that cannot be written, a run
//     directory in use, an I/O error, a task that did not complete): 1.
func exitCode(err error) int {
	var ie *interruptedError
	var se *schedulerExit
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ie):
		return ExitFailed
	case isInvalidInput(err):
		return ExitInvalid
	}
	return ExitFailed
}

// invalidInput are the library's sentinels for input it refuses.
var invalidInput = []error{
	gpusched.ErrInvalidTask, gpusched.ErrDuplicateTask, gpusched.ErrUnknownDependency,
	gpusched.ErrCycle, gpusched.ErrUnknownKind, gpusched.ErrInvalidScheduling,
	gpusched.ErrStaleDependency,
}

// isInvalidInput reports whether err is about the input (the command line
// or the workflow) rather than about the environment.
func isInvalidInput(err error) bool {
	var in *inputError
	var we *workflow.Error
	if errors.As(err, &in) || errors.As(err, &we) {
		return true
	}
	for _, s := range invalidInput {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// inputError is a command line that cannot be carried out as given: a
// missing or extra argument, an unknown flag or command, a flag value out
// of range, a run that cannot be told apart from others.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// inputf returns an *inputError with a message formatted as fmt.Errorf.
func inputf(format string, args ...any) error {
	return &inputError{fmt.Errorf(format, args...)}
}

// invalid marks err as invalid input. Errors of a known type need no
// marking; this is for messages made on the spot.
func invalid(err error) error { return &inputError{err} }

// interruptedError is the end of a run stopped by SIGINT, SIGTERM or
// SIGHUP. Its err, if any, is what else went wrong while it stopped; with
// none, the output already said what happened and nothing more is printed.
type interruptedError struct{ err error }

func (e *interruptedError) Error() string {
	if e.err == nil {
		return "interrupted"
	}
	return e.err.Error()
}
func (e *interruptedError) Unwrap() error { return e.err }

// errUnfinished ends a run in which some task did not complete: the
// summary said which and why, so nothing more is printed.
var errUnfinished = errors.New("not every task completed")

// message is what Main prints for err: "" when the output already said it.
func message(err error) string {
	var ie *interruptedError
	var se *schedulerExit
	switch {
	case err == nil, errors.Is(err, errUnfinished), errors.Is(err, errCheckFailed), errors.As(err, &se):
		return ""
	case errors.As(err, &ie) && ie.err == nil:
		return ""
	}
	return oneLine(err.Error())
}
