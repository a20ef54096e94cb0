// Package executortest is the conformance suite every executor.Executor
// passes: exit codes, environment, working directory, logs (never written
// through a symbolic link), start failures and whose fault they are, and
// stopping a job with everything it started, including processes that
// left its process group, on timeout, cancel, kill-now and normal exit.
package executortest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// tokens makes each job's token unique.
var tokens atomic.Int64

// NewJob returns a job that runs sleeper with args, in a fresh folder,
// with a log under a fresh run folder (its LogRoot), an environment of
// PATH alone, a kill grace of 10 s and a token of its own.
func NewJob(t *testing.T, sleeper string, args ...string) executor.Job {
	root := t.TempDir()
	return executor.Job{
		TaskID:    "t",
		Attempt:   1,
		Args:      append([]string{sleeper}, args...),
		Env:       []string{"PATH=" + os.Getenv("PATH")},
		Dir:       t.TempDir(),
		LogRoot:   root,
		LogPath:   filepath.Join(root, "logs", "t", "attempt-1.log"),
		KillGrace: 10 * time.Second,
		Token:     fmt.Sprintf("executortest-%d-%d", os.Getpid(), tokens.Add(1)),
	}
}

// Run runs the suite against executors made by newExecutor. sleeper is the
// path of the cmd/sleeper helper binary.
func Run(t *testing.T, newExecutor func(t *testing.T) executor.Executor, sleeper string) {
	job := func(t *testing.T, args ...string) executor.Job { return NewJob(t, sleeper, args...) }
	t.Run("Basics", func(t *testing.T) { runBasics(t, newExecutor, job) })
	t.Run("Faults", func(t *testing.T) { runFaults(t, newExecutor, job) })
	t.Run("Logs", func(t *testing.T) { runLogs(t, newExecutor, job) })
	t.Run("Stop", func(t *testing.T) { runStop(t, newExecutor, job) })
	t.Run("Escaped", func(t *testing.T) { runEscaped(t, newExecutor, job, sleeper) })
}

type jobFunc func(t *testing.T, args ...string) executor.Job

func runBasics(t *testing.T, newExecutor func(t *testing.T) executor.Executor, job jobFunc) {
	t.Run("ExitCodeAndLog", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "to stdout", "-stderr", "to stderr", "-exit", "3")
		var started executor.Process
		r := newExecutor(t).Execute(context.Background(), j, func(p executor.Process) { started = p })
		if !r.Started || r.Err != nil || r.Signal != 0 || r.ExitCode != 3 {
			t.Fatalf("result = %+v, want started, exit code 3", r)
		}
		if started.PID <= 0 {
			t.Errorf("started callback got PID %d", started.PID)
		}
		if r.End.Before(r.Start) {
			t.Errorf("end %v before start %v", r.End, r.Start)
		}
		log := readFile(t, j.LogPath)
		if !strings.Contains(log, "to stdout\n") || !strings.Contains(log, "to stderr\n") {
			t.Errorf("log = %q, want both stdout and stderr", log)
		}
	})

	t.Run("EnvAndDir", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-env", "GPUSCHED_TEST_VAR", "-env", "HOME", "-touch", "made-here")
		j.Env = append(j.Env, "GPUSCHED_TEST_VAR=hello world")
		r := newExecutor(t).Execute(context.Background(), j, nil)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		log := readFile(t, j.LogPath)
		if !strings.Contains(log, "GPUSCHED_TEST_VAR=hello world\n") {
			t.Errorf("log = %q, want the job's variable", log)
		}
		if !strings.Contains(log, "HOME=<unset>\n") {
			t.Errorf("log = %q: the environment must be exactly the job's, HOME was not in it", log)
		}
		if _, err := os.Stat(filepath.Join(j.Dir, "made-here")); err != nil {
			t.Errorf("file not created in the job's dir: %v", err)
		}
	})

	t.Run("TokenInEnvironment", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-env", executor.TokenVar)
		j.Env = append(j.Env, executor.TokenVar+"=not-this-one")
		r := newExecutor(t).Execute(context.Background(), j, nil)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		if log, want := readFile(t, j.LogPath), executor.TokenVar+"="+j.Token+"\n"; log != want {
			t.Errorf("log = %q, want %q: Job.Token replaces the variable", log, want)
		}
	})
}

