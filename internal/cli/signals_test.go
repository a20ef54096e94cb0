package cli_test

// End-to-end tests of what SIGINT, SIGTERM and SIGHUP do to "gpusched run"
// (signals.go): the real binary, real tasks, real process groups.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// watchedRun is "gpusched run" whose output the test reads as it comes.
type watchedRun struct {
	cmd         *exec.Cmd
	out, errOut syncBuffer
	done        chan struct{}
	err         error
}

// startWatched starts gpusched with args in dir; the test's cleanup kills
// it if it is still running.
func startWatched(t *testing.T, dir string, args ...string) *watchedRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w := &watchedRun{cmd: command(ctx, dir, args...), done: make(chan struct{})}
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.errOut
	if err := w.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		cancel()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
	})
	return w
}

// waitStderr waits until stderr holds want.
func (w *watchedRun) waitStderr(t *testing.T, want string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%q on stderr", want), func() bool {
		return strings.Contains(w.errOut.String(), want)
	})
}

// wait waits for gpusched to exit (a generous minute) and returns its exit
// code; -1 if a signal killed it.
func (w *watchedRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		t.Fatalf("gpusched did not exit\nstdout:\n%s\nstderr:\n%s", w.out.String(), w.errOut.String())
	}
	if w.err == nil {
		return 0
	}
	if ee, ok := w.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatal(w.err)
	return 0
}

// A second signal kills the running tasks at once (SIGKILL) instead of
// waiting out the kill grace (an hour here); a third does nothing more.
// The run exits 1 and records the task cancelled, killed by SIGKILL, with
// no process of it left.
func TestSecondSignalKillsAtOnce(t *testing.T) {
	t.Parallel()
	for _, second := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(second.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "pids")
			wf := writeFile(t, filepath.Join(dir, "grace.yaml"), `
scheduling:
  kill_grace: 1h
tasks:
  - id: stubborn
    args: `+sleeper("-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")+`
`)
			r := startWatched(t, "", "run", wf)
			pids := readPIDs(t, pidfile, 2)
			t.Cleanup(func() {
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			waitFor(t, 30*time.Second, "stubborn to be recorded running", func() bool {
				tk := status(t, wf).task(t, "stubborn")
				return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == pids[0]
			})
			// Each signal once the one before is seen handled: two sent at
			// once could reach the process as one.
			if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			r.waitStderr(t, "stopping running tasks (SIGTERM, then SIGKILL after 1h0m0s; Ctrl-C again kills them at once)")
			if err := r.cmd.Process.Signal(second); err != nil {
				t.Fatal(err)
			}
			r.waitStderr(t, "again: killing running tasks now (SIGKILL)")
			_ = r.cmd.Process.Signal(syscall.SIGINT) // the third: nothing more (it may have exited already)
			if code := r.wait(t); code != 1 {
				t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, r.out.String(), r.errOut.String())
			}
			if n := strings.Count(r.errOut.String(), "\n"); n != 2 {
				t.Errorf("stderr has %d lines, want the 2 about the signals:\n%s", n, r.errOut.String())
			}
			checkGone(t, pids[0], pids)
			tk := checkTask(t, status(t, wf), "stubborn", "cancelled", 1, "null")
			if a := tk.History[0]; a.Signal != "SIGKILL" || !a.Cancelled {
				t.Errorf("attempt: signal %q, cancelled %v; want SIGKILL, true", a.Signal, a.Cancelled)
			}
		})
	}
}

