package executortest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// runStop: stopping a job signals everything in its group, SIGTERM then
// SIGKILL after the grace, or SIGKILL at once on KillNow.
func runStop(t *testing.T, newExecutor func(t *testing.T) executor.Executor, job jobFunc) {
	t.Run("StopTermsThenKillsWholeGroup", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := job(t, "-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = 300 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(ctx, j, executor.Hooks{}) }()
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
		go func() { done <- newExecutor(t).Execute(ctx, j, executor.Hooks{}) }()
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
		r := newExecutor(t).Execute(context.Background(), j, executor.Hooks{})
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
		go func() { done <- newExecutor(t).Execute(ctx, j, executor.Hooks{}) }()
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
		go func() { done <- newExecutor(t).Execute(context.Background(), j, executor.Hooks{}) }()
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

// runEscaped: processes that left the job's group are gone after its end,
// however it ended; processes that only look like the job's are not.
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
		go func() { done <- newExecutor(t).Execute(ctx, j, executor.Hooks{}) }()
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
		go func() { done <- newExecutor(t).Execute(context.Background(), j, executor.Hooks{}) }()
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