func runFaults(t *testing.T, newExecutor func(t *testing.T) executor.Executor, job jobFunc) {
	// cannotStart runs j, which must not start, and checks the class of
	// the error and that it names want.
	cannotStart := func(t *testing.T, j executor.Job, class error, want string) executor.Result {
		t.Helper()
		r := newExecutor(t).Execute(context.Background(), j, func(executor.Process) { t.Error("started called for a job that cannot start") })
		if r.Started || r.Err == nil {
			t.Fatalf("result = %+v, want not started, with an error", r)
		}
		if !errors.Is(r.Err, class) {
			t.Errorf("error %q is not %v", r.Err, class)
		}
		for _, other := range []error{executor.ErrCommand, executor.ErrEnvironment} {
			if other != class && errors.Is(r.Err, other) {
				t.Errorf("error %q is also %v", r.Err, other)
			}
		}
		if msg := r.Err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming %s", msg, want)
		}
		return r
	}

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{"gpusched-no-such-command-xyz"}
		cannotStart(t, j, executor.ErrCommand, "gpusched-no-such-command-xyz")
		if log := readFile(t, j.LogPath); !strings.Contains(log, "gpusched-no-such-command-xyz") {
			t.Errorf("log = %q, want the start error in it", log)
		}
	})
	t.Run("ProgramPathMissing", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{filepath.Join(t.TempDir(), "no-such-program")}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("NotExecutable", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{writeFile(t, "#!/bin/sh\nexit 0\n", 0o644)}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("ExecFormat", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{writeFile(t, "\x7fELF not really\x00\x01\x02", 0o755)}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("ProgramIsFolder", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{t.TempDir()}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("DirMissing", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Dir = filepath.Join(j.Dir, "missing")
		cannotStart(t, j, executor.ErrCommand, j.Dir)
	})
	t.Run("DirIsFile", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Dir = writeFile(t, "", 0o644)
		cannotStart(t, j, executor.ErrCommand, j.Dir)
	})
	t.Run("EmptyCommand", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = nil
		cannotStart(t, j, executor.ErrCommand, "empty command")
	})
	t.Run("LogFolderIsFile", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		mustMkdir(t, filepath.Join(j.LogRoot, "logs"))
		writeFileAt(t, filepath.Join(j.LogRoot, "logs", "t"), "")
		cannotStart(t, j, executor.ErrEnvironment, filepath.Join(j.LogRoot, "logs", "t"))
	})
	t.Run("LogFolderIsFileNoRoot", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		blocked := writeFileAt(t, filepath.Join(j.LogRoot, "blocked"), "")
		j.LogRoot = ""
		j.LogPath = filepath.Join(blocked, "t", "attempt-1.log")
		cannotStart(t, j, executor.ErrEnvironment, blocked)
	})
}

