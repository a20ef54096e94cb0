package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// TokenVar is the environment variable that carries an attempt's token.
const TokenVar = executor.TokenVar

// Executor runs jobs as local process groups. The zero value is ready.
type Executor struct {
	// Cgroups puts each attempt in a cgroup of its own where the machine
	// allows (cgroup v2 writable, Linux 5.14 or later; found out at run
	// time, else the token alone is used). The cgroup also holds the
	// processes that leave the group and clear their environment, which
	// the token cannot find; it costs some 0.3 ms of CPU per attempt (see
	// docs/processes.md).
	Cgroups bool
}

var _ executor.Executor = (*Executor)(nil)

// Name is "local".
func (e *Executor) Name() string { return Name }

// HonoursGate: Execute prepares (opens the log, finds the program, makes
// the environment) while Job.Gate blocks, and starts the process, or
// writes why it cannot into the log, only once it has returned nil.
func (e *Executor) HonoursGate() {}

var _ executor.Gated = (*Executor)(nil)

// Execute runs job; see executor.Executor and docs/processes.md. The
// attempt exists only once its process does, so hooks.Submitted is never
// called: hooks.Running gets the process's handle as soon as it runs.
func (e *Executor) Execute(ctx context.Context, job executor.Job, hooks executor.Hooks) executor.Result {
	res := executor.Result{Start: time.Now()}
	fail := func(err error) executor.Result {
		res.End, res.Err = time.Now(), err
		res.Reason = executor.Infrastructure
		if errors.Is(err, executor.ErrCommand) {
			res.Reason = executor.Unrunnable
		}
		return res
	}
	if len(job.Args) == 0 {
		if gerr := job.AwaitGate(); gerr != nil {
			return fail(gerr)
		}
		return fail(executor.CommandFault(errors.New("empty command")))
	}
	// Opening the log creates it: a file left behind, empty, when the
	// gate then fails or the scheduler dies before it opens, which the
	// attempt of the same number appends to later. Nothing is written
	// into it before the gate.
	logf, err := OpenLogAs(job.LogRoot, job.LogPath, job.User)
	if err != nil {
		if gerr := job.AwaitGate(); gerr != nil {
			return fail(gerr)
		}
		return fail(executor.EnvironmentFault(err))
	}
	defer logf.Close()
	cannotStart := func(err error) executor.Result {
		if gerr := job.AwaitGate(); gerr != nil {
			return fail(gerr)
		}
		fmt.Fprintf(logf, "gpusched: %v\n", err)
		return fail(err)
	}
	path, err := lookPath(job.Args[0], job.Env, job.Dir)
	if err != nil {
		if job.Dir != "" {
			if derr := checkDir(job.Dir); derr != nil {
				return cannotStart(derr) // the folder is what is wrong
			}
		}
		return cannotStart(err)
	}
	env := withToken(job.Env, job.Token)
	if job.User != nil {
		env = job.User.Env(env)
	}
	// The process is started with syscall.StartProcess rather than
	// os/exec or os.StartProcess: the path is found (lookPath) and the
	// environment made (withToken, the runner) already, so exec.Cmd would
	// only copy the environment once more through a map (its dedup); and
	// os.StartProcess asks the kernel for a pidfd (CLONE_PIDFD, a tenth
	// of the clone's cost) and makes an os.Process with a cleanup, for a
	// leader that is waited for by PID anyway (follow), without reuse to
	// fear while it is an unreaped zombie. The working directory is
	// checked only when the start fails, to say what was wrong.
	stdin := job.Stdin // a file: no copying goroutine to wait for
	if stdin == nil {
		if stdin = devNull(); stdin == nil {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return cannotStart(fmt.Errorf("open %s: %w", os.DevNull, err))
			}
			defer f.Close()
			stdin = f
		}
	}
	files := []uintptr{stdin.Fd(), logf.Fd(), logf.Fd()}
	start := func(cg *cgroup) (int, error) {
		attr := &syscall.SysProcAttr{Setpgid: true}
		if u := job.User; u != nil {
			attr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
		}
		if cg != nil {
			attr.UseCgroupFD, attr.CgroupFD = true, cg.fd
		}
		pid, _, err := syscall.StartProcess(path, job.Args, &syscall.ProcAttr{Dir: job.Dir, Env: env, Files: files, Sys: attr})
		runtime.KeepAlive(stdin) // its descriptor is in files
		return pid, err
	}
	if err := job.AwaitGate(); err != nil {
		return fail(err)
	}
	var cg *cgroup
	if e.Cgroups {
		cg = newCgroup(job.Token)
	}
	tr := newTracker(job.Token, cg)
	bracket := bracketStart()
	pid, err := start(cg)
	if err != nil && cg != nil {
		// It may be the cgroup (no clone3, a cgroup that takes no
		// processes): try without it, and keep away from cgroups if that
		// was it.
		if p, err2 := start(nil); err2 == nil {
			pid, err = p, nil
			cg.failed()
			tr.cg = nil
		}
	}
	if err != nil {
		tr.abandon()
		if job.Dir != "" {
			if derr := checkDir(job.Dir); derr != nil {
				return cannotStart(derr) // the folder is what is wrong
			}
		}
		return cannotStart(startError(path, &fs.PathError{Op: "fork/exec", Path: path, Err: err}))
	}
	res.Started = true
	tr.leader = pid
	ours.add(pid, tr.turn)
	if hooks.Running != nil {
		p := executor.Process{PID: pid, PGID: pid, StartTicks: bracket.ticks(pid)}
		hooks.Running(executor.Running{Handle: EncodeHandle(p), Since: res.Start, PID: pid})
	}
	reap := func() (syscall.WaitStatus, error) {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			switch err {
			case nil:
				return ws, nil
			case syscall.EINTR:
				continue
			}
			return 0, fmt.Errorf("wait: %w", err)
		}
	}
	return e.follow(ctx, job, pid, tr, res, reap)
}

