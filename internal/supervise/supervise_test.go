package supervise_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/procfs"
	"github.com/gpusched/gpusched/internal/supervise"
	"github.com/gpusched/gpusched/internal/testbin"
)

var (
	sleeper string
	self    string // this test binary, which serves as the supervisor
)

func TestMain(m *testing.M) {
	supervise.MaybeServe()
	supervise.MaybeScheduler()
	if sch := supervise.ThisScheduler(); sch != nil {
		os.Exit(schedulerHelper(sch)) // front_test.go
	}
	sleeper = testbin.MustBuild("cmd/sleeper")
	var err error
	if self, err = filepath.Abs(os.Args[0]); err != nil {
		panic(err)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// runDir returns a fresh run directory whose supervisor, if one still
// runs at the end of the test, is stopped (SIGTERM) and waited for; the
// test fails if a supervisor panicked or (under -race) raced.
func runDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		stopSupervisor(t, dir)
		b, _ := os.ReadFile(filepath.Join(dir, "supervisor.log"))
		if strings.Contains(string(b), "DATA RACE") || strings.Contains(string(b), "panic:") {
			t.Errorf("supervisor.log:\n%s", b)
		}
	})
	return dir
}

// newExecutor returns an executor of dir, closed at the end of the test.
func newExecutor(t *testing.T, dir string) *supervise.Executor {
	e := &supervise.Executor{RunDir: dir, Binary: self}
	t.Cleanup(func() { e.Close() })
	return e
}

// stopSupervisor stops dir's supervisor, if one runs, and waits until it
// is gone.
func stopSupervisor(t testing.TB, dir string) {
	t.Helper()
	if lockFree(dir) {
		return
	}
	if pid := supervisorPID(t, dir); pid > 0 {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	waitLockFree(t, dir)
}

// supervisorPID returns the PID that dir's lock holds.
func supervisorPID(t testing.TB, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "supervisor.lock"))
	if err != nil {
		t.Fatalf("read the supervisor's lock: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("supervisor.lock = %q, want a PID", b)
	}
	return pid
}

// lockFree reports whether no supervisor holds dir's lock.
func lockFree(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "supervisor.lock"))
	if err != nil {
		return true
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true
}

// waitLockFree waits until dir's supervisor is gone.
func waitLockFree(t testing.TB, dir string) {
	t.Helper()
	waitFor(t, "the supervisor to exit", func() bool { return lockFree(dir) })
}

// waitFor waits, for 10 s at most, until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// pids waits until path lists n PIDs and returns them.
func pids(t *testing.T, path string, n int) []int {
	t.Helper()
	var out []int
	waitFor(t, "PIDs in "+path, func() bool {
		b, _ := os.ReadFile(path)
		out = out[:0]
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			out = append(out, p)
		}
		return len(out) >= n
	})
	return out
}

// waitGone waits until pid is dead (a zombie counts).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "process "+strconv.Itoa(pid)+" to go", func() bool { return !procfs.Alive(pid) })
}

// started runs j through e in the background and returns, once it runs,
// what Running said and where its result will come.
func started(t *testing.T, e executor.Executor, ctx context.Context, j executor.Job) (executor.Running, <-chan executor.Result) {
	t.Helper()
	running := make(chan executor.Running, 1)
	done := make(chan executor.Result, 1)
	go func() { done <- e.Execute(ctx, j, executor.Hooks{Running: func(r executor.Running) { running <- r }}) }()
	select {
	case r := <-running:
		return r, done
	case r := <-done:
		t.Fatalf("the job ended before it ran: %+v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run within 10 s")
	}
	return executor.Running{}, nil
}

// result waits for done.
func result(t *testing.T, done <-chan executor.Result) executor.Result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Execute did not return within 30 s")
		return executor.Result{}
	}
}

// TestConformance holds the supervised executor to the suite every
// executor passes. All its attempts go through one supervisor.
func TestConformance(t *testing.T) {
	dir := runDir(t)
	h := executortest.Harness{
		New:     func(t *testing.T) executor.Executor { return newExecutor(t, dir) },
		Sleeper: sleeper,
		// The scheduler dies: its connection drops, the attempts go on.
		Restart:      func(t *testing.T, old executor.Executor) { old.(*supervise.Executor).Close() },
		Adopts:       true,
		FindsByToken: true,
	}
	executortest.Run(t, h)
	executortest.RunLocal(t, h)
}