func runLogs(t *testing.T, newExecutor func(t *testing.T) executor.Executor, job jobFunc) {
	// refused runs j, whose log is booby-trapped, and checks that it did
	// not start, with an environment fault naming want.
	refused := func(t *testing.T, j executor.Job, want string) {
		t.Helper()
		done := make(chan executor.Result, 1)
		go func() { done <- newExecutor(t).Execute(context.Background(), j, nil) }()
		r := await(t, done, "it started")
		if r.Started || !errors.Is(r.Err, executor.ErrEnvironment) {
			t.Fatalf("result = %+v, want not started, an environment fault", r)
		}
		if msg := r.Err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming %s", msg, want)
		}
	}
	const precious = "precious content\n"

	t.Run("FolderSymlink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		outside := t.TempDir()
		target := writeFileAt(t, filepath.Join(outside, "attempt-1.log"), precious)
		mustMkdir(t, filepath.Join(j.LogRoot, "logs"))
		mustSymlink(t, outside, filepath.Dir(j.LogPath))
		refused(t, j, filepath.Dir(j.LogPath))
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted folder link = %q, want it unchanged", got)
		}
	})
	t.Run("LogsFolderSymlink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		outside := t.TempDir()
		mustMkdir(t, filepath.Join(outside, "t"))
		target := writeFileAt(t, filepath.Join(outside, "t", "attempt-1.log"), precious)
		mustSymlink(t, outside, filepath.Join(j.LogRoot, "logs"))
		refused(t, j, filepath.Join(j.LogRoot, "logs"))
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted logs link = %q, want it unchanged", got)
		}
	})
	t.Run("FileSymlink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		target := writeFile(t, precious, 0o644)
		mustMkdir(t, filepath.Dir(j.LogPath))
		mustSymlink(t, target, j.LogPath)
		refused(t, j, j.LogPath)
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted log link = %q, want it unchanged", got)
		}
	})
	t.Run("FileSymlinkNoRoot", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		j.LogRoot = ""
		target := writeFile(t, precious, 0o644)
		mustMkdir(t, filepath.Dir(j.LogPath))
		mustSymlink(t, target, j.LogPath)
		refused(t, j, j.LogPath)
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted log link = %q, want it unchanged", got)
		}
	})
	t.Run("HardLink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		target := writeFile(t, precious, 0o644)
		mustMkdir(t, filepath.Dir(j.LogPath))
		if err := os.Link(target, j.LogPath); err != nil {
			t.Skipf("cannot make a hard link here: %v", err)
		}
		refused(t, j, j.LogPath)
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted hard link = %q, want it unchanged", got)
		}
	})
	t.Run("FIFO", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		mustMkdir(t, filepath.Dir(j.LogPath))
		if err := syscall.Mkfifo(j.LogPath, 0o644); err != nil {
			t.Skipf("cannot make a FIFO here: %v", err)
		}
		refused(t, j, j.LogPath)
	})
	t.Run("Appends", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "second")
		mustMkdir(t, filepath.Dir(j.LogPath))
		writeFileAt(t, j.LogPath, "first\n")
		if r := newExecutor(t).Execute(context.Background(), j, nil); r.Err != nil || r.ExitCode != 0 {
			t.Fatalf("result = %+v", r)
		}
		if got := readFile(t, j.LogPath); got != "first\nsecond\n" {
			t.Errorf("log = %q, want what was there, then the job's output", got)
		}
	})
}

func runStop(t *testing.T, newExecutor func(t *testing.T) executor.Executor, job jobFunc) {
	t.Run("StopTermsThenKillsWholeGroup", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := job(t, "-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = 300 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(ctx, j, nil) }()
		pids := waitPIDs(t, pidfile, 2)
		cancel()
		r := await(t, done, "cancel")
		if r.Signal != syscall.SIGKILL {
			t.Errorf("signal = %v, want SIGKILL for a job that ignores SIGTERM", r.Signal)
		}
		if d := r.End.Sub(r.Start); d < j.KillGrace {
			t.Errorf("job ended after %v, before its kill grace %v", d, j.KillGrace)
		}
		for _, pid := range pids {
			waitGone(t, pid)
		}
	})

	t.Run("StopPoliteJob", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := job(t, "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour // SIGTERM alone must end it
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(ctx, j, nil) }()
		waitPIDs(t, pidfile, 1)
		cancel()
		if r := <-done; r.Signal != syscall.SIGTERM {
			t.Errorf("signal = %v, want SIGTERM", r.Signal)
		}
	})

	t.Run("LeftoversKilledAtExit", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := job(t, "-grandchild", "-pidfile", pidfile, "-exit", "0")
		r := newExecutor(t).Execute(context.Background(), j, nil)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		pids := waitPIDs(t, pidfile, 2)
		waitGone(t, pids[1])
	})

	t.Run("KillNowDuringGrace", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
		// The escaped grandchild notes its SIGTERM and exits: then the job
		// is in its grace period, which only KillNow can cut short.
		j := job(t, "-ignore-term", "-grandchild", "-escape", "setsid", "-polite", termfile, "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		killNow := make(chan struct{})
		j.KillNow = killNow
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(ctx, j, nil) }()
		pids := waitPIDs(t, pidfile, 2)
		cancel()
		waitLine(t, termfile, fmt.Sprint("TERM ", pids[1]))
		waitGone(t, pids[1])
		close(killNow)
		r := await(t, done, "KillNow was closed")
		if !r.Started || r.Err != nil || r.Signal != syscall.SIGKILL {
			t.Errorf("result = %+v, want killed by SIGKILL", r)
		}
		waitGone(t, pids[0])
	})

	t.Run("KillNowWithoutCancel", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := job(t, "-ignore-term", "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		killNow := make(chan struct{})
		j.KillNow = killNow
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(context.Background(), j, nil) }()
		pids := waitPIDs(t, pidfile, 2)
		close(killNow)
		r := await(t, done, "KillNow was closed")
		if !r.Started || r.Err != nil || r.Signal != syscall.SIGKILL {
			t.Errorf("result = %+v, want killed by SIGKILL", r)
		}
		for _, pid := range pids {
			waitGone(t, pid)
		}
	})
}

