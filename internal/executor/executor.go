package executor

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/task"
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
	// Timeout, when positive, stops the attempt that long after it
	// started running (not after it was submitted: time spent queued in
	// another system is not counted); it then ends with Reason TimedOut.
	// The executor enforces it, also while no scheduler watches.
	Timeout time.Duration
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
	// User, when set, is whom the attempt runs as (a scheduler running
	// as root runs each user's tasks as that user): its uid, gid and
	// supplementary groups, HOME, USER and LOGNAME in its environment,
	// and its log opened with the user's file-system identity, so that
	// nothing is created or followed with root's rights in folders the
	// user controls. Nil: as the scheduler's own user.
	User *User
	// GPUs is how many whole GPUs the attempt asks of an executor that
	// places work itself (Slurm: --gres=gpu:N). The local executor
	// ignores it: there the scheduler chose the card, and Env names it.
	GPUs int
	// GPUMiB is the GPU memory budget of each GPU of the attempt, in MiB,
	// for an executor that places work itself (a Placer): the task's
	// resources.memory_mib, or more after a CUDA out-of-memory failure.
	// The slurm executor chooses a GPU type from it (gpu_types). 0: none
	// given (an exclusive task without a budget, or a CPU task). The
	// local executor ignores it: there the scheduler charged the card.
	GPUMiB int64
	// CPUs and MemoryMiBHost are the task's resources.cpus and
	// memory_mib_host (its budget, learned or not), for an executor that
	// places work itself (Slurm: --cpus-per-task, --mem); 0: none said.
	// The local executor ignores them: there the scheduler admitted them.
	CPUs          int
	MemoryMiBHost int64
	// Slurm is what the attempt asks of Slurm, for the slurm executor
	// (others ignore it); nil: nothing beyond the executor's defaults.
	Slurm *task.SlurmSettings
	// Stdin, when set, is the command's standard input, for the local
	// executor (a notification's command reads a summary there); others
	// ignore it. Nil: nothing (/dev/null).
	Stdin *os.File
	// Gate, when set, holds the attempt back until the scheduler has
	// saved that it starts: it blocks until then and returns nil, or an
	// error when that will never be (the attempt must not run). An
	// executor that honours it (Gated) may prepare before it returns
	// (open the log, find the program, make the environment) but starts
	// no process, writes nothing into the log and hands nothing to
	// another system until it has returned nil; when it returns an error,
	// Execute returns a Result with that Err, not started. It may be
	// called more than once and returns the same each time. Nil: go on.
	Gate func() error
}

// AwaitGate calls j.Gate, if set, and returns what it returns.
func (j *Job) AwaitGate() error {
	if j.Gate == nil {
		return nil
	}
	return j.Gate()
}

// Gated is an Executor that honours Job.Gate. The scheduler gives the
// gate only to those; for any other it waits for the gate itself before
// calling Execute.
type Gated interface {
	Executor
	// HonoursGate says that Execute honours Job.Gate; it does nothing.
	HonoursGate()
}

// TokenVar is the environment variable that carries Job.Token.
const TokenVar = "GPUSCHED_ATTEMPT_TOKEN"

// Process identifies a local process group beyond PID reuse.
type Process struct {
	PID        int
	PGID       int
	StartTicks uint64 // process start time in clock ticks since boot; 0 if unknown
}

// Handle is an executor's own record of one attempt, persisted by the
// scheduler so that a scheduler started later can find the attempt again
// (Recover). Only the executor named reads Data; its layout is that
// executor's Version of it.
type Handle struct {
	Executor string // the executor's name, e.g. "local"
	Version  int    // the layout of Data, per executor
	Data     []byte // opaque to everyone but that executor
}

// IsZero reports whether h holds nothing.
func (h Handle) IsZero() bool { return h.Executor == "" && len(h.Data) == 0 }