// The terminal closes under a live display (the SSH session drops): the
// kernel sends SIGHUP and every write to the terminal fails from then on.
// gpusched still stops its tasks, records them cancelled (not running),
// leaves no process behind and exits 1.
func TestTerminalHangUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "hangup.yaml"), `
scheduling:
  kill_grace: 300ms
tasks:
  - id: long
    args: `+sleeper("-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")+`
  - id: next
    dependencies: [long]
    args: `+sleeper("-touch", "next-ran")+`
`)
	p := startPTY(t, nil, "run", wf)
	pids := readPIDs(t, pidfile, 2)
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	p.waitScreen(t, 30*time.Second, "long's line", func(screen string) bool {
		return strings.Contains(screen, "  long ")
	})
	if err := p.tty.Close(); err != nil { // hang up
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatal("gpusched did not exit after the terminal hung up")
	}
	var ee *exec.ExitError
	if p.err == nil || !asExitError(p.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("gpusched after the hang-up: %v, want exit code 1", p.err)
	}
	checkGone(t, pids[0], pids)
	s := status(t, wf)
	checkTask(t, s, "long", "cancelled", 1, "null")
	if next := s.task(t, "next"); next.Attempts != 0 || next.State == "running" {
		t.Errorf("next: %s after %d attempts; want never started", next.State, next.Attempts)
	}
}

func asExitError(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// A signal while the workflow is still being read (here from a pipe that
// the test holds open) starts nothing: gpusched exits 1 once it has read it,
// and no run directory is made.
func TestInterruptWhileReading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "flow.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r := startWatched(t, dir, "run", fifo)
	// Opening the pipe for writing waits for gpusched to open it for
	// reading: it is loading the workflow, its signals caught.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("tasks:\n  - id: a\n    args: " + sleeper("-touch", "a-ran") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r.waitStderr(t, "gpusched: interrupt: no task will start")
	if _, err := f.WriteString("  - id: b\n    args: " + sleeper("-touch", "b-ran") + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, r.out.String(), r.errOut.String())
	}
	if got := listTree(t, dir); len(got) != 1 {
		t.Errorf("files made: %v, want only the workflow", got)
	}
}

// A signal while a big workflow loads (parsing and saving 100,000 tasks
// takes seconds) starts nothing either: gpusched exits 1, and the state
// saved so far is intact: no task, or every task pending, none started.
func TestInterruptWhileLoadingBigWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: loads 100,000 tasks")
	}
	t.Parallel()
	const n = 100_000
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("tasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: t%06d\n    args: [\"true\"]\n", i)
	}
	wf := writeFile(t, filepath.Join(dir, "big.yaml"), b.String())
	r := startWatched(t, "", "run", wf)
	// The lock file names the scheduler (started for the gpusched run
	// this test started, its front) once it has parsed the workflow and
	// opened the run directory; the tasks are about to be saved.
	lock := filepath.Join(dir, ".gpusched", "big", "lock")
	waitFor(t, time.Minute, "the run directory's lock", func() bool {
		b, _ := os.ReadFile(lock)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && alive(pid)
	})
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, r.out.String(), r.errOut.String())
	}
	if !strings.Contains(r.errOut.String(), "gpusched: interrupt: no task will start") ||
		!strings.Contains(r.out.String(), "interrupted while loading: no task started") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.out.String(), r.errOut.String())
	}
	st := gs(t, "", "status", wf)
	st.want(t, 0)
	head, _, _ := strings.Cut(st.stdout, "\n")
	if head != "0 tasks: " && head != fmt.Sprintf("%d tasks: %d pending", n, n) {
		t.Errorf("status after the interrupt: %q, want no task or %d pending", head, n)
	}
}

// Ctrl-C always makes the run exit 1, even when every task it has is
// complete: here the only task completed and its on_complete handler hangs.
func TestInterruptedRunExits1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "handler-pid")
	wf := writeFile(t, filepath.Join(dir, "hook.yaml"), `
tasks:
  - id: only
    args: [true]
    on_complete: `+sleeper("-pidfile", pidfile, "-sleep", "1h")+`
`)
	r := startWatched(t, "", "run", wf)
	pid := readPIDs(t, pidfile, 1)[0]
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit code %d after Ctrl-C, want 1\nstdout:\n%s\nstderr:\n%s", code, r.out.String(), r.errOut.String())
	}
	checkTask(t, status(t, wf), "only", "complete", 1, "0")
}