// ending is how a job in the escape tests comes to its end.
type ending struct {
	name string
	// args make the sleeper end this way once it has started its
	// grandchild: exit, or wait to be stopped (ignoring SIGTERM).
	args []string
	// ctx, when set, returns the context the job runs under and stop,
	// called once the job's processes are known, which returns when the
	// context is done. Nil: the job ends on its own.
	ctx func(t *testing.T) (ctx context.Context, stop func())
}

var endings = []ending{
	{name: "Exit", args: []string{"-exit", "0"}},
	{name: "Cancel", args: []string{"-ignore-term", "-sleep", "1h"}, ctx: func(t *testing.T) (context.Context, func()) {
		return context.WithCancel(context.Background())
	}},
	{name: "Timeout", args: []string{"-ignore-term", "-sleep", "1h"}, ctx: func(t *testing.T) (context.Context, func()) {
		c := &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
		return c, c.expire
	}},
}

// deadlineCtx is a context whose deadline passes when the test says, once
// the job has started its processes, so that a slow machine cannot make it
// pass before: then it reads as a timed-out context does.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func (c *deadlineCtx) expire()                     { close(c.done) }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func runEscaped(t *testing.T, newExecutor func(t *testing.T) executor.Executor, job jobFunc, sleeper string) {
	// run runs j until e ends it, once want PIDs are in pidfile, and
	// checks that none of them is left.
	run := func(t *testing.T, j executor.Job, e ending, pidfile string, want int) executor.Result {
		t.Helper()
		j.KillGrace = 200 * time.Millisecond
		ctx, stop := context.Background(), func() {}
		if e.ctx != nil {
			ctx, stop = e.ctx(t)
		}
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(j.LogPath)
				t.Logf("the job's log:\n%s", b)
			}
		})
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(ctx, j, nil) }()
		pids := waitPIDs(t, pidfile, want)
		stop()
		r := await(t, done, "its end")
		if !r.Started || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		for _, pid := range pids {
			waitGone(t, pid)
		}
		return r
	}

	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			for _, how := range []string{"setsid", "pgid"} {
				t.Run("Sleeper-"+how, func(t *testing.T) {
					t.Parallel()
					pidfile := filepath.Join(t.TempDir(), "pids")
					j := job(t, append([]string{"-grandchild", "-escape", how, "-pidfile", pidfile}, e.args...)...)
					run(t, j, e, pidfile, 2)
				})
			}
			t.Run("BashSetM", func(t *testing.T) {
				t.Parallel()
				bash := need(t, "bash")
				pidfile := filepath.Join(t.TempDir(), "pids")
				end := "exit 0"
				if e.ctx != nil {
					end = "trap '' TERM; sleep 1000"
				}
				j := job(t)
				j.Args = []string{bash, "-c", `set -m
sleep 1000 & echo $! >>"$1"
"$2" -ignore-term -sleep 1h & echo $! >>"$1"
echo $$ >>"$1"
` + end, "bash", pidfile, sleeper}
				run(t, j, e, pidfile, 3)
			})
			t.Run("Python", func(t *testing.T) {
				t.Parallel()
				python := need(t, "python3")
				pidfile := filepath.Join(t.TempDir(), "pids")
				j := job(t)
				j.Args = []string{python, "-c", `import os, signal, subprocess, sys, time
ps = [subprocess.Popen(["sleep", "1000"], start_new_session=True),
      subprocess.Popen([sys.argv[2], "-ignore-term", "-sleep", "1h"], start_new_session=True)]
if sys.version_info >= (3, 11):
    ps.append(subprocess.Popen(["sleep", "1000"], process_group=0))
else:
    ps.append(subprocess.Popen(["sleep", "1000"], preexec_fn=lambda: os.setpgid(0, 0)))
with open(sys.argv[1], "a") as f:
    f.write("".join(f"{p.pid}\n" for p in ps) + f"{os.getpid()}\n")
if sys.argv[3] == "stay":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(1000)
`, pidfile, sleeper, map[bool]string{true: "stay", false: "exit"}[e.ctx != nil]}
				run(t, j, e, pidfile, 4)
			})
		})
	}

	t.Run("OthersSpared", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, gofile := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
		j := job(t, "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-wait", gofile, "-exit", "0")
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(context.Background(), j, nil) }()
		pids := waitPIDs(t, pidfile, 2)
		// Started after the job's leader, as its own processes are, but
		// not by it: the token in another variable, inside another
		// variable's value, or another attempt's token.
		decoys := map[string][]string{
			"another variable":  {"OTHER_TOKEN=" + j.Token},
			"inside a value":    {"X=" + executor.TokenVar + "=" + j.Token},
			"another attempt's": {executor.TokenVar + "=" + j.Token + "0"},
			"a prefix of it":    {executor.TokenVar + "=" + j.Token[:len(j.Token)-1]},
		}
		alive := map[string]int{}
		for name, env := range decoys {
			alive[name] = startDecoy(t, sleeper, env)
		}
		writeFileAt(t, gofile, "")
		if r := <-done; r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		waitGone(t, pids[1])
		for name, pid := range alive {
			if !procfs.Alive(pid) {
				t.Errorf("a process with %s token was killed", name)
			}
		}
	})
}