// TestResultRecorded: an attempt's end is in the results file by the
// time its client hears of it.
func TestResultRecorded(t *testing.T) {
	dir := runDir(t)
	e := newExecutor(t, dir)
	j := executortest.NewJob(t, sleeper, "-exit", "3")
	var run executor.Running
	r := e.Execute(context.Background(), j, executor.Hooks{Running: func(r executor.Running) { run = r }})
	if r.Reason != executor.Exited || r.ExitCode != 3 {
		t.Fatalf("result = %+v, want exited 3", r)
	}
	got, ok, err := supervise.ReadResult(dir, executor.Orphan{Job: j, Handle: run.Handle})
	if !ok || err != nil {
		t.Fatalf("ReadResult = %v, %v: the end must be recorded before Execute returns", ok, err)
	}
	if got.Reason != r.Reason || got.ExitCode != 3 || !got.Started || !got.Start.Equal(r.Start) || !got.End.Equal(r.End) {
		t.Errorf("recorded %+v, want %+v", got, r)
	}
	other := j
	other.Token += "-another"
	if _, ok, err := supervise.ReadResult(dir, executor.Orphan{Job: other}); ok || err != nil {
		t.Errorf("ReadResult of another attempt = %v, %v; want none", ok, err)
	}
}

// TestAdoption: a client that drops its connection leaves the attempt
// running; another client takes it over and gets its real end.
func TestAdoption(t *testing.T) {
	dir := runDir(t)
	tmp := t.TempDir()
	startfile, gofile := filepath.Join(tmp, "started"), filepath.Join(tmp, "go")
	j := executortest.NewJob(t, sleeper, "-pidfile", startfile, "-wait", gofile, "-exit", "7")
	a := newExecutor(t, dir)
	run, done := started(t, a, context.Background(), j)
	a.Close()
	if r := result(t, done); r.Reason != executor.Lost || r.Err == nil {
		t.Errorf("Execute after Close = %+v, want Lost with an error", r)
	}
	if !procfs.Alive(run.PID) {
		t.Fatal("the attempt died with its client's connection")
	}

	b := newExecutor(t, dir)
	recs := b.Recover([]executor.Orphan{{Job: j, Handle: run.Handle}})
	rec := recs[0]
	if rec.Wait == nil {
		t.Fatalf("Recover = %+v, want the running attempt", rec)
	}
	if rec.Running.PID != run.PID || string(rec.Running.Handle.Data) != string(run.Handle.Data) || !rec.Running.Since.Equal(run.Since) {
		t.Errorf("Recover's Running = %+v, want %+v", rec.Running, run)
	}
	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := rec.Wait(context.Background())
	if r.Reason != executor.Exited || r.ExitCode != 7 || r.Err != nil {
		t.Errorf("Wait = %+v, want exited 7", r)
	}
	if got := pids(t, startfile, 1); len(got) != 1 {
		t.Errorf("the job started %d times, want once", len(got))
	}
}

// TestEndedUnwatched: an attempt that ends while no client is connected
// is found in the results file.
func TestEndedUnwatched(t *testing.T) {
	dir := runDir(t)
	gofile := filepath.Join(t.TempDir(), "go")
	j := executortest.NewJob(t, sleeper, "-wait", gofile, "-exit", "5")
	a := newExecutor(t, dir)
	run, done := started(t, a, context.Background(), j)
	a.Close()
	result(t, done)
	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the end to be recorded", func() bool {
		_, ok, _ := supervise.ReadResult(dir, executor.Orphan{Job: j})
		return ok
	})

	rec := newExecutor(t, dir).Recover([]executor.Orphan{{Job: j, Handle: run.Handle}})[0]
	if rec.Wait != nil {
		t.Fatal("Recover reattached to an attempt that has ended")
	}
	r := rec.Result
	if r.Reason != executor.Exited || r.ExitCode != 5 || !r.Started || r.Err != nil {
		t.Errorf("result = %+v, want exited 5", r)
	}
	if !r.Start.Equal(run.Since) || r.End.Before(r.Start) {
		t.Errorf("start, end = %v, %v; want from %v on", r.Start, r.End, run.Since)
	}
}

