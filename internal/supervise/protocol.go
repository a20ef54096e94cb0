package supervise

// The messages between a client (Executor) and the supervisor: one JSON
// object per line on the unix socket, each with its type. The client
// starts with a hello, which the supervisor answers with its own before
// anything else; a supervisor that speaks another version answers with an
// error and hangs up.
//
//	client → supervisor: hello, start, stop, kill, attach, forget, sweep, scheduler
//	supervisor → client: hello, running, ended, attached, detached, scheduled, error
//
// An attempt is named by its id (the job's token, unique per attempt). The
// supervisor sends running and ended only to the connection that owns the
// attempt: the one that started it, or the last one that attached it.

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
)

// protocolVersion is the version of the messages below; a client and a
// supervisor talk only when theirs are equal.
const protocolVersion = 1

// The message types.
const (
	msgHello    = "hello"    // both ways: version; from the supervisor, its PID too
	msgStart    = "start"    // run Job as attempt ID
	msgStop     = "stop"     // stop attempt ID: SIGTERM, its kill grace, SIGKILL
	msgKill     = "kill"     // kill attempt ID at once (SIGKILL)
	msgAttach   = "attach"   // take over the attempts IDs; one attached per id answers
	msgForget   = "forget"   // the ends of attempts IDs are committed: their records may go (compact.go); no answer
	msgSweep    = "sweep"    // IDs are all the attempts the client's state shows running: the records of others may go; no answer
	msgRunning  = "running"  // attempt ID's command runs: PID, PGID, StartTicks, Since
	msgEnded    = "ended"    // attempt ID ended: Result (already in the results file)
	msgAttached = "attached" // answer to attach for ID: Running says whether it still runs
	msgDetached = "detached" // another connection took attempt ID over: no more news of it here
	msgError    = "error"    // Error says what was wrong with the last message; fatal before hello

	// msgScheduler starts a scheduler as the supervisor's child for the
	// front that sends it (front.go): Sched says how, and the message
	// comes with descriptors (SCM_RIGHTS): stdin, stdout, stderr, the
	// status pipe, then Sched.Files more. msgScheduled answers with its
	// PID, or msgError with why it could not start; both carry the ID.
	msgScheduler = "scheduler"
	msgScheduled = "scheduled"
)

// message is every message, told apart by Type; a field is set only in the
// types its comment names.
type message struct {
	Type    string     `json:"type"`
	Version int        `json:"version,omitempty"` // hello
	PID     int        `json:"pid,omitempty"`     // hello (the supervisor's), running, attached
	ID      string     `json:"id,omitempty"`      // all about one attempt
	IDs     []string   `json:"ids,omitempty"`     // attach, forget, sweep
	PIDs    []int      `json:"pids,omitempty"`    // forget: the leading process of each of IDs, 0 when unknown
	Job     *jobSpec   `json:"job,omitempty"`     // start
	Sched   *schedSpec `json:"sched,omitempty"`   // scheduler

	PGID       int       `json:"pgid,omitempty"`        // running, attached
	StartTicks uint64    `json:"start_ticks,omitempty"` // running, attached
	Since      time.Time `json:"since,omitzero"`        // running, attached
	Running    bool      `json:"running,omitempty"`     // attached

	Result *resultRecord `json:"result,omitempty"` // ended
	Error  string        `json:"error,omitempty"`  // error
}

// jobSpec is an executor.Job on the wire. Paths are absolute: the
// supervisor's working directory is not the client's.
type jobSpec struct {
	Task      string         `json:"task"`
	Attempt   int            `json:"attempt"`
	Args      []string       `json:"args"`
	Env       []string       `json:"env"`
	Dir       string         `json:"dir,omitempty"`
	LogPath   string         `json:"log_path"`
	LogRoot   string         `json:"log_root,omitempty"`
	Timeout   time.Duration  `json:"timeout,omitempty"`
	KillGrace time.Duration  `json:"kill_grace,omitempty"`
	Token     string         `json:"token,omitempty"` // the id, unless the job has no token
	Cgroups   bool           `json:"cgroups,omitempty"`
	User      *executor.User `json:"user,omitempty"`
}

// job returns the executor.Job that spec describes.
func (s *jobSpec) job() executor.Job {
	return executor.Job{TaskID: s.Task, Attempt: s.Attempt, Args: s.Args, Env: s.Env, Dir: s.Dir,
		LogPath: s.LogPath, LogRoot: s.LogRoot, Timeout: s.Timeout, KillGrace: s.KillGrace, Token: s.Token, User: s.User}
}

// schedSpec is how a front asks its supervisor to start its scheduler:
// the program, its argv, environment and working directory, and the
// front's umask, which the scheduler takes first thing.
type schedSpec struct {
	Path  string   `json:"path"`
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`
	Umask int      `json:"umask"`
	Files int      `json:"files,omitempty"` // descriptors after the status pipe
}

// resultVersion is the layout of resultRecord in the results file.
const resultVersion = 1

// resultRecord is an executor.Result as the ended message carries it and
// as the results file keeps it.
type resultRecord struct {
	Version  int       `json:"version"`
	ID       string    `json:"id"` // the attempt's token
	Reason   string    `json:"reason"`
	Started  bool      `json:"started"`
	ExitCode int       `json:"exit_code"`
	Signal   string    `json:"signal,omitempty"` // e.g. "SIGKILL"
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	Error    string    `json:"error,omitempty"`
	// Fault is whose fault Error is: "command" (executor.ErrCommand),
	// "environment" (executor.ErrEnvironment) or "" (neither).
	Fault string `json:"fault,omitempty"`
	// PID and StartTicks name the attempt's leading process, when it ran:
	// a record of an earlier attempt with the same token is not taken for
	// that of an orphan whose handle names another process.
	PID        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
}

// record returns r as a resultRecord of attempt id, whose leading
// process was p (zero: it did not run).
func record(id string, r executor.Result, p executor.Process) *resultRecord {
	rec := &resultRecord{Version: resultVersion, ID: id, Reason: r.Reason.String(), Started: r.Started,
		ExitCode: r.ExitCode, Start: r.Start, End: r.End, PID: p.PID, StartTicks: p.StartTicks}
	if r.Signal != 0 {
		rec.Signal = executor.SignalName(r.Signal)
	}
	if r.Err != nil {
		rec.Error = r.Err.Error()
		switch {
		case errors.Is(r.Err, executor.ErrCommand):
			rec.Fault = "command"
		case errors.Is(r.Err, executor.ErrEnvironment):
			rec.Fault = "environment"
		}
	}
	return rec
}

// result returns the executor.Result that rec keeps; its Err reads as the
// original did and wraps the same class of fault.
func (rec *resultRecord) result() executor.Result {
	r := executor.Result{Reason: executor.ParseEndReason(rec.Reason), Started: rec.Started,
		ExitCode: rec.ExitCode, Start: rec.Start, End: rec.End}
	if rec.Signal != "" {
		r.Signal = signalNumber(rec.Signal)
	}
	if rec.Error != "" {
		err := errors.New(rec.Error)
		switch rec.Fault {
		case "command":
			err = executor.CommandFault(err)
		case "environment":
			err = executor.EnvironmentFault(err)
		}
		r.Err = err
	}
	return r
}

// signalNumber reads a name written by executor.SignalName.
func signalNumber(name string) syscall.Signal {
	if s := unix.SignalNum(name); s != 0 {
		return s
	}
	if n, ok := strings.CutPrefix(name, "signal "); ok {
		if v, err := strconv.Atoi(n); err == nil {
			return syscall.Signal(v)
		}
	}
	return 0
}