// Running describes an attempt whose command runs.
type Running struct {
	// Handle finds the attempt from now on.
	Handle Handle
	// Since is when the command started running; timeouts and the
	// attempt's duration count from there.
	Since time.Time
	// PID is the attempt's leading process on this machine, for people;
	// 0 when it runs elsewhere.
	PID int
}

// Hooks are told of an attempt's two phases: submitted, then running,
// and of what the system running it says of it meanwhile. Any may be
// nil. They may be called on any goroutine.
type Hooks struct {
	// Submitted is called when the attempt exists outside the executor's
	// call (handed to another process or system) and before its command
	// can run. The caller persists h before it returns; a non-nil error
	// abandons the attempt, which then never runs.
	Submitted func(h Handle) error
	// Running is called once, when the command starts running.
	Running func(r Running)
	// Progress is told what the system running the attempt says of it,
	// each time that changes (never twice the same in a row): its job,
	// the job's state and node, why it waits. Executors that run the
	// command themselves never call it.
	Progress func(p Progress)
}

// Progress is what the system running an attempt (a batch system) says
// of it: its job there, where it runs, why it waits. The strings are the
// system's own (Slurm's PENDING, Priority...), for people and for tools.
type Progress struct {
	// System names the system for people, e.g. "Slurm".
	System string
	// Job is the attempt's job id there; empty before it was submitted.
	Job string
	// State is the job's state as the system words it (Slurm: PENDING,
	// RUNNING, COMPLETING...); empty before it was submitted.
	State string
	// Reason is why the job waits, as the system words it (Slurm:
	// Priority, Resources, BeginTime...); before a job exists, why
	// submission waits ("Slurm controller unreachable since 05:20:11:
	// submission waits").
	Reason string
	// Node is where the job runs or ran, when the system has said.
	Node string
	// Queued is true while the attempt waits to run: queued in the
	// system, or waiting to be submitted. Its command has not started.
	Queued bool
}

// EndReason says how an attempt ended. Only the task's own endings
// (Exited with a failing code, Signalled, TimedOut, Unrunnable) use up its
// retries; Lost, Preempted, NodeFailure and Infrastructure are faults of
// the system that ran it.
type EndReason uint8

// The ways an attempt ends.
const (
	Exited         EndReason = iota + 1 // the command exited (Result.ExitCode)
	Signalled                           // a signal killed it that did not come from the executor (Result.Signal)
	TimedOut                            // stopped at its Job.Timeout
	Cancelled                           // stopped because the caller's context was done, or KillNow
	Lost                                // its outcome cannot be known: what watched it is gone
	Preempted                           // the system running it took it back
	NodeFailure                         // the machine it ran on failed
	Infrastructure                      // the system could not set it up or run it (Result.Err says why)
	Unrunnable                          // the command as given cannot run (Result.Err wraps ErrCommand)
)

var reasonNames = [...]string{Exited: "exited", Signalled: "signalled", TimedOut: "timed-out", Cancelled: "cancelled",
	Lost: "lost", Preempted: "preempted", NodeFailure: "node-failure", Infrastructure: "infrastructure", Unrunnable: "unrunnable"}

// String returns the reason's stable name, as persisted.
func (r EndReason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return ""
}

// ParseEndReason returns the reason named s; 0 when s names none.
func ParseEndReason(s string) EndReason {
	for i, n := range reasonNames {
		if n != "" && n == s {
			return EndReason(i)
		}
	}
	return 0
}

// Charged reports whether an attempt that ended this way was the task's
// own doing, so that it uses up a retry when it failed.
func (r EndReason) Charged() bool {
	switch r {
	case Lost, Preempted, NodeFailure, Infrastructure, Cancelled:
		return false
	}
	return true
}