// TestTimeoutUnwatched: the supervisor enforces the timeout while no
// client is connected.
func TestTimeoutUnwatched(t *testing.T) {
	dir := runDir(t)
	j := executortest.NewJob(t, sleeper, "-sleep", "1h")
	j.Timeout, j.KillGrace = time.Second, 5*time.Second
	a := newExecutor(t, dir)
	run, done := started(t, a, context.Background(), j)
	a.Close()
	result(t, done)
	waitGone(t, run.PID)

	rec := newExecutor(t, dir).Recover([]executor.Orphan{{Job: j, Handle: run.Handle}})[0]
	r := rec.Result
	if rec.Wait != nil { // gone, but its end not yet recorded
		r = rec.Wait(context.Background())
	}
	if r.Reason != executor.TimedOut || r.Signal != syscall.SIGTERM {
		t.Errorf("result = %+v, want timed out, ended by SIGTERM", r)
	}
}

// TestSupervisorKilledWhileWatched: when the supervisor dies during an
// attempt, its client kills what is left of it and reports it Lost.
func TestSupervisorKilledWhileWatched(t *testing.T) {
	dir := runDir(t)
	pidfile := filepath.Join(t.TempDir(), "pids")
	j := executortest.NewJob(t, sleeper, "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-sleep", "1h")
	a := newExecutor(t, dir)
	_, done := started(t, a, context.Background(), j)
	ps := pids(t, pidfile, 2)
	syscall.Kill(supervisorPID(t, dir), syscall.SIGKILL)
	r := result(t, done)
	if r.Reason != executor.Lost || r.Err == nil || !r.Started {
		t.Errorf("result = %+v, want Lost, started", r)
	}
	for _, pid := range ps {
		waitGone(t, pid)
	}
	// The next attempt gets a new supervisor.
	j2 := executortest.NewJob(t, sleeper, "-exit", "4")
	if r := a.Execute(context.Background(), j2, executor.Hooks{}); r.Reason != executor.Exited || r.ExitCode != 4 {
		t.Errorf("after the supervisor died, result = %+v, want exited 4", r)
	}
}

// TestSupervisorKilledUnwatched: when the supervisor died while nobody
// watched, Recover reports the attempt Lost and kills what is left of it,
// without starting a supervisor.
func TestSupervisorKilledUnwatched(t *testing.T) {
	dir := runDir(t)
	pidfile := filepath.Join(t.TempDir(), "pids")
	j := executortest.NewJob(t, sleeper, "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-sleep", "1h")
	a := newExecutor(t, dir)
	run, done := started(t, a, context.Background(), j)
	ps := pids(t, pidfile, 2)
	a.Close()
	result(t, done)
	syscall.Kill(supervisorPID(t, dir), syscall.SIGKILL)
	waitLockFree(t, dir)
	for _, pid := range ps {
		if !procfs.Alive(pid) {
			t.Fatalf("process %d died with the supervisor; the test needs it alive", pid)
		}
	}

	rec := newExecutor(t, dir).Recover([]executor.Orphan{{Job: j, Handle: run.Handle}})[0]
	if rec.Wait != nil || rec.Result.Reason != executor.Lost || rec.Result.Err == nil {
		t.Errorf("Recover = %+v, want Lost", rec)
	}
	for _, pid := range ps {
		waitGone(t, pid)
	}
	if !lockFree(dir) {
		t.Error("Recover started a supervisor")
	}
}