// follow waits for the attempt whose leader is pid (also its process
// group's id) to end, stopping it at its timeout (counted from res.Start),
// when ctx ends or when job.KillNow closes; kills what is left of it; and
// reaps the leader with reap. res is the result so far.
func (e *Executor) follow(ctx context.Context, job executor.Job, pid int, tr *tracker, res executor.Result, reap func() (syscall.WaitStatus, error)) executor.Result {
	var timeout <-chan time.Time
	if job.Timeout > 0 {
		t := time.NewTimer(job.Timeout - time.Since(res.Start))
		defer t.Stop()
		timeout = t.C
	}

	// The leader is waited for without being reaped (WNOWAIT): while it is
	// an unreaped zombie its PID, and so the group id, cannot be reused, so
	// signalling the group can never hit a stranger.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()

	stopped := executor.EndReason(0) // why the executor stopped it, if it did
	select {
	case <-exited:
	case <-job.KillNow:
		stopped = executor.Cancelled
	case <-timeout:
		stopped = executor.TimedOut
	case <-ctx.Done():
		stopped = executor.Cancelled
	}
	if stopped != 0 {
		e.stop(pid, tr, job, exited)
	}
	// The leader has exited (or the grace is over, or it is to die now):
	// nothing else it started may live on, in its group or out of it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	tr.kill()
	<-exited
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	ws, err := reap()
	tr.close()
	res.End = time.Now()
	switch {
	case err != nil:
		res.Err = err
		res.Reason = executor.Infrastructure
	case ws.Signaled():
		res.Signal = ws.Signal()
		res.Reason = executor.Signalled
	default:
		res.ExitCode = ws.ExitStatus()
		res.Reason = executor.Exited
	}
	if stopped != 0 && res.Err == nil {
		res.Reason = stopped
	}
	return res
}

// stop stops a running attempt: SIGTERM to its group and to what carries
// its token, then, after the kill grace (or at once when KillNow is
// closed), the caller's SIGKILL.
func (e *Executor) stop(pid int, tr *tracker, job executor.Job, exited <-chan struct{}) {
	select {
	case <-job.KillNow:
		return
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	tr.term()
	grace := time.NewTimer(job.KillGrace)
	defer grace.Stop()
	select {
	case <-exited:
	case <-grace.C:
	case <-job.KillNow:
	}
}

// devNull is /dev/null, opened once for reading, every attempt's stdin
// unless its job gives one: os/exec would open it anew for each command
// (six system calls). nil if it cannot be opened: os/exec then tries.
var devNull = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// withToken returns env with TokenVar=token in place of any TokenVar.
func withToken(env []string, token string) []string {
	if token == "" {
		return env
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, TokenVar+"=") {
			out = append(out, kv)
		}
	}
	return append(out, TokenVar+"="+token)
}

// StartTicks returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/PID/stat), or 0 if it cannot be read. Together
// with the PID it names a process uniquely across PID reuse.
func StartTicks(pid int) uint64 {
	st, _ := procfs.Read(pid)
	return st.StartTicks
}
