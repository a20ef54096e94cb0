package executor

import (
	"context"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Job is one attempt to run.
type Job struct {
	TaskID  string
	Attempt int
	// Args is the argv, run without a shell. A bare Args[0] is looked up in
	// the PATH of Env; one with a slash is taken relative to Dir.
	Args []string
	// Env is the complete environment of the process, as KEY=VALUE.
	Env []string
	// Dir is the working directory; empty means the scheduler's.
	Dir string
	// LogPath receives stdout and stderr; its folder is created if needed.
	// The file is opened for appending and never through a symbolic link.
	LogPath string
	// LogRoot, when set, is a folder above LogPath (the run directory)
	// below which no symbolic link is followed: every folder between
	// LogRoot and LogPath must be a real folder (missing ones are
	// created). LogRoot itself may be reached through links. Empty: only
	// the file itself is protected, its folders are created as they are.
	LogRoot string
	// KillGrace is how long a stopped job has between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// KillNow, when closed, stops the job with SIGKILL at once, without
	// waiting for KillGrace (a second Ctrl-C). Nil: never.
	KillNow <-chan struct{}
	// Token names this attempt in its processes' environment, unique to
	// the attempt. When set, the process starts with TokenVar=Token in its
	// environment (replacing any TokenVar in Env), and whatever still
	// carries it when the attempt ends is stopped with the attempt, even
	// processes that left its process group (see docs/processes.md).
	// Empty: only the process group (and the executor's own means, such
	// as a cgroup) bound the attempt.
	Token string
}

// TokenVar is the environment variable that carries Job.Token.
const TokenVar = "GPUSCHED_ATTEMPT_TOKEN"

// Process identifies a started job's process group beyond PID reuse.
type Process struct {
	PID        int
	PGID       int
	StartTicks uint64 // process start time in clock ticks since boot; 0 if unknown
}

// Result is how a job ended.
type Result struct {
	// Started is false when the command never ran (not found, bad dir...);
	// Err says why.
	Started bool
	// ExitCode is the exit status when Signal is 0.
	ExitCode int
	// Signal is the signal that killed the process, or 0.
	Signal syscall.Signal
	// Start and End bracket the job.
	Start, End time.Time
	// Err is a failure to run the job at all (could not start, could not
	// open the log); nil when the process ran, whatever its exit code.
	// When the fault is known to be the environment's or the command's, Err
	// wraps ErrEnvironment or ErrCommand (test with errors.Is); otherwise
	// it wraps neither.
	Err error
}

// Executor runs jobs.
type Executor interface {
	// Execute runs job and blocks until it has ended and nothing of it is
	// left running. started is called once, as soon as the process exists.
	// When ctx is done, the job is stopped: SIGTERM to everything it
	// started, then SIGKILL after job.KillGrace. When job.KillNow is
	// closed (before or after ctx is done), everything it started gets
	// SIGKILL at once. When the job's main process ends, whatever it
	// started and left running gets SIGKILL. Why ctx ended (timeout,
	// cancel) is for the caller to tell, with context.Cause.
	Execute(ctx context.Context, job Job, started func(Process)) Result
}

// SignalName returns a signal's conventional name, e.g. "SIGKILL".
func SignalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