// TestRecoverMany: one Recover call sorts orphans out, in order: ended
// (results file), still running (attached), and unknown (Lost).
func TestRecoverMany(t *testing.T) {
	dir := runDir(t)
	tmp := t.TempDir()
	gofile := filepath.Join(tmp, "go")
	a := newExecutor(t, dir)
	ended := executortest.NewJob(t, sleeper, "-exit", "2")
	a.Execute(context.Background(), ended, executor.Hooks{})
	runs := executortest.NewJob(t, sleeper, "-wait", gofile, "-exit", "0")
	run, done := started(t, a, context.Background(), runs)
	unknown := executortest.NewJob(t, sleeper)
	untokened := executortest.NewJob(t, sleeper)
	untokened.Token = ""
	a.Close()
	result(t, done)

	recs := newExecutor(t, dir).Recover([]executor.Orphan{{Job: ended}, {Job: runs, Handle: run.Handle}, {Job: unknown}, {Job: untokened}})
	if r := recs[0]; r.Wait != nil || r.Result.Reason != executor.Exited || r.Result.ExitCode != 2 {
		t.Errorf("ended orphan: %+v, want exited 2", r)
	}
	if r := recs[1]; r.Wait == nil || r.Running.PID != run.PID {
		t.Errorf("running orphan: %+v, want it running as PID %d", r, run.PID)
	} else {
		os.WriteFile(gofile, nil, 0o644)
		if res := r.Wait(context.Background()); res.Reason != executor.Exited || res.ExitCode != 0 {
			t.Errorf("running orphan's Wait = %+v, want exited 0", res)
		}
	}
	for i, r := range recs[2:] {
		if r.Wait != nil || r.Result.Reason != executor.Lost {
			t.Errorf("orphan %d that never ran: %+v, want Lost", i+2, r)
		}
	}
}

// TestRecoverStopsAndKills: a recovered attempt is stopped by Wait's
// context and killed by its job's KillNow.
func TestRecoverStopsAndKills(t *testing.T) {
	dir := runDir(t)
	a := newExecutor(t, dir)
	polite := executortest.NewJob(t, sleeper, "-sleep", "1h")
	stubborn := executortest.NewJob(t, sleeper, "-ignore-term", "-sleep", "1h")
	stubborn.KillGrace = time.Hour
	r1, d1 := started(t, a, context.Background(), polite)
	r2, d2 := started(t, a, context.Background(), stubborn)
	a.Close()
	result(t, d1)
	result(t, d2)

	killNow := make(chan struct{})
	stubborn.KillNow = killNow
	recs := newExecutor(t, dir).Recover([]executor.Orphan{{Job: polite, Handle: r1.Handle}, {Job: stubborn, Handle: r2.Handle}})
	if recs[0].Wait == nil || recs[1].Wait == nil {
		t.Fatalf("Recover = %+v, want both running", recs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := recs[0].Wait(ctx); r.Reason != executor.Cancelled || r.Signal != syscall.SIGTERM {
		t.Errorf("stopped: %+v, want cancelled by SIGTERM", r)
	}
	close(killNow)
	if r := recs[1].Wait(context.Background()); r.Reason != executor.Cancelled || r.Signal != syscall.SIGKILL {
		t.Errorf("killed: %+v, want cancelled by SIGKILL", r)
	}
}

// TestIdleExit: a supervisor with no attempt and no client exits on its
// own, removing its socket.
func TestIdleExit(t *testing.T) {
	dir := runDir(t)
	a := newExecutor(t, dir)
	if r := a.Execute(context.Background(), executortest.NewJob(t, sleeper), executor.Hooks{}); r.Reason != executor.Exited {
		t.Fatalf("result = %+v", r)
	}
	if lockFree(dir) {
		t.Fatal("no supervisor holds the lock while a client is connected")
	}
	pid := supervisorPID(t, dir)
	a.Close()
	waitLockFree(t, dir)
	if _, err := os.Lstat(filepath.Join(dir, "supervisor.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after the supervisor exited: %v", err)
	}
	waitFor(t, "the supervisor to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return errors.Is(err, os.ErrNotExist) // a zombie would still be listed
	})
}

// TestResultsLinkRefused: a supervisor does not start on a run directory
// whose results file is a planted symbolic link; the attempt fails as the
// infrastructure's fault and the file behind the link is untouched.
func TestResultsLinkRefused(t *testing.T) {
	dir := runDir(t)
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte("precious\n"), 0o644)
	if err := os.Symlink(target, supervise.ResultsPath(dir)); err != nil {
		t.Fatal(err)
	}
	r := newExecutor(t, dir).Execute(context.Background(), executortest.NewJob(t, sleeper), executor.Hooks{})
	if r.Reason != executor.Infrastructure || r.Started || r.Err == nil {
		t.Errorf("result = %+v, want infrastructure, not started", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "supervisor.log")); !strings.Contains(string(b), "symbolic link") {
		t.Errorf("supervisor.log = %q, want it to say why", b)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("file behind the link = %q, want it untouched", b)
	}
}

