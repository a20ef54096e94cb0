package cli_test

// End-to-end tests of the front and its scheduler: "gpusched run" (the
// front) has the run directory's supervisor start the scheduler as its
// child, passes it its descriptors and signals, and exits with its code.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When the scheduler is killed (SIGKILL to the PID its lock holds) while
// its front waits, the front says so on one line and exits 1; the task it
// ran lives on under the supervisor, and the next run adopts it.
func TestSchedulerKilledUnderFront(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	starts := filepath.Join(dir, "starts")
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: slow
    retries: 0
    args: `+sh("echo $$ >> "+q(pidfile)+"; echo start >> "+q(starts)+"; sleep 3; exit 3")+`
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startRun(t, wf, "--run-dir", runDir)
	pids = readPIDs(t, pidfile, 1)
	waitFor(t, 10*time.Second, "slow to be recorded running", func() bool {
		tk := adoptStatus(t, runDir)["slow"]
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == pids[0]
	})
	sched := schedulerPID(runDir)
	if sched <= 0 || sched == run.cmd.Process.Pid || !alive(sched) {
		t.Fatalf("the lock holds %d; want the live scheduler, not the front %d", sched, run.cmd.Process.Pid)
	}
	if err := syscall.Kill(sched, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := run.wait(t)
	r.want(t, 1)
	if want := fmt.Sprintf("gpusched: the scheduler (PID %d) ended without an exit status\n", sched); !strings.HasSuffix(r.stderr, want) {
		t.Errorf("the front's stderr ends %q; want %q", r.stderr, want)
	}
	if !alive(pids[0]) {
		t.Fatalf("slow's process %d died with its scheduler", pids[0])
	}

	next := gs(t, "", "run", wf, "--run-dir", runDir)
	next.want(t, 1)
	if !strings.Contains(next.stdout, "adopted   slow (attempt 1") {
		t.Errorf("the next run does not say slow was adopted:\n%s", next.stdout)
	}
	if n := countLines(t, starts, "start"); n != 1 {
		t.Errorf("slow started %d times, want once", n)
	}
	slow := adoptTask(t, adoptStatus(t, runDir), "slow")
	if slow.State != "failed" || slow.Attempts != 1 || intp(slow.ExitCode) != "3" || !slow.History[0].Adopted {
		t.Errorf("slow: %s after %d attempt(s), exit code %s, adopted %v; want failed after 1, 3, adopted",
			slow.State, slow.Attempts, intp(slow.ExitCode), slow.Attempts == 1 && slow.History[0].Adopted)
	}
}

// The front exits with the code its scheduler ended with, as the
// supervisor, the scheduler's parent, saw it end.
func TestFrontExitsWithSchedulersCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		script string
		code   int
	}{{"true", 0}, {"exit 5", 1}} {
		dir := t.TempDir()
		runDir := filepath.Join(dir, "rd")
		wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    retries: 0\n    args: "+sh(c.script)+"\n")
		r := gs(t, "", "run", wf, "--run-dir", runDir)
		r.want(t, c.code)
		log := filepath.Join(runDir, "supervisor.log")
		want := fmt.Sprintf("ended (exit status %d)", c.code)
		waitFor(t, 10*time.Second, "supervisor.log to say how the scheduler ended", func() bool {
			b, _ := os.ReadFile(log)
			return strings.Contains(string(b), want)
		})
		if b, _ := os.ReadFile(log); strings.Count(string(b), "scheduler ") != 2 { // started, ended
			t.Errorf("supervisor.log:\n%s\nwant one scheduler started and ended", b)
		}
	}
}

// The scheduler writes to the very files the front was given: stdin,
// stdout and stderr are the front's, passed over the supervisor's socket,
// not pipes in between; its tasks are its own children, not the front's.
func TestSchedulerHasFrontsDescriptors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	fdsFile := filepath.Join(dir, "fds")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: look
    args: `+sh(`for fd in 0 1 2; do readlink /proc/$PPID/fd/$fd; done > `+q(fdsFile)+`; echo $PPID >> `+q(fdsFile))+`
`)
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	stdin := filepath.Join(dir, "stdin")
	writeFile(t, stdin, "")
	in, err := os.Open(stdin)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := command(t.Context(), "", "run", wf, "--run-dir", runDir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, stdout, stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, readFile(t, stderr.Name()))
	}
	got := strings.Fields(readFile(t, fdsFile))
	want := []string{stdin, stdout.Name(), stderr.Name()}
	if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("the task's parent has descriptors 0-2 %q; want the front's %q", got, want)
	}
	if parent, _ := strconv.Atoi(got[3]); parent == cmd.Process.Pid {
		t.Errorf("the task's parent is the front (%d); want the scheduler", parent)
	}
	if out := readFile(t, stdout.Name()); !strings.Contains(out, "1 complete") {
		t.Errorf("the run's summary is not in the front's stdout:\n%s", out)
	}
}

// SIGINT to the front stops the running task (SIGTERM to it, recorded
// cancelled), and the scheduler exits with the run: the front exits 1.
func TestFrontForwardsInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: hold
    args: `+sleeper("-pidfile", pidfile, "-on-term", termfile, "-sleep", "1h")+`
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startRun(t, wf, "--run-dir", runDir)
	pids = readPIDs(t, pidfile, 1)
	sched := schedulerPID(runDir)
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := run.wait(t)
	r.want(t, 1)
	if got := readFile(t, termfile); got != fmt.Sprintf("TERM %d\n", pids[0]) {
		t.Errorf("the task noted %q; want its SIGTERM", got)
	}
	if !strings.Contains(r.stderr, "gpusched: interrupt: stopping running tasks") {
		t.Errorf("stderr does not say the tasks are being stopped:\n%s", r.stderr)
	}
	// The scheduler tells its exit status, then closes its state and
	// exits: give it a moment, not a lingering life.
	for deadline := time.Now().Add(5 * time.Second); alive(sched) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(sched) {
		t.Errorf("the scheduler %d outlived its front's run", sched)
	}
	if tk := adoptTask(t, adoptStatus(t, runDir), "hold"); tk.State != "cancelled" {
		t.Errorf("hold is %s after the interrupt; want cancelled", tk.State)
	}
}