// await returns the result from done, failing the test if it does not come
// within a minute (a generous bound: the job is stuck) after what.
func await(t *testing.T, done <-chan executor.Result, what string) executor.Result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("Execute did not return a minute after %s", what)
		return executor.Result{}
	}
}

// startDecoy starts sleeper with env, for an hour, killed at the end of
// the test, and returns its PID.
func startDecoy(t *testing.T, sleeper string, env []string) int {
	t.Helper()
	p, err := os.StartProcess(sleeper, []string{sleeper, "-sleep", "1h"}, &os.ProcAttr{Env: env, Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	return p.Pid
}

// need returns the path of program name, preferring a binary to a script
// (a version manager's shim may take seconds to start), or skips the test.
func need(t *testing.T, name string) string {
	t.Helper()
	found := ""
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		if isELF(p) {
			return p
		}
		if found == "" {
			found = p
		}
	}
	if found == "" {
		t.Skipf("%s is not installed", name)
	}
	return found
}

// isELF reports whether the file at path starts as an ELF binary does.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 4)
	_, err = io.ReadFull(f, b)
	return err == nil && string(b) == "\x7fELF"
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// writeFile writes content to a new file with mode perm in a fresh folder
// and returns its path.
func writeFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFileAt(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustMkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// waitPIDs waits until path lists n PIDs and returns them.
func waitPIDs(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Fields(string(b))
		if len(lines) >= n {
			pids := make([]int, len(lines))
			for i, l := range lines {
				pids[i], _ = strconv.Atoi(l)
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lists %d PIDs after 10s, want %d", path, len(lines), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLine waits until the file at path has the line want.
func waitLine(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		for l := range strings.Lines(string(b)) {
			if strings.TrimSpace(l) == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q after 10s, want the line %q", path, b, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone fails the test unless pid is dead (or a zombie awaiting its
// reaper) within a few seconds.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !Alive(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d still alive", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Alive reports whether pid is a live process (not a zombie).
func Alive(pid int) bool { return procfs.Alive(pid) }
