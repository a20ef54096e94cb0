package executortest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// Harness says how the suite makes, and restarts, the executor under test.
type Harness struct {
	// New returns an executor ready to use; each test calls it afresh.
	// A recovery test calls it a second time after Restart: that
	// executor plays the one of the scheduler started after a crash, and
	// must find the first one's attempts through whatever they share (a
	// batch system's controller, a supervisor, this machine's processes),
	// not through memory of the first.
	New func(t *testing.T) executor.Executor
	// Sleeper is the path of the cmd/sleeper helper, as the executor's
	// jobs see it.
	Sleeper string
	// Restart, when set, makes old behave as the executor of a scheduler
	// process that died: it stops watching its attempts without stopping
	// them (drops its connection, forgets its waiters), and its Execute
	// calls in flight return soon, with any result. Nil: old is just
	// dropped, and its Execute calls go on as they would.
	Restart func(t *testing.T, old executor.Executor)
	// Adopts says whether attempts outlive a restart: Recover hands back
	// a Wait for one that still runs, and the Result of one that ended.
	// When false (an executor whose attempts are watched only by the
	// scheduler's own process), the suite checks the other promise
	// instead: every orphan is reported Lost, and nothing of it is left
	// running.
	Adopts bool
	// Remote says that jobs run on another machine: Running.PID may be
	// 0 (or not this machine's), Result.Signal may be 0 where the system
	// does not say which signal ended a job, and the suite does not look
	// at this machine's processes. The files jobs write (their logs, and
	// files named in their arguments) must be visible here all the same.
	Remote bool
	// FindsByToken: the executor finds a running attempt by its token,
	// without a handle (a supervisor that knows its attempts by token), so
	// an orphan whose handle was never saved is adopted like any other.
	// Only with Adopts.
	FindsByToken bool
}

func (h Harness) check(t *testing.T) {
	t.Helper()
	if h.New == nil || h.Sleeper == "" {
		t.Fatal("executortest: Harness.New and Harness.Sleeper are required")
	}
}

// restart makes old behave as a dead scheduler's executor would.
func (h Harness) restart(t *testing.T, old executor.Executor) {
	if h.Restart != nil {
		h.Restart(t, old)
	}
}

// job returns a fresh job that runs the sleeper with args; see NewJob.
func (h Harness) job(t *testing.T, args ...string) executor.Job {
	return NewJob(t, h.Sleeper, args...)
}

// Run runs the part of the suite every executor passes (see the package
// documentation) as subtests of t named Common/...: they run in
// parallel, and Run returns when they are done.
func Run(t *testing.T, h Harness) {
	h.check(t)
	t.Run("Common", func(t *testing.T) {
		t.Run("Basics", func(t *testing.T) { t.Parallel(); runBasics(t, h) })
		t.Run("Hooks", func(t *testing.T) { t.Parallel(); runHooks(t, h) })
		t.Run("Faults", func(t *testing.T) { t.Parallel(); runFaults(t, h) })
		t.Run("Logs", func(t *testing.T) { t.Parallel(); runLogs(t, h) })
		t.Run("Stop", func(t *testing.T) { t.Parallel(); runStop(t, h) })
		t.Run("Timeout", func(t *testing.T) { t.Parallel(); runTimeout(t, h) })
		t.Run("Recover", func(t *testing.T) { t.Parallel(); runRecover(t, h) })
	})
}

// RunLocal runs the part of the suite only an executor that runs jobs on
// this machine passes: process groups, processes that left them, the
// attempt's cgroup, and what Recover leaves of them. Its tests, named
// Local/..., run in parallel, and RunLocal returns when they are done.
func RunLocal(t *testing.T, h Harness) {
	h.check(t)
	if h.Remote {
		t.Fatal("executortest: RunLocal needs an executor that runs jobs on this machine (Harness.Remote is set)")
	}
	t.Run("Local", func(t *testing.T) {
		t.Run("Group", func(t *testing.T) { t.Parallel(); runGroup(t, h) })
		t.Run("Escaped", func(t *testing.T) { t.Parallel(); runEscaped(t, h) })
		t.Run("Cgroup", func(t *testing.T) { t.Parallel(); runCgroup(t, h) })
		t.Run("Recover", func(t *testing.T) { t.Parallel(); runRecoverLocal(t, h) })
	})
}

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

