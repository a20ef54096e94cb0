package fakeremote_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/executor/fakeremote"
	"github.com/gpusched/gpusched/internal/testbin"
)

var sleeper string

func TestMain(m *testing.M) {
	sleeper = testbin.MustBuild("cmd/sleeper")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// TestConformance: the fake passes the common suite as a remote executor
// whose attempts outlive a restart (a new executor over the same
// controller), with a queue delay that Job.Timeout must not count.
func TestConformance(t *testing.T) {
	c := fakeremote.NewController(100 * time.Millisecond)
	executortest.Run(t, executortest.Harness{
		New:     func(*testing.T) executor.Executor { return fakeremote.New(c) },
		Sleeper: sleeper,
		Restart: func(_ *testing.T, old executor.Executor) { old.(*fakeremote.Executor).Close() },
		Adopts:  true,
		Remote:  true,
	})
}

// hooks records the handle told to Submitted and the Running calls.
type hooks struct {
	mu        sync.Mutex
	submitted []executor.Handle
	running   []executor.Running
	// onSubmit, when set, is called in Submitted, and its error returned.
	onSubmit func(executor.Handle) error
	started  chan struct{}
}

func newHooks() *hooks { return &hooks{started: make(chan struct{})} }

func (h *hooks) hooks() executor.Hooks {
	return executor.Hooks{
		Submitted: func(hd executor.Handle) error {
			h.mu.Lock()
			h.submitted = append(h.submitted, hd)
			h.mu.Unlock()
			if h.onSubmit != nil {
				return h.onSubmit(hd)
			}
			return nil
		},
		Running: func(r executor.Running) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.running = append(h.running, r)
			if len(h.running) == 1 {
				close(h.started)
			}
		},
	}
}

// id returns the controller's id of the job Submitted was told of.
func (h *hooks) id(t *testing.T) int64 {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.submitted) != 1 {
		t.Fatalf("Submitted called %d times, want once", len(h.submitted))
	}
	id, err := fakeremote.JobID(h.submitted[0])
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// run runs j on ex in the background; the result comes on the channel.
func run(ex executor.Executor, ctx context.Context, j executor.Job, h *hooks) <-chan executor.Result {
	done := make(chan executor.Result, 1)
	go func() { done <- ex.Execute(ctx, j, h.hooks()) }()
	return done
}

func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("nothing a minute after %s", what)
		var zero T
		return zero
	}
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written after 10s", path)
		}
	}
}

func TestTimeoutCountsFromRunning(t *testing.T) {
	t.Parallel()
	const delay = time.Second
	ex := fakeremote.New(fakeremote.NewController(delay))
	j := executortest.NewJob(t, sleeper, "-exit", "0")
	j.Timeout = delay / 2 // shorter than the queue: counted from submission, it would end the job before it ran
	h := newHooks()
	var submitted time.Time
	h.onSubmit = func(executor.Handle) error { submitted = time.Now(); return nil }
	r := ex.Execute(context.Background(), j, h.hooks())
	if r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Fatalf("result = %+v, want exited 0: the time queued counted towards the timeout", r)
	}
	if len(h.running) != 1 || h.running[0].PID != 0 {
		t.Fatalf("Running calls = %+v, want one, with PID 0", h.running)
	}
	if q := h.running[0].Since.Sub(submitted); q < delay {
		t.Errorf("ran %v after it was submitted, before the queue delay %v", q, delay)
	}
}

func TestCancelWhileQueued(t *testing.T) {
	t.Parallel()
	ex := fakeremote.New(fakeremote.NewController(time.Hour))
	touched := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-touch", touched)
	ctx, cancel := context.WithCancel(context.Background())
	h := newHooks()
	submitted := make(chan struct{})
	h.onSubmit = func(executor.Handle) error { close(submitted); return nil }
	done := run(ex, ctx, j, h)
	await(t, submitted, "Execute was called")
	cancel()
	r := await(t, done, "cancel")
	if r.Reason != executor.Cancelled || r.Started {
		t.Errorf("result = %+v, want cancelled, never started", r)
	}
	if len(h.running) != 0 {
		t.Error("Running called for a job cancelled in the queue")
	}
	if _, err := os.Stat(touched); err == nil {
		t.Error("the job ran")
	}
}

func TestSubmittedFailsNeverRuns(t *testing.T) {
	t.Parallel()
	c := fakeremote.NewController(0)
	touched := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-touch", touched)
	h := newHooks()
	boom := errors.New("disk full")
	h.onSubmit = func(executor.Handle) error { return boom }
	r := fakeremote.New(c).Execute(context.Background(), j, h.hooks())
	if r.Reason != executor.Infrastructure || !errors.Is(r.Err, boom) {
		t.Errorf("result = %+v, want infrastructure, wrapping the hook's error", r)
	}
	// The controller ended the job without running it.
	rec := fakeremote.New(c).Recover([]executor.Orphan{{Job: j, Handle: fakeremote.EncodeHandle(h.id(t))}})
	if rec[0].Wait != nil || rec[0].Result.Started || rec[0].Result.Reason != executor.Cancelled {
		t.Errorf("recovery = %+v, want ended, never started", rec[0])
	}
	if _, err := os.Stat(touched); err == nil {
		t.Error("the job ran")
	}
}

