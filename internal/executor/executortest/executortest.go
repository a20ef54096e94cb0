// Package executortest is the conformance suite every executor.Executor
// passes: exit codes, environment, working directory, logs, start failures,
// and stopping a job with everything it started.
package executortest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// Run runs the suite against executors made by newExecutor. sleeper is the
// path of the cmd/sleeper helper binary.
func Run(t *testing.T, newExecutor func(t *testing.T) executor.Executor, sleeper string) {
	job := func(t *testing.T, args ...string) executor.Job {
		return executor.Job{
			TaskID:    "t",
			Attempt:   1,
			Args:      append([]string{sleeper}, args...),
			Env:       []string{"PATH=" + os.Getenv("PATH")},
			Dir:       t.TempDir(),
			LogPath:   filepath.Join(t.TempDir(), "logs", "t", "1.log"),
			KillGrace: 10 * time.Second,
		}
	}

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

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{"gpusched-no-such-command-xyz"}
		r := newExecutor(t).Execute(context.Background(), j, func(executor.Process) { t.Error("started called for a command that cannot start") })
		if r.Started || r.Err == nil || !strings.Contains(r.Err.Error(), "gpusched-no-such-command-xyz") {
			t.Fatalf("result = %+v, want not started with an error naming the command", r)
		}
		if log := readFile(t, j.LogPath); !strings.Contains(log, "gpusched-no-such-command-xyz") {
			t.Errorf("log = %q, want the start error in it", log)
		}
	})

	t.Run("BadDir", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Dir = filepath.Join(j.Dir, "missing")
		r := newExecutor(t).Execute(context.Background(), j, nil)
		if r.Started || r.Err == nil {
			t.Fatalf("result = %+v, want a start error", r)
		}
	})

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
		var r executor.Result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Execute did not return 10s after its context was cancelled")
		}
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
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan executor.Result)
		go func() { done <- newExecutor(t).Execute(ctx, j, nil) }()
		waitPIDs(t, pidfile, 1)
		cancel()
		r := <-done
		if r.Signal != syscall.SIGTERM {
			t.Errorf("signal = %v, want SIGTERM", r.Signal)
		}
		if d := r.End.Sub(r.Start); d >= j.KillGrace {
			t.Errorf("a job that obeys SIGTERM took %v, the whole kill grace", d)
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
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
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