// hookLog records what an executor tells an attempt's hooks.
type hookLog struct {
	submitErr error // what Submitted returns
	started   chan struct{}

	mu        sync.Mutex // guards the fields below
	calls     []string   // "submitted", "running", in order
	handles   []executor.Handle
	submitted time.Time // when Submitted was first called
	running   []executor.Running
}

func newHookLog() *hookLog { return &hookLog{started: make(chan struct{})} }

func (l *hookLog) hooks() executor.Hooks {
	return executor.Hooks{
		Submitted: func(h executor.Handle) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.submitted.IsZero() {
				l.submitted = time.Now()
			}
			l.calls = append(l.calls, "submitted")
			if l.submitErr == nil {
				l.handles = append(l.handles, h)
			}
			return l.submitErr
		},
		Running: func(r executor.Running) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.calls = append(l.calls, "running")
			l.handles = append(l.handles, r.Handle)
			l.running = append(l.running, r)
			if len(l.running) == 1 {
				close(l.started)
			}
		},
	}
}

// last is the last handle persisted: what a scheduler would find in its
// state after a crash.
func (l *hookLog) last() executor.Handle {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.handles) == 0 {
		return executor.Handle{}
	}
	return l.handles[len(l.handles)-1]
}

// attempt is a job run by Execute on a goroutine of its own.
type attempt struct {
	job  executor.Job
	log  *hookLog
	done chan executor.Result
}

// start runs j on ex under ctx on a goroutine of its own. The test's end
// cancels what is left of it and waits for Execute to return.
func start(t *testing.T, ex executor.Executor, ctx context.Context, j executor.Job) *attempt {
	t.Helper()
	return startHooks(t, ex, ctx, j, newHookLog())
}

func startHooks(t *testing.T, ex executor.Executor, ctx context.Context, j executor.Job, l *hookLog) *attempt {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	a := &attempt{job: j, log: l, done: make(chan executor.Result, 1)}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		a.done <- ex.Execute(ctx, j, l.hooks())
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-returned:
		case <-time.After(time.Minute):
			t.Errorf("Execute of %v did not return a minute after the test", j.Args)
		}
	})
	return a
}

// running waits until the attempt's Running hook has been called and
// returns what it was told.
func (a *attempt) running(t *testing.T) executor.Running {
	t.Helper()
	select {
	case <-a.log.started:
	case r := <-a.done:
		a.done <- r
		select {
		case <-a.log.started:
		default:
			t.Fatalf("Execute returned %+v without calling its Running hook", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job was not running a minute after Execute was called")
	}
	a.log.mu.Lock()
	defer a.log.mu.Unlock()
	return a.log.running[0]
}

// result waits for Execute to return, failing the test if it does not
// within a minute (the job is stuck) after what.
func (a *attempt) result(t *testing.T, what string) executor.Result {
	t.Helper()
	return await(t, a.done, what)
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

// wantReason fails the test unless r ended for reason want.
func wantReason(t *testing.T, r executor.Result, want executor.EndReason) {
	t.Helper()
	if r.Reason != want {
		t.Fatalf("result = %+v: reason %q, want %q", r, r.Reason, want)
	}
}

// wantSignal fails the test unless r says sig killed the job; a remote
// executor may not know (0).
func (h Harness) wantSignal(t *testing.T, r executor.Result, sig syscall.Signal) {
	t.Helper()
	if r.Signal != sig && !(h.Remote && r.Signal == 0) {
		t.Errorf("signal = %v, want %v", r.Signal, sig)
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

// countLines returns how many lines the file at path has; 0 when it is
// missing.
func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
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

// readPIDs returns the PIDs listed in the file at path.
func readPIDs(path string) []int {
	b, _ := os.ReadFile(path)
	return pidsIn(string(b))
}

// pidsIn returns the PIDs listed in s, one a line.
func pidsIn(s string) []int {
	var pids []int
	for _, f := range strings.Fields(s) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitPIDs waits until path lists n PIDs and returns them.
func waitPIDs(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pids := readPIDs(path); len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lists %d PIDs after 10s, want %d", path, len(readPIDs(path)), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hasLine reports whether the file at path has the line want.
func hasLine(path, want string) bool {
	b, _ := os.ReadFile(path)
	for l := range strings.Lines(string(b)) {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// waitLine waits until the file at path has the line want.
func waitLine(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !hasLine(path, want) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
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