// TestRecoverReleasesHeld: the scheduler died after it saved the handle,
// before the job was released; the one that recovers it lets it run.
func TestRecoverReleasesHeld(t *testing.T) {
	t.Parallel()
	c := fakeremote.NewController(0)
	old := fakeremote.New(c)
	touched := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-touch", touched, "-exit", "4")
	h := newHooks()
	h.onSubmit = func(executor.Handle) error { old.Close(); return nil }
	if r := old.Execute(context.Background(), j, h.hooks()); r.Reason != executor.Lost {
		t.Fatalf("result = %+v, want lost: the executor was closed", r)
	}
	if _, err := os.Stat(touched); err == nil {
		t.Fatal("the job ran before it was released")
	}
	rec := fakeremote.New(c).Recover([]executor.Orphan{{Job: j, Handle: fakeremote.EncodeHandle(h.id(t))}})[0]
	if rec.Wait == nil {
		t.Fatalf("recovery = %+v, want the held job adopted", rec)
	}
	if !rec.Running.Since.IsZero() {
		t.Errorf("running since %v, want zero: it has not run yet", rec.Running.Since)
	}
	if r := rec.Wait(context.Background()); r.Reason != executor.Exited || r.ExitCode != 4 {
		t.Errorf("result = %+v, want exited with 4", r)
	}
}

func TestRecoverUnknownJob(t *testing.T) {
	t.Parallel()
	ex := fakeremote.New(fakeremote.NewController(0))
	j := executortest.NewJob(t, sleeper)
	rec := ex.Recover([]executor.Orphan{{Job: j, Handle: fakeremote.EncodeHandle(1 << 40)}})[0]
	if rec.Wait != nil || rec.Result.Reason != executor.Lost || !strings.Contains(fmt.Sprint(rec.Result.Err), "no such job") {
		t.Errorf("recovery = %+v, want lost: no such job", rec)
	}
}

// TestPreemptAndNodeFailure: the system's own endings, while Execute
// follows the job and after a restart, when an adopted attempt's Wait
// does; neither is charged to the task.
func TestPreemptAndNodeFailure(t *testing.T) {
	for _, c := range []struct {
		name   string
		act    func(*fakeremote.Controller, int64) error
		reason executor.EndReason
		term   bool // the job gets SIGTERM first
	}{
		{"Preempt", (*fakeremote.Controller).Preempt, executor.Preempted, true},
		{"FailNode", (*fakeremote.Controller).FailNode, executor.NodeFailure, false},
	} {
		for _, adopted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/adopted=%v", c.name, adopted), func(t *testing.T) {
				t.Parallel()
				ctl := fakeremote.NewController(0)
				old := fakeremote.New(ctl)
				dir := t.TempDir()
				pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
				args := []string{"-ignore-term", "-pidfile", pidfile, "-sleep", "1h"}
				if c.term {
					args = []string{"-on-term", termfile, "-pidfile", pidfile, "-sleep", "1h"}
				}
				j := executortest.NewJob(t, sleeper, args...)
				j.KillGrace = time.Hour // preemption's grace is the job's; its SIGTERM ends it
				h := newHooks()
				done := run(old, context.Background(), j, h)
				await(t, h.started, "Execute was called")
				id := h.id(t)
				wait := func() executor.Result { return await(t, done, "the controller acted") }
				if adopted {
					old.Close()
					await(t, done, "Close")
					rec := fakeremote.New(ctl).Recover([]executor.Orphan{{Job: j, Handle: fakeremote.EncodeHandle(id)}})[0]
					if rec.Wait == nil {
						t.Fatalf("recovery = %+v, want adopted", rec)
					}
					waited := make(chan executor.Result, 1)
					go func() { waited <- rec.Wait(context.Background()) }()
					wait = func() executor.Result { return await(t, waited, "the controller acted") }
				}
				waitFile(t, pidfile) // written once its signals are set up
				if err := c.act(ctl, id); err != nil {
					t.Fatal(err)
				}
				r := wait()
				if r.Reason != c.reason || !r.Started || r.Reason.Charged() {
					t.Errorf("result = %+v, want %q, not charged", r, c.reason)
				}
				if c.term {
					waitFile(t, termfile)
				}
				if err := c.act(ctl, id); err == nil {
					t.Error("acting on an ended job did not fail")
				}
			})
		}
	}
	if err := fakeremote.NewController(0).Preempt(7); err == nil {
		t.Error("preempting a job that does not exist did not fail")
	}
}

func TestHandle(t *testing.T) {
	if id, err := fakeremote.JobID(fakeremote.EncodeHandle(42)); id != 42 || err != nil {
		t.Errorf("JobID(EncodeHandle(42)) = %d, %v", id, err)
	}
	for _, h := range []executor.Handle{
		{},
		{Executor: "local", Version: fakeremote.HandleVersion, Data: []byte(`{"job_id":1}`)},
		{Executor: fakeremote.Name, Version: 2, Data: []byte(`{"job_id":1}`)},
		{Executor: fakeremote.Name, Version: fakeremote.HandleVersion, Data: []byte(`{"job_id":0}`)},
		{Executor: fakeremote.Name, Version: fakeremote.HandleVersion, Data: []byte(`{`)},
	} {
		if _, err := fakeremote.JobID(h); err == nil {
			t.Errorf("JobID(%+v) did not fail", h)
		}
	}
}
