package gpusched

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/task"
)

// Handler gives a task kind its meaning: it turns an attempt of a task into
// a command and judges how the attempt went. Register one per kind with
// WithHandler. Methods run on worker goroutines, possibly many at once, and
// may call the Scheduler (to Submit follow-up tasks, for example).
//
// A handler may also implement any of the phase interfaces below, one per
// phase of a task's life. In order:
//
//	     submit ──▶ pending
//	                   │ dependencies complete, a slot (and card) free
//	                   ▼
//	┌──▶ Preparer.Prepare ─────────┐ error: the attempt fails, nothing runs
//	│    Handler.Command ──────────┤ error: the attempt fails, nothing runs
//	│    (the process runs)        │
//	│    Handler.Judge ────────────┤ error: the attempt failed
//	│    artifacts exist?  ────────┤ missing: "artifact missing: PATH"
//	│    ArtifactChecker.Check ────┤ error: the attempt failed
//	│    AttemptObserver.AfterAttempt  error: a success becomes a failure
//	│                              ▼
//	└── retry left? ◀── failed ◀───┤
//	                     │ none    │ succeeded
//	                     ▼         ▼
//	  FailureHandler.OnFailure   complete (committed with an outbox event)
//	  (best effort; its error      │
//	   is written to the log)      ▼
//	                  CompletionHandler.OnComplete, at least once:
//	                  nil acknowledges the event; an error (or a crash)
//	                  means it is delivered again, with backoff, in
//	                  completion order, also after a restart.
//
// Because OnComplete may run more than once for one completion (the
// scheduler may die after the handler ran but before the acknowledgement is
// saved), it must be idempotent: doing it twice must be as good as once,
// e.g. by keying what it writes on the event ID.
type Handler interface {
	// Command returns what to run for attempt number attempt (from 1) of t.
	// An error fails the attempt without running anything.
	Command(ctx context.Context, t *TaskSpec, attempt int) (Command, error)
	// Judge decides whether a finished attempt succeeded: nil means it did.
	// It is not called when the command could not start.
	Judge(t *TaskSpec, r AttemptResult) error
}

// Preparer is the first phase of an attempt, before its command is built:
// for example, to create folders or fetch inputs. An error fails the
// attempt without running anything (the retry policy applies).
type Preparer interface {
	Prepare(ctx context.Context, t *TaskSpec, attempt int) error
}

// ArtifactChecker validates the artifacts of an attempt that exited well,
// after gpusched has checked that each exists: for example, that a model
// file loads. An error fails the attempt.
type ArtifactChecker interface {
	CheckArtifacts(ctx context.Context, t *TaskSpec, artifacts []Artifact) error
}

// AttemptObserver sees every attempt's result, whatever it was, after the
// checks above. An error turns a successful attempt into a failed one; on
// a failed attempt it is only noted.
type AttemptObserver interface {
	AfterAttempt(ctx context.Context, t *TaskSpec, r AttemptResult) error
}

// CompletionHandler receives each completion event at least once. See
// Handler for why it must be idempotent.
type CompletionHandler interface {
	OnComplete(ctx context.Context, ev CompletionEvent) error
}

// FailureHandler is told once a task has failed for good (its retries
// spent). It is best effort: it runs once, and its error is written to the
// last attempt's log.
type FailureHandler interface {
	OnFailure(ctx context.Context, t *TaskSpec, r Record) error
}

// CompletionEvent is a task's completion, as delivered to OnComplete.
type CompletionEvent struct {
	ID      int64     // unique in the run directory; the same on every redelivery
	TaskID  string    //
	Attempt int       // the attempt that completed the task
	Spec    *TaskSpec // the definition it completed with
	Tries   int       // deliveries that failed before this one
	// LogPath is a file the handler may write to (the command kind writes
	// its on_complete command's output there).
	LogPath string
	// RunDir is the run directory, which holds LogPath.
	RunDir string
	// Env holds the variables gpusched gives the run's processes
	// (GPUSCHED_RUN_DIR), for handlers that start commands.
	Env map[string]string
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
// attempt succeeds on exit code 0. Its completion handler runs the task's
// OnComplete argv, if any, and acknowledges the event on exit code 0. Its
// other phases are the defaults (nothing to do).
type CommandHandler struct{}

var (
	_ Handler           = CommandHandler{}
	_ PayloadValidator  = CommandHandler{}
	_ CompletionHandler = CommandHandler{}
)

// OnComplete runs t.OnComplete in the task's Dir with the task's Env plus
// GPUSCHED_TASK_ID and GPUSCHED_EVENT_ID, its output appended to
// ev.LogPath; exit code 0 acknowledges the event.
func (CommandHandler) OnComplete(ctx context.Context, ev CompletionEvent) error {
	argv := ev.Spec.OnComplete
	if len(argv) == 0 {
		return nil
	}
	vars := []string{"GPUSCHED_TASK_ID=" + ev.TaskID, "GPUSCHED_EVENT_ID=" + strconv.FormatInt(ev.ID, 10),
		"GPUSCHED_ATTEMPT=" + strconv.Itoa(ev.Attempt), "CUDA_VISIBLE_DEVICES="}
	base := os.Environ()
	if ev.Spec.CleanEnv {
		base = nil // the task's own environment in place of the scheduler's
	}
	env := environFrom(base, vars, ev.Spec.Env, ev.Env)
	res := (&local.Executor{}).Execute(ctx, executor.Job{
		TaskID: ev.TaskID, Args: argv, Env: env, Dir: ev.Spec.Dir, LogPath: ev.LogPath, LogRoot: ev.RunDir, KillGrace: 10 * time.Second,
	}, executor.Hooks{})
	switch {
	case res.Err != nil:
		return fmt.Errorf("on_complete: %w", res.Err)
	case res.Signal != 0:
		return fmt.Errorf("on_complete killed by %s", executor.SignalName(res.Signal))
	case res.ExitCode != 0:
		return fmt.Errorf("on_complete exit code %d (log %s)", res.ExitCode, ev.LogPath)
	}
	return nil
}

// ValidatePayload requires a non-empty []string argv without NUL bytes.
func (CommandHandler) ValidatePayload(t *TaskSpec) error {
	_, err := argv(t.ID, t.Payload)
	return err
}

// Command returns the argv with the task's Env and Dir.
func (CommandHandler) Command(_ context.Context, t *TaskSpec, _ int) (Command, error) {
	args, err := argv(t.ID, t.Payload)
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

// argv is the command kind's payload as an argv, or why it is not one.
func argv(id string, payload any) ([]string, error) {
	var args []string
	switch p := payload.(type) {
	case []string:
		args = p
	case []any: // a payload decoded from JSON
		for _, a := range p {
			s, ok := a.(string)
			if !ok {
				return nil, &TaskError{TaskID: id, Field: "payload", Reason: fmt.Sprintf("argv element %v is a %T, not a string", a, a), Kind: ErrInvalidTask}
			}
			args = append(args, s)
		}
	case nil:
	default:
		return nil, &TaskError{TaskID: id, Field: "payload", Reason: fmt.Sprintf("the command kind takes the argv as a []string, not %T", p), Kind: ErrInvalidTask}
	}
	if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
		return nil, &TaskError{TaskID: id, Field: "payload", Reason: "empty command: give the program and its arguments", Kind: ErrInvalidTask}
	}
	if err := task.CheckArgv(id, "payload", args); err != nil {
		return nil, publicError(err)
	}
	return args, nil
}
