package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// exitCode decides from the error's type: invalid input is 2, everything
// else 1, and a run stopped by a signal 1 whatever else went wrong.
func TestExitCode(t *testing.T) {
	t.Parallel()
	wfErr := &workflow.Error{Path: "flow.yaml", Line: 4, Msg: "invalid YAML"}
	taskErr := &gpusched.TaskError{TaskID: "a", Field: "retries", Reason: "must not be negative", Kind: gpusched.ErrInvalidTask}
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"command line", inputf("-j/--jobs must be at least 1, got 0"), ExitInvalid},
		{"command line, wrapped", fmt.Errorf("run: %w", inputf("which run?")), ExitInvalid},
		{"workflow file", wfErr, ExitInvalid},
		{"unreadable workflow file", unreadable("flow.yaml", &fs.PathError{Op: "open", Path: "flow.yaml", Err: fs.ErrNotExist}), ExitInvalid},
		{"invalid task", taskErr, ExitInvalid},
		{"duplicate task", &gpusched.TaskError{TaskID: "a", Reason: "twice", Kind: gpusched.ErrDuplicateTask}, ExitInvalid},
		{"unknown dependency", fmt.Errorf("submit: %w", &gpusched.TaskError{TaskID: "b", Field: "dependencies", Kind: gpusched.ErrUnknownDependency}), ExitInvalid},
		{"cycle", &gpusched.CycleError{Path: []string{"a", "b", "a"}}, ExitInvalid},
		{"unknown kind", &gpusched.TaskError{TaskID: "a", Field: "kind", Kind: gpusched.ErrUnknownKind}, ExitInvalid},
		{"scheduling", &gpusched.SchedulingError{Field: "max_parallel_tasks", Reason: "must be at least 1"}, ExitInvalid},
		{"state commit", fmt.Errorf("save state: %w", errors.New("database is locked")), ExitFailed},
		{"run directory in use", &gpusched.LockedError{Dir: "/r", PID: 42}, ExitFailed},
		{"I/O", fmt.Errorf("open log: %w", &fs.PathError{Op: "open", Path: "/r/logs/a", Err: os.ErrPermission}), ExitFailed},
		{"unknown task", fmt.Errorf("cancel: %w", gpusched.ErrUnknownTask), ExitFailed},
		{"tasks not complete", errUnfinished, ExitFailed},
		{"interrupted", &interruptedError{}, ExitFailed},
		{"interrupted, with invalid input", &interruptedError{wfErr}, ExitFailed},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

// What Main prints: nothing for the errors whose output already said it.
func TestMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errUnfinished, ""},
		{&interruptedError{}, ""},
		{&interruptedError{errors.New("save state:\n disk full")}, "save state: disk full"},
		{inputf("which run?"), "which run?"},
	} {
		if got := message(c.err); got != c.want {
			t.Errorf("message(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