// Result is how a job ended.
type Result struct {
	// Reason says how it ended; 0 only from executors that predate it
	// (then Started, Signal and Err tell).
	Reason EndReason
	// Started is false when the command never ran (not found, bad dir...);
	// Err says why.
	Started bool
	// ExitCode is the exit status when Signal is 0.
	ExitCode int
	// Signal is the signal that killed the process, or 0.
	Signal syscall.Signal
	// Start and End bracket the job; Start is when it started running.
	Start, End time.Time
	// Err is a failure to run the job at all (could not start, could not
	// open the log, its outcome was lost); nil when the process ran,
	// whatever its exit code. When the fault is known to be the
	// environment's or the command's, Err wraps ErrEnvironment or
	// ErrCommand (test with errors.Is); otherwise it wraps neither.
	Err error
}

// Executor runs attempts, and finds them again after the scheduler that
// started them is gone.
type Executor interface {
	// Name is the executor's name in workflows and in its handles.
	Name() string
	// Execute runs job and blocks until it has ended and nothing of it is
	// left running, telling hooks of its phases. When ctx is done, the job
	// is stopped: SIGTERM to everything it started, then SIGKILL after
	// job.KillGrace; it ends Cancelled. When job.KillNow is closed
	// (before or after ctx is done), everything it started gets SIGKILL
	// at once. When the job's main process ends, whatever it started and
	// left running gets SIGKILL. At job.Timeout it is stopped as for ctx
	// and ends TimedOut.
	Execute(ctx context.Context, job Job, hooks Hooks) Result
	// Recover finds the attempts of orphans, started by an earlier
	// scheduler (possibly another process), all in one go: for each, in
	// order, a Recovery that reattaches to it if it still runs, or says
	// how it ended. An attempt whose outcome cannot be known is stopped,
	// with whatever it left running, and reported Lost.
	Recover(orphans []Orphan) []Recovery
}

// Orphan is an attempt started by an earlier scheduler: the job as it was
// started (Token, LogPath, Timeout, KillGrace... as then; Args and Env
// may be empty) and the last handle persisted for it (zero when none was).
type Orphan struct {
	Job    Job
	Handle Handle
	// Progress, when not nil, is told what the system running the
	// attempt says of it while its Recovery's Wait follows it, as
	// Hooks.Progress is.
	Progress func(p Progress)
}

// Recovery is what Recover found of one orphan.
type Recovery struct {
	// Wait, when not nil, means the attempt still runs: Wait blocks until
	// it ends, as Execute does (ctx done stops it, KillNow of the orphan's
	// Job kills it). Call it once.
	Wait func(ctx context.Context) Result
	// Running describes it while it runs (Wait not nil).
	Running Running
	// Result says how it ended when Wait is nil.
	Result Result
}

// SignalName returns a signal's conventional name, e.g. "SIGKILL".
func SignalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// Placer is an Executor that places attempts itself: another system (a
// cluster's scheduler, such as Slurm) chooses the machine and the GPUs each
// one runs on. The scheduler's admission by this machine's cards does not
// apply to its tasks: a GPU task it runs is admitted as a CPU task is (a
// slot, no card, no wait for nvidia-smi), and its GPU memory budget goes
// to the executor in Job.GPUMiB.
type Placer interface {
	// PlacesWork reports whether the executor places its attempts
	// itself (a wrapper may say it does not).
	PlacesWork() bool
	// MaxGPUMiB is the most GPU memory one GPU the executor can give an
	// attempt of task sp has (Slurm: the largest of its gpu_types); 0
	// when it does not know. After a CUDA out-of-memory failure, the
	// task's budget grows up to it, no further.
	MaxGPUMiB(sp *task.Spec) int64
}

// Signaler is an Executor that can send a signal to the processes of one
// of its attempts while it runs, found by its handle: the scheduler's
// pause sends SIGSTOP, its resume SIGCONT. An executor that is not one
// cannot stop attempts.
type Signaler interface {
	// Signal sends sig to everything the attempt of h runs (its process
	// group), provided that attempt still runs; an error otherwise.
	Signal(h Handle, sig syscall.Signal) error
}
