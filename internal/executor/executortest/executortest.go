// Package executortest is the conformance suite every executor.Executor
// passes: exit codes, environment, working directory, logs (never written
// through a symbolic link), start failures and whose fault they are, and
// stopping a job with everything it started, including processes that
// left its process group, on timeout, cancel, kill-now and normal exit.
package executortest

import (
	"context"
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
		var started executor.Running
		r := newExecutor(t).Execute(context.Background(), j, executor.Hooks{Running: func(r executor.Running) { started = r }})
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
		r := newExecutor(t).Execute(context.Background(), j, executor.Hooks{})
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
		r := newExecutor(t).Execute(context.Background(), j, executor.Hooks{})
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		if log, want := readFile(t, j.LogPath), executor.TokenVar+"="+j.Token+"\n"; log != want {
			t.Errorf("log = %q, want %q: Job.Token replaces the variable", log, want)
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
