package gpusched

import (
	"context"
	"fmt"
	"strings"
)

// Handler gives a task kind its meaning: it turns an attempt of a task into
// a command and judges how the attempt went. Register one per kind with
// WithHandler. Methods run on worker goroutines, possibly many at once, and
// may call the Scheduler (to Submit follow-up tasks, for example).
type Handler interface {
	// Command returns what to run for attempt number attempt (from 1) of t.
	// An error fails the attempt without running anything.
	Command(ctx context.Context, t *TaskSpec, attempt int) (Command, error)
	// Judge decides whether a finished attempt succeeded: nil means it did.
	// It is not called when the command could not start.
	Judge(t *TaskSpec, r AttemptResult) error
}

// PayloadValidator is implemented by handlers that can check a task's
// payload when it is submitted, so a bad one is rejected before anything
// runs rather than failing at its first attempt.
type PayloadValidator interface {
	ValidatePayload(t *TaskSpec) error
}

// Command is what an attempt runs.
type Command struct {
	// Args is the argv, run without a shell; Args[0] is looked up in PATH
	// unless it contains a slash.
	Args []string
	// Env is added to the environment the scheduler was started with.
	Env map[string]string
	// Dir is the working directory; empty means the scheduler's.
	Dir string
}

// AttemptResult is how an attempt's process ended.
type AttemptResult struct {
	Attempt  int
	ExitCode int    // when Signal is empty
	Signal   string // e.g. "SIGKILL" if a signal ended the process
	LogPath  string
}

// CommandHandler is the built-in "command" kind: the payload is the argv (a
// []string), run without a shell in the task's Dir with the task's Env; the
// attempt succeeds on exit code 0.
type CommandHandler struct{}

var (
	_ Handler          = CommandHandler{}
	_ PayloadValidator = CommandHandler{}
)

// ValidatePayload requires a non-empty []string argv.
func (CommandHandler) ValidatePayload(t *TaskSpec) error {
	_, err := argv(t)
	return err
}

// Command returns the argv with the task's Env and Dir.
func (CommandHandler) Command(_ context.Context, t *TaskSpec, _ int) (Command, error) {
	args, err := argv(t)
	if err != nil {
		return Command{}, err
	}
	return Command{Args: args, Env: t.Env, Dir: t.Dir}, nil
}

// Judge succeeds on exit code 0.
func (CommandHandler) Judge(_ *TaskSpec, r AttemptResult) error {
	switch {
	case r.Signal != "":
		return fmt.Errorf("killed by %s", r.Signal)
	case r.ExitCode != 0:
		return fmt.Errorf("exit code %d", r.ExitCode)
	}
	return nil
}

func argv(t *TaskSpec) ([]string, error) {
	var args []string
	switch p := t.Payload.(type) {
	case []string:
		args = p
	case []any: // a payload decoded from JSON
		for _, a := range p {
			s, ok := a.(string)
			if !ok {
				return nil, &TaskError{TaskID: t.ID, Field: "payload", Reason: fmt.Sprintf("argv element %v is a %T, not a string", a, a), Kind: ErrInvalidTask}
			}
			args = append(args, s)
		}
	case nil:
	default:
		return nil, &TaskError{TaskID: t.ID, Field: "payload", Reason: fmt.Sprintf("the command kind takes the argv as a []string, not %T", p), Kind: ErrInvalidTask}
	}
	if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
		return nil, &TaskError{TaskID: t.ID, Field: "payload", Reason: "empty command: give the program and its arguments", Kind: ErrInvalidTask}
	}
	return args, nil
}
