package supervise_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/procfs"
	"github.com/gpusched/gpusched/internal/supervise"
)

// The scheduler side of these tests: this test binary, started by a
// supervisor for a front (the test), runs one attempt through the
// executor ThisScheduler gives it, as helperVar says, then waits for it
// to end or hangs until killed.
const helperVar = "SUPERVISE_TEST_SCHEDULER"

type helperSpec struct {
	Args    []string      // the attempt's command
	Token   string        // its token
	Timeout time.Duration // its timeout
	PIDFile string        // where its PID is written once it runs
	Print   string        // printed on stdout first
	Wait    bool          // wait for the attempt, print its exit code, exit with Exit; else hang
	Exit    int
}

func schedulerHelper(sch *supervise.Scheduler) int {
	var h helperSpec
	if err := json.Unmarshal([]byte(os.Getenv(helperVar)), &h); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 99
	}
	fmt.Println(h.Print)
	for _, f := range sch.Files {
		b, _ := io.ReadAll(f)
		fmt.Printf("file: %s\n", b)
	}
	ex := sch.Executor(sch.RunDir)
	if ex == nil {
		fmt.Fprintln(os.Stderr, "helper: no executor for", sch.RunDir)
		return 98
	}
	job := executor.Job{TaskID: "t", Attempt: 1, Args: h.Args, Env: []string{"PATH=" + os.Getenv("PATH")},
		LogPath: filepath.Join(sch.RunDir, "attempt.log"), Token: h.Token, Timeout: h.Timeout, KillGrace: 100 * time.Millisecond}
	running := make(chan struct{})
	done := make(chan executor.Result, 1)
	go func() {
		done <- ex.Execute(context.Background(), job, executor.Hooks{Running: func(r executor.Running) {
			os.WriteFile(h.PIDFile, []byte(strconv.Itoa(r.PID)+"\n"), 0o644)
			close(running)
		}})
	}()
	select {
	case <-running:
	case r := <-done:
		fmt.Fprintf(os.Stderr, "helper: the attempt did not run: %+v\n", r)
		return 97
	}
	if !h.Wait {
		select {}
	}
	r := <-done
	fmt.Printf("attempt: %s %d\n", r.Reason, r.ExitCode)
	sch.Done(h.Exit)
	return h.Exit
}

