package gpusched

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/elide"
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
//	 failed (committed with an   complete (committed with an outbox event)
//	  outbox event)  │               │
//	                 ▼               ▼
//	  FailureEventHandler.      CompletionHandler.OnComplete, at least once:
//	  OnFailureEvent, at least  nil acknowledges the event; an error (or a
//	  once, as OnComplete;      crash) means it is delivered again, with
//	  FailureHandler.OnFailure  backoff, in the order the events were
//	  (best effort; its error   written, also after a restart.
//	  is written to the log)
//
// Because OnComplete (and OnFailureEvent) may run more than once for one
// event (the scheduler may die after the handler ran but before the
// acknowledgement is saved), it must be idempotent: doing it twice must be
// as good as once, e.g. by keying what it writes on the event ID.
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
// last attempt's log. For at least once, implement FailureEventHandler.
type FailureHandler interface {
	OnFailure(ctx context.Context, t *TaskSpec, r Record) error
}

// FailureEventHandler receives each failure event at least once: the
// event is written in the same transaction as the task's failure for good
// (its retries spent), and delivered as completion events are (see
// Handler; it must be idempotent). A blocked or cancelled task has not
// failed, and gets none.
type FailureEventHandler interface {
	OnFailureEvent(ctx context.Context, ev FailureEvent) error
}

// FailureEvent is a task's failure for good, as delivered to
// OnFailureEvent.
type FailureEvent struct {
	ID     int64     // unique in the run directory; the same on every redelivery
	TaskID string    //
	Time   time.Time // when the task failed
	// Attempts is how many attempts the task has made, earlier runs'
	// included; 0 when it failed before any could start.
	Attempts int
	// ExitCode is the last attempt's exit code; nil if a signal ended it
	// or it never started. Signal names the signal, e.g. "SIGKILL".
	ExitCode *int
	Signal   string
	// Error says why the task failed, as its Record does.
	Error string
	// AttemptLog is the last attempt's log; empty without an attempt.
	AttemptLog string
	Spec       *TaskSpec // the definition it failed with
	Tries      int       // deliveries that failed before this one
	// LogPath is a file the handler may write to (the command kind writes
	// its on_failure command's output there), beside the attempts' logs.
	LogPath string
	// RunDir is the run directory, which holds LogPath.
	RunDir string
	// Env holds the variables gpusched gives the run's processes
	// (GPUSCHED_RUN_DIR), for handlers that start commands.
	Env map[string]string
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
// OnComplete argv, if any, and acknowledges the event on exit code 0; its
// failure event handler does the same with OnFailure. Its other phases are
// the defaults (nothing to do).
type CommandHandler struct{}

var (
	_ Handler             = CommandHandler{}
	_ PayloadValidator    = CommandHandler{}
	_ CompletionHandler   = CommandHandler{}
	_ FailureEventHandler = CommandHandler{}
)

// OnComplete runs t.OnComplete in the task's Dir with the task's Env plus
// GPUSCHED_TASK_ID, GPUSCHED_EVENT_ID and GPUSCHED_ATTEMPT, as the task's
// owner, its output appended to ev.LogPath; exit code 0 acknowledges the
// event.
func (CommandHandler) OnComplete(ctx context.Context, ev CompletionEvent) error {
	vars := []string{"GPUSCHED_TASK_ID=" + ev.TaskID, "GPUSCHED_EVENT_ID=" + strconv.FormatInt(ev.ID, 10),
		"GPUSCHED_ATTEMPT=" + strconv.Itoa(ev.Attempt)}
	return runEventCommand(ctx, "on_complete", ev.Spec, ev.Spec.OnComplete, vars, ev.Env, ev.LogPath, ev.RunDir)
}

// OnFailureEvent runs t.OnFailure as OnComplete runs t.OnComplete, with
// GPUSCHED_TASK_ID, GPUSCHED_EVENT_ID, GPUSCHED_ATTEMPTS (attempts made),
// GPUSCHED_ATTEMPT (the last one's number, "" without one),
// GPUSCHED_EXIT_CODE (the last attempt's; "" when a signal ended it or it
// never started), GPUSCHED_SIGNAL, GPUSCHED_ERROR (why it failed, on one
// line) and GPUSCHED_ATTEMPT_LOG (the last attempt's log) set; exit code 0
// acknowledges the event.
func (CommandHandler) OnFailureEvent(ctx context.Context, ev FailureEvent) error {
	vars := []string{"GPUSCHED_TASK_ID=" + ev.TaskID, "GPUSCHED_EVENT_ID=" + strconv.FormatInt(ev.ID, 10),
		"GPUSCHED_ATTEMPTS=" + strconv.Itoa(ev.Attempts), "GPUSCHED_ATTEMPT=", "GPUSCHED_EXIT_CODE=",
		"GPUSCHED_SIGNAL=" + ev.Signal, "GPUSCHED_ERROR=" + oneLine(ev.Error), "GPUSCHED_ATTEMPT_LOG=" + ev.AttemptLog}
	if ev.Attempts > 0 {
		vars[3] += strconv.Itoa(ev.Attempts)
	}
	if ev.ExitCode != nil {
		vars[4] += strconv.Itoa(*ev.ExitCode)
	}
	return runEventCommand(ctx, "on_failure", ev.Spec, ev.Spec.OnFailure, vars, ev.Env, ev.LogPath, ev.RunDir)
}

// runEventCommand runs argv, a task's on_complete or on_failure (what),
// for an event: in the task's Dir, as the task's owner, with the task's
// environment (CleanEnv respected) plus env and vars, and without a card;
// its output is appended to logPath. Exit code 0 is a delivery.
func runEventCommand(ctx context.Context, what string, t *TaskSpec, argv, vars []string, env map[string]string, logPath, runDir string) error {
	if len(argv) == 0 {
		return nil
	}
	sp := t.spec()
	as, err := runAs(&sp)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	base := os.Environ()
	if t.CleanEnv {
		base = nil // the task's own environment in place of the scheduler's
	}
	full := environFrom(base, append(vars, "CUDA_VISIBLE_DEVICES="), t.Env, env)
	res := (&local.Executor{}).Execute(ctx, executor.Job{
		TaskID: t.ID, Args: argv, Env: full, Dir: t.Dir, LogPath: logPath, LogRoot: runDir, KillGrace: 10 * time.Second, User: as,
	}, executor.Hooks{})
	switch {
	case res.Err != nil:
		return fmt.Errorf("%s: %w", what, res.Err)
	case res.Signal != 0:
		return fmt.Errorf("%s killed by %s", what, executor.SignalName(res.Signal))
	case res.ExitCode != 0:
		return fmt.Errorf("%s exit code %d (log %s)", what, res.ExitCode, logPath)
	}
	return nil
}

// oneLine makes s fit on one line of an environment variable or a log:
// control characters escaped, at most 4 KiB.
func oneLine(s string) string { return elide.Line(s, 4096) }

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