// TestSecondSupervisorRefuses: a supervisor started for a run directory
// that has one says it is busy and exits; the first serves on.
func TestSecondSupervisorRefuses(t *testing.T) {
	dir := runDir(t)
	a := newExecutor(t, dir)
	a.Execute(context.Background(), executortest.NewJob(t, sleeper), executor.Hooks{})
	first := supervisorPID(t, dir)

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command(self)
	cmd.Env = []string{supervise.EnvVar + "=" + dir, "GPUSCHED_SUPERVISOR_READY_FD=3"}
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	word, _ := bufio.NewReader(pr).ReadString('\n')
	if err := cmd.Wait(); err != nil || word != "busy\n" {
		t.Errorf("second supervisor: said %q, exit %v; want busy, exit 0", word, err)
	}
	if r := a.Execute(context.Background(), executortest.NewJob(t, sleeper, "-exit", "1"), executor.Hooks{}); r.ExitCode != 1 {
		t.Errorf("result = %+v, want exited 1", r)
	}
	if pid := supervisorPID(t, dir); pid != first {
		t.Errorf("the lock names PID %d, want the first supervisor's %d", pid, first)
	}
}

// TestSIGTERM: a supervisor told to stop stops its attempts and records
// them as the infrastructure's fault.
func TestSIGTERM(t *testing.T) {
	dir := runDir(t)
	a := newExecutor(t, dir)
	j := executortest.NewJob(t, sleeper, "-sleep", "1h")
	_, done := started(t, a, context.Background(), j)
	syscall.Kill(supervisorPID(t, dir), syscall.SIGTERM)
	r := result(t, done)
	if r.Reason != executor.Infrastructure || r.Err == nil || !strings.Contains(r.Err.Error(), "supervisor was told to stop") || r.Signal != syscall.SIGTERM {
		t.Errorf("result = %+v, want infrastructure, stopped by SIGTERM", r)
	}
	if got, ok, _ := supervise.ReadResult(dir, executor.Orphan{Job: j}); !ok || got.Reason != executor.Infrastructure {
		t.Errorf("recorded %+v (%v), want infrastructure", got, ok)
	}
	waitLockFree(t, dir)
}

// TestLongRunDir: a run directory whose socket path does not fit in a
// socket address still works, for starting and for attaching.
func TestLongRunDir(t *testing.T) {
	dir := filepath.Join(runDir(t), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSupervisor(t, dir) })
	if n := len(filepath.Join(dir, "supervisor.sock")); n <= 108 {
		t.Fatalf("socket path is %d bytes, want more than 108", n)
	}
	gofile := filepath.Join(t.TempDir(), "go")
	j := executortest.NewJob(t, sleeper, "-wait", gofile, "-exit", "6")
	a := newExecutor(t, dir)
	run, done := started(t, a, context.Background(), j)
	if fi, err := os.Lstat(filepath.Join(dir, "supervisor.sock")); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, %v; want a socket of mode 0600 in the run directory", fi, err)
	}
	a.Close()
	result(t, done)
	rec := newExecutor(t, dir).Recover([]executor.Orphan{{Job: j, Handle: run.Handle}})[0]
	if rec.Wait == nil {
		t.Fatalf("Recover = %+v, want it running", rec)
	}
	os.WriteFile(gofile, nil, 0o644)
	if r := rec.Wait(context.Background()); r.ExitCode != 6 {
		t.Errorf("result = %+v, want exited 6", r)
	}
}

// TestNoRunDir: an executor with no run directory fails each
// attempt as the infrastructure's fault.
func TestNoRunDir(t *testing.T) {
	r := (&supervise.Executor{Binary: self}).Execute(context.Background(), executortest.NewJob(t, sleeper), executor.Hooks{})
	if r.Reason != executor.Infrastructure || r.Started || r.Err == nil {
		t.Errorf("result = %+v, want infrastructure, not started", r)
	}
}