// startScheduler starts this test binary as the scheduler of dir, with
// this test as its front, h saying what it does, and out as its stdout
// and stderr.
func startScheduler(t *testing.T, dir string, h helperSpec, out *os.File, files ...*os.File) *supervise.Front {
	t.Helper()
	b, _ := json.Marshal(h)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	f, err := supervise.StartScheduler(dir, supervise.SchedulerSpec{Binary: self, Args: []string{self},
		Env: append(os.Environ(), helperVar+"="+string(b)), Dir: t.TempDir(),
		Stdin: devnull, Stdout: out, Stderr: out, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tempFile returns an open, empty file.
func tempFile(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readPID waits until path holds a PID and returns it.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "a PID in "+path, func() bool {
		b, _ := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	return pid
}

// A scheduler started for a front writes where the front's descriptors
// go, gets the front's extra files, runs its attempts in its own process
// (its children, not the supervisor's, and no result of theirs in the
// supervisor's file), and its exit code reaches the front.
func TestSchedulerForFront(t *testing.T) {
	dir := runDir(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	out := tempFile(t)
	extra := tempFile(t)
	extra.WriteString("hello")
	extra.Seek(0, io.SeekStart)
	h := helperSpec{Args: []string{sleeper, "-sleep", "200ms", "-exit", "3"}, Token: "tok-front", PIDFile: pidfile,
		Print: "from the scheduler", Wait: true, Exit: 7}
	front := startScheduler(t, dir, h, out, extra)
	pid := readPID(t, pidfile)
	if st, ok := procfs.Read(pid); ok && st.PPID != front.PID {
		t.Errorf("the attempt's parent is %d, want the scheduler %d", st.PPID, front.PID)
	}
	code, ok := front.Wait(nil)
	if code != 7 || !ok {
		t.Errorf("Wait = %d, %v; want the scheduler's 7, true", code, ok)
	}
	b, _ := os.ReadFile(out.Name())
	if want := "from the scheduler\nfile: hello\nattempt: exited 3\n"; string(b) != want {
		t.Errorf("the scheduler's output:\n%s\nwant:\n%s", b, want)
	}
	if r, _ := os.ReadFile(supervise.ResultsPath(dir)); len(r) != 0 {
		t.Errorf("the supervisor recorded an attempt its scheduler ran to its end:\n%s", r)
	}
	waitFor(t, "supervisor.log to say the scheduler ended with 7", func() bool {
		log, _ := os.ReadFile(filepath.Join(dir, "supervisor.log"))
		return strings.Contains(string(log), fmt.Sprintf("scheduler %d ended (exit status 7)", front.PID))
	})
}

// When the scheduler is killed, its front hears that it ended without a
// code; the supervisor adopts the attempt it left (a child of the
// supervisor now) and a later scheduler's Recover takes it over; its end
// is recorded.
func TestSchedulerKilled(t *testing.T) {
	dir := runDir(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	h := helperSpec{Args: []string{sleeper, "-sleep", "1h"}, Token: "tok-killed", PIDFile: pidfile}
	front := startScheduler(t, dir, h, tempFile(t))
	pid := readPID(t, pidfile)
	st, _ := procfs.Read(pid)
	if err := syscall.Kill(front.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, ok := front.Wait(nil); ok {
		t.Errorf("Wait = %d, true; want no exit code from a killed scheduler", code)
	}
	if !procfs.Alive(pid) {
		t.Fatal("the attempt died with its scheduler")
	}
	// The status pipe closes as the scheduler's descriptors go, a moment
	// before the kernel hands its children over.
	sup := supervisorPID(t, dir)
	waitFor(t, "the attempt to be the supervisor's child", func() bool {
		st, _ := procfs.Read(pid)
		return st.PPID == sup
	})
	orphan := executor.Orphan{Job: executor.Job{TaskID: "t", Attempt: 1, Token: h.Token},
		Handle: local.EncodeHandle(executor.Process{PID: pid, PGID: pid, StartTicks: st.StartTicks})}
	rec := newExecutor(t, dir).Recover([]executor.Orphan{orphan})[0]
	if rec.Wait == nil || rec.Running.PID != pid {
		t.Fatalf("Recover = %+v; want the attempt running (adopted by the supervisor), pid %d", rec, pid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := rec.Wait(ctx); r.Reason != executor.Cancelled {
		t.Errorf("the adopted attempt, stopped: %+v; want cancelled", r)
	}
	waitGone(t, pid)
	r, ok, err := supervise.ReadResult(dir, orphan)
	if !ok || err != nil || r.Reason != executor.Cancelled {
		t.Errorf("recorded result: %+v, %v, %v; want cancelled", r, ok, err)
	}
}

// The supervisor enforces the timeout of an attempt it adopted from a
// killed scheduler, counted from when the attempt started.
func TestSchedulerKilledTimeout(t *testing.T) {
	dir := runDir(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	h := helperSpec{Args: []string{sleeper, "-sleep", "1h"}, Token: "tok-timeout", Timeout: 500 * time.Millisecond, PIDFile: pidfile}
	front := startScheduler(t, dir, h, tempFile(t))
	pid := readPID(t, pidfile)
	st, _ := procfs.Read(pid)
	syscall.Kill(front.PID, syscall.SIGKILL)
	front.Wait(nil)
	waitGone(t, pid)
	orphan := executor.Orphan{Job: executor.Job{Token: h.Token},
		Handle: local.EncodeHandle(executor.Process{PID: pid, PGID: pid, StartTicks: st.StartTicks})}
	waitFor(t, "the timed-out attempt's record", func() bool {
		_, ok, _ := supervise.ReadResult(dir, orphan)
		return ok
	})
	if r, _, _ := supervise.ReadResult(dir, orphan); r.Reason != executor.TimedOut {
		t.Errorf("recorded result: %+v; want timed out", r)
	}
}

// A process orphaned below a scheduler's attempt (its parent exited) is
// reparented to the supervisor, which reaps it when it exits: no zombie
// is left, though the scheduler still runs.
func TestOrphanReaped(t *testing.T) {
	dir := runDir(t)
	tmp := t.TempDir()
	pidfile, gcfile := filepath.Join(tmp, "pid"), filepath.Join(tmp, "grandchild")
	script := fmt.Sprintf("( %s -sleep 300ms -pidfile %s & ); exec %s -sleep 1h", sleeper, gcfile, sleeper)
	h := helperSpec{Args: []string{"/bin/sh", "-c", script}, Token: "tok-orphan", PIDFile: pidfile}
	front := startScheduler(t, dir, h, tempFile(t))
	t.Cleanup(func() { syscall.Kill(front.PID, syscall.SIGKILL); front.Wait(nil) })
	gc := readPID(t, gcfile)
	sup := supervisorPID(t, dir)
	waitFor(t, "the grandchild to be the supervisor's", func() bool {
		st, ok := procfs.Read(gc)
		return !ok || st.PPID == sup
	})
	waitFor(t, "the grandchild to be reaped, not left a zombie", func() bool {
		_, ok := procfs.Read(gc)
		return !ok
	})
	if !procfs.Alive(front.PID) {
		t.Error("the scheduler is gone; this test wants the orphan reaped while it runs")
	}
}

// Leaving tells a scheduler whose front died, or a process that is gone,
// from a run in progress.
func TestLeaving(t *testing.T) {
	if supervise.Leaving(os.Getpid()) {
		t.Error("this live process, no front's scheduler, reads as leaving")
	}
	gone := exec.Command(sleeper)
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if !supervise.Leaving(gone.Process.Pid) {
		t.Error("a process that exited does not read as leaving")
	}
	for _, c := range []struct {
		front   int
		leaving bool
	}{{os.Getpid(), false}, {gone.Process.Pid, true}} {
		cmd := exec.Command(sleeper, "-sleep", "1h")
		cmd.Env = []string{supervise.SchedulerVar + "=" + fmt.Sprintf(`{"front":%d,"dir":"/x","status":3,"journal":4}`, c.front)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the sleeper's environment", func() bool { return procfs.Getenv(cmd.Process.Pid, supervise.SchedulerVar) != "" })
		if got := supervise.Leaving(cmd.Process.Pid); got != c.leaving {
			t.Errorf("a scheduler whose front (%d) is alive %v: Leaving = %v", c.front, !c.leaving, got)
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
}
