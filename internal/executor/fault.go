package executor

import "errors"

// The classes of Result.Err: whose fault it is that a job could not run.
// Result.Err wraps at most one of them; errors.Is tells them apart.
var (
	// ErrEnvironment means the machine could not set up the attempt, which
	// is not the task's fault and may pass: the log folder cannot be
	// created or is not a real folder, the log file cannot be opened (too
	// many open files, read-only or full file system, a planted symbolic
	// link), or the process could not be created for lack of resources
	// (EAGAIN, ENOMEM). Trying again later may succeed.
	ErrEnvironment = errors.New("environment fault")
	// ErrCommand means the command as given can never run, so trying
	// again is pointless: the program is not found in PATH, its path does
	// not exist, it is not executable or not a format the kernel runs, or
	// the working directory is missing or not a folder.
	ErrCommand = errors.New("command cannot run")
)

// EnvironmentFault marks err as the environment's fault: the result wraps
// both ErrEnvironment and err, and reads as err alone. It returns nil for
// a nil err.
func EnvironmentFault(err error) error {
	if err == nil {
		return nil
	}
	return fault{ErrEnvironment, err}
}

// CommandFault marks err as the command's fault: the result wraps both
// ErrCommand and err, and reads as err alone. It returns nil for a nil err.
func CommandFault(err error) error {
	if err == nil {
		return nil
	}
	return fault{ErrCommand, err}
}

// fault is an error with a class; its message is the error's own, so a
// person reads what went wrong and the code asks errors.Is whose fault.
type fault struct{ class, err error }

func (f fault) Error() string   { return f.err.Error() }
func (f fault) Unwrap() []error { return []error{f.class, f.err} }
