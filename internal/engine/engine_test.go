package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// step is what the fake runner does for one attempt of a task.
type step struct {
	dur   time.Duration // how long the attempt runs (fake time in a bubble)
	exit  int           // its exit code
	block bool          // run until stopped
	use   int64         // GPU memory it takes, MiB; 0 means what it was admitted with
	fault error         // the attempt cannot start: the executor's error (a fault of the environment, a missing program)
	oomAt time.Duration // a GPU attempt: after running this long, it fails to allocate tried MiB more
	tried int64
	// queue is what a batch system says of the attempt before its
	// command runs (Hooks.Progress), queueWait apart.
	queue     []executor.Progress
	queueWait time.Duration
}

// fakeRunner pretends to run attempts, following a script per task.
type fakeRunner struct {
	store *store.Memory // checked at each start: the attempt must be committed first
	gpus  *fakeProbe    // GPU attempts take memory there; nil: no GPUs

	mu         sync.Mutex // guards the fields below
	script     map[string][]step
	running    int
	maxRunning int
	starts     []string // "id#attempt", in start order
	hook       func(req AttemptRequest)
	problems   []string
	pids       int
	gpuStarts  []gpuStart
	// recovered answers Recover; nil: every orphan is lost.
	recovered func([]Orphan) []executor.Recovery
	orphans   []Orphan // what Recover was asked
}

func (f *fakeRunner) Recover(orphans []Orphan) []executor.Recovery {
	f.mu.Lock()
	f.orphans = append(f.orphans, orphans...)
	rec := f.recovered
	f.mu.Unlock()
	if rec != nil {
		return rec(orphans)
	}
	out := make([]executor.Recovery, len(orphans))
	for i := range out {
		out[i].Result = executor.Result{Reason: executor.Lost, Err: errors.New("its outcome is unknown; killed 3 leftover process(es)")}
	}
	return out
}

func (f *fakeRunner) Finish(ctx context.Context, req AttemptRequest, res executor.Result) Outcome {
	out := Outcome{Result: res}
	switch {
	case res.Err != nil:
		out.Verdict = res.Err
	case res.Signal != 0:
		out.Verdict = fmt.Errorf("killed by %s", executor.SignalName(res.Signal))
	case res.ExitCode != 0:
		out.Verdict = fmt.Errorf("exit code %d", res.ExitCode)
	}
	return out
}

// gpuStart records a GPU attempt's start, for tests to check placement.
type gpuStart struct {
	task      string
	card      int
	requested int64
	at        time.Time
	cards     []int // every card of the attempt, in the order given
}

func (f *fakeRunner) Run(ctx context.Context, req AttemptRequest, hooks executor.Hooks) Outcome {
	if req.Timeout > 0 { // the executor enforces timeouts
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	id := req.Spec.ID
	f.mu.Lock()
	f.running++
	f.maxRunning = max(f.maxRunning, f.running)
	f.starts = append(f.starts, fmt.Sprintf("%s#%d", id, req.Number))
	steps := f.script[id]
	hook := f.hook
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()

	if f.store != nil {
		f.checkCommitted(id, req.Number)
	}
	st := step{dur: time.Second}
	if len(steps) > 0 {
		st = steps[min(req.Number, len(steps))-1]
	}
	if st.fault != nil {
		now := time.Now()
		return Outcome{Result: executor.Result{Err: st.fault, Start: now, End: now}, Verdict: st.fault}
	}
	for _, p := range st.queue {
		hooks.Progress(p)
		select {
		case <-time.After(st.queueWait):
		case <-ctx.Done():
			now := time.Now()
			return Outcome{Result: executor.Result{Reason: executor.Cancelled, Start: now, End: now}, Verdict: errors.New("cancelled while queued")}
		}
	}
	f.mu.Lock()
	f.pids++
	pid := 40000 + f.pids
	if req.GPU != nil {
		var cards []int
		for _, c := range req.GPU.Cards() {
			cards = append(cards, c.Index)
		}
		f.gpuStarts = append(f.gpuStarts, gpuStart{id, req.GPU.Index, req.GPU.MemoryMiB, time.Now(), cards})
	}
	f.mu.Unlock()
	hooks.Running(executor.Running{Handle: local.EncodeHandle(executor.Process{PID: pid, PGID: pid, StartTicks: 7}), Since: time.Now(), PID: pid})
	if hook != nil {
		hook(req)
	}
	res := executor.Result{Started: true, Start: time.Now()}
	if req.GPU != nil && f.gpus != nil {
		use := cmp.Or(st.use, req.GPU.MemoryMiB)
		defer f.gpus.release(pid)
		for _, c := range req.GPU.Cards() { // as much on each of its cards
			if err := f.gpus.take(pid, c.UUID, use); err != nil {
				res.ExitCode, res.End = 1, time.Now()
				return Outcome{Result: res, Verdict: err, OOM: true}
			}
		}
	}
	if st.oomAt > 0 {
		select {
		case <-time.After(st.oomAt):
			res.ExitCode, res.End = 1, time.Now()
			return Outcome{Result: res, Verdict: errors.New("exit code 1"), OOM: true, OOMTriedMiB: st.tried}
		case <-ctx.Done():
		}
	}
	var wait <-chan time.Time
	if !st.block {
		wait = time.After(st.dur)
	}
	select {
	case <-wait:
		res.ExitCode = st.exit
	case <-ctx.Done():
		res.Signal = syscall.SIGTERM
		res.Reason = executor.Cancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Reason = executor.TimedOut
		}
	}
	res.End = time.Now()
	out := Outcome{Result: res}
	switch {
	case res.Signal != 0:
		out.Verdict = errors.New("killed by SIGTERM")
	case res.ExitCode != 0:
		out.Verdict = fmt.Errorf("exit code %d", res.ExitCode)
	}
	return out
}

func (f *fakeRunner) checkCommitted(id string, number int) {
	rows, _ := f.store.Load()
	for _, r := range rows {
		if r.ID == id && r.State == task.Running && len(r.Attempts) >= number && r.Attempts[number-1].Number == number {
			return
		}
	}
	f.mu.Lock()
	f.problems = append(f.problems, fmt.Sprintf("%s#%d started before its attempt was committed", id, number))
	f.mu.Unlock()
}

func (f *fakeRunner) startOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

type harness struct {
	*Engine
	runner *fakeRunner
	store  *store.Memory
	events []Event // observer's, touched only on the loop goroutine until Run returns
}

func newHarness(t *testing.T, cfg Config, st *store.Memory) *harness {
	t.Helper()
	if st == nil {
		st = store.NewMemory()
	}
	h := &harness{store: st, runner: &fakeRunner{store: st, script: map[string][]step{}}}
	if r, ok := cfg.Runner.(*fakeRunner); ok { // a test's own, e.g. to answer Recover
		r.store = st
		if r.script == nil {
			r.script = map[string][]step{}
		}
		h.runner = r
	}
	var runner Runner = h.runner
	if r, ok := cfg.Runner.(*signalRunner); ok { // one that can signal attempts
		r.store, r.script, h.runner, runner = st, map[string][]step{}, r.fakeRunner, r
	}
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = 2
	}
	if cfg.DefaultRetryDelay == 0 {
		// Retries at once, unless a test is about retry delays: most
		// tests script attempts in an order that delays would change.
		cfg.DefaultRetryDelay = -1
	}
	cfg.Store, cfg.Runner, cfg.LogDir = keepOpen{st}, runner, "/logs"
	cfg.Observer = func(ev Event) { h.events = append(h.events, ev) }
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Engine = e
	return h
}

// keepOpen lets a test reopen the same memory store in a second engine, as
// a second scheduler process would reopen the same file.
type keepOpen struct{ store.Store }

func (keepOpen) Close() error { return nil }

func (h *harness) submit(t *testing.T, specs ...*task.Spec) error {
	t.Helper()
	blobs := make([][]byte, len(specs))
	for i, s := range specs {
		s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid spec in test: %v", err)
		}
		blobs[i], _ = json.Marshal(s)
	}
	return h.Submit(Submission{Specs: specs, JSON: blobs})
}

func (h *harness) mustSubmit(t *testing.T, specs ...*task.Spec) {
	t.Helper()
	if err := h.submit(t, specs...); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) run(t *testing.T) map[string]task.Record {
	t.Helper()
	recs, err := h.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(h.runner.problems) > 0 {
		t.Errorf("runner saw: %v", h.runner.problems)
	}
	return byID(recs)
}

func byID(recs []task.Record) map[string]task.Record {
	m := map[string]task.Record{}
	for _, r := range recs {
		m[r.ID] = r
	}
	return m
}

func spec(id string, deps ...string) *task.Spec {
	return &task.Spec{ID: id, Dependencies: deps, Payload: []string{"true"}}
}

func withPriority(s *task.Spec, p int) *task.Spec { s.Priority = p; return s }

func TestPriorityThenSubmissionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		h.mustSubmit(t, withPriority(spec("low"), -1), spec("first"), withPriority(spec("high"), 10), spec("second"), withPriority(spec("mid"), 5))
		h.run(t)
		want := []string{"high#1", "mid#1", "first#1", "second#1", "low#1"}
		if got := h.runner.startOrder(); !slices.Equal(got, want) {
			t.Errorf("start order = %v, want %v", got, want)
		}
	})
}

func TestNeverMoreThanMaxParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 3}, nil)
		defer h.Close()
		for i := range 20 {
			s := spec(fmt.Sprint("t", i))
			h.runner.script[s.ID] = []step{{dur: time.Duration(1+i%4) * time.Second}}
			h.mustSubmit(t, s)
		}
		start := time.Now()
		recs := h.run(t)
		if h.runner.maxRunning != 3 {
			t.Errorf("at most %d ran at once, want exactly 3", h.runner.maxRunning)
		}
		for id, r := range recs {
			if r.State != task.Complete {
				t.Errorf("%s: %s", id, r.State)
			}
		}
		// 50 task-seconds on 3 slots: no idle slot while work was waiting.
		// List scheduling ends within (total work / slots) + longest task.
		if took := time.Since(start); took > 50*time.Second/3+4*time.Second {
			t.Errorf("took %v of fake time, slots were left idle", took)
		}
	})
}

func TestDependencyOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4}, nil)
		defer h.Close()
		// Submitted dependents first within the batch: order comes from the graph.
		h.mustSubmit(t, spec("d", "b", "c"), spec("b", "a"), spec("c", "a"), spec("a"))
		recs := h.run(t)
		order := h.runner.startOrder()
		pos := func(s string) int { return slices.Index(order, s) }
		if !(pos("a#1") < pos("b#1") && pos("a#1") < pos("c#1") && pos("b#1") < pos("d#1") && pos("c#1") < pos("d#1")) {
			t.Errorf("start order %v breaks dependencies", order)
		}
		for id, r := range recs {
			if r.State != task.Complete {
				t.Errorf("%s: %s", id, r.State)
			}
		}
	})
}

func TestFailureBlocksDownstreamOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{exit: 3}}
		h.mustSubmit(t, spec("a"), spec("b", "a"), spec("c", "b"), spec("d"), spec("e", "d"))
		recs := h.run(t)
		want := map[string]task.State{"a": task.Failed, "b": task.Blocked, "c": task.Blocked, "d": task.Complete, "e": task.Complete}
		for id, st := range want {
			if recs[id].State != st {
				t.Errorf("%s: state %s, want %s", id, recs[id].State, st)
			}
		}
		if recs["c"].BlockedBy != "a" || recs["b"].BlockedBy != "a" {
			t.Errorf("blocked_by = %q, %q; want a, a", recs["b"].BlockedBy, recs["c"].BlockedBy)
		}
		if a := recs["a"]; a.ExitCode == nil || *a.ExitCode != 3 || a.Error != "exit code 3" {
			t.Errorf("a: exit code %v, error %q", a.ExitCode, a.Error)
		}
		if n := len(recs["b"].Attempts); n != 0 {
			t.Errorf("blocked task b has %d attempts", n)
		}
		// A task submitted later on top of the failed one is blocked at once.
		h.mustSubmit(t, spec("late", "c"))
		recs = h.run(t)
		if r := recs["late"]; r.State != task.Blocked || r.BlockedBy != "a" {
			t.Errorf("late: %s blocked by %q, want blocked by a", r.State, r.BlockedBy)
		}
	})
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name         string
		specRetries  int
		queueRetries int
		failures     int // attempts that fail before one succeeds
		wantState    task.State
		wantAttempts int
	}{
		{"succeeds on the last retry", 2, 0, 2, task.Complete, 3},
		{"runs out of retries", 1, 0, 5, task.Failed, 2},
		{"queue default applies", 0, 2, 2, task.Complete, 3},
		{"NoRetries beats the default", task.NoRetries, 5, 1, task.Failed, 1},
		{"no retries by default", 0, 0, 1, task.Failed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{DefaultRetries: tt.queueRetries}, nil)
				defer h.Close()
				var steps []step
				for range tt.failures {
					steps = append(steps, step{exit: 1})
				}
				h.runner.script["t"] = append(steps, step{exit: 0})
				s := spec("t")
				s.Retries = tt.specRetries
				h.mustSubmit(t, s)
				r := h.run(t)["t"]
				if r.State != tt.wantState || len(r.Attempts) != tt.wantAttempts {
					t.Fatalf("state %s after %d attempts, want %s after %d", r.State, len(r.Attempts), tt.wantState, tt.wantAttempts)
				}
				for i, a := range r.Attempts {
					if a.Number != i+1 || !a.Ended() || a.LogPath != fmt.Sprintf("/logs/t.attempt-%d.log", i+1) {
						t.Errorf("attempt %d = %+v", i+1, a)
					}
				}
			})
		})
	}
}

func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{DefaultTimeout: time.Minute}, nil)
		defer h.Close()
		h.runner.script["own"] = []step{{block: true}}
		h.runner.script["dflt"] = []step{{block: true}}
		h.runner.script["none"] = []step{{dur: 2 * time.Minute}}
		own := spec("own")
		own.Timeout = 5 * time.Second
		none := spec("none")
		none.Timeout = task.NoTimeout
		h.mustSubmit(t, own, spec("dflt"), none)
		start := time.Now()
		recs := h.run(t)
		for _, id := range []string{"own", "dflt"} {
			r := recs[id]
			if r.State != task.Failed || !r.Attempts[0].TimedOut {
				t.Errorf("%s: %s, timed out %v; want failed by timeout", id, r.State, r.Attempts[0].TimedOut)
			}
		}
		if got := recs["own"].Attempts[0].End.Sub(start); got != 5*time.Second {
			t.Errorf("own timeout hit after %v, want 5s", got)
		}
		if got := recs["dflt"].Error; got != "timed out after 1m0s" {
			t.Errorf("dflt error = %q", got)
		}
		if r := recs["none"]; r.State != task.Complete {
			t.Errorf("task without timeout: %s (%s)", r.State, r.Error)
		}
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		h.runner.script["long"] = []step{{block: true}}
		h.mustSubmit(t, spec("long"), spec("after-long", "long"), spec("queued"), spec("after-queued", "queued"))
		if err := h.Cancel("queued"); err != nil {
			t.Fatal(err)
		}
		var unknown *task.Error
		if err := h.Cancel("nope"); !errors.As(err, &unknown) || !errors.Is(err, task.ErrUnknownTask) {
			t.Errorf("Cancel(unknown) = %v", err)
		}
		h.runner.hook = func(req AttemptRequest) {
			if req.Spec.ID == "long" {
				go func() { time.Sleep(time.Second); h.Cancel("long") }()
			}
		}
		recs := h.run(t)
		want := map[string]task.State{"long": task.Cancelled, "after-long": task.Blocked, "queued": task.Cancelled, "after-queued": task.Blocked}
		for id, st := range want {
			if recs[id].State != st {
				t.Errorf("%s: %s, want %s", id, recs[id].State, st)
			}
		}
		if a := recs["long"].Attempts; len(a) != 1 || !a[0].Cancelled {
			t.Errorf("long attempts = %+v, want one cancelled", a)
		}
		if n := len(recs["queued"].Attempts); n != 0 {
			t.Errorf("queued ran %d times after being cancelled", n)
		}
	})
}

func TestRunContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1, DefaultRetries: 3}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{block: true}}
		h.mustSubmit(t, spec("a"), spec("b"))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(3*time.Second, cancel)
		recs, err := h.Run(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run error = %v, want context.Canceled", err)
		}
		m := byID(recs)
		if m["a"].State != task.Cancelled || len(m["a"].Attempts) != 1 {
			t.Errorf("a: %s with %d attempts, want cancelled after 1 (no retry)", m["a"].State, len(m["a"].Attempts))
		}
		if m["b"].State != task.Pending {
			t.Errorf("b never started and is %s, want pending", m["b"].State)
		}
		// The engine can run again: b runs now.
		recs2 := h.run(t)
		if recs2["b"].State != task.Complete {
			t.Errorf("second Run: b is %s", recs2["b"].State)
		}
	})
}

func TestSubmitFromRunnerDuringRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		h.mustSubmit(t, spec("first"), spec("parent"))
		h.runner.hook = func(req AttemptRequest) {
			if req.Spec.ID == "parent" {
				// Wait for first to finish, then add a child of it.
				time.Sleep(5 * time.Second)
				if err := h.submit(t, spec("child", "first", "parent")); err != nil {
					t.Errorf("submit from runner: %v", err)
				}
			}
		}
		recs := h.run(t)
		if r, ok := recs["child"]; !ok || r.State != task.Complete {
			t.Errorf("child = %+v, want complete", r)
		}
		order := h.runner.startOrder()
		if order[len(order)-1] != "child#1" {
			t.Errorf("start order %v: child must start last", order)
		}
	})
}

func TestSubmitIsAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		h.mustSubmit(t, spec("a"))
		tests := []struct {
			batch []*task.Spec
			want  error
		}{
			{[]*task.Spec{spec("x"), spec("a")}, task.ErrDuplicateTask},
			{[]*task.Spec{spec("x"), spec("x")}, task.ErrDuplicateTask},
			{[]*task.Spec{spec("x"), spec("y", "nope")}, task.ErrUnknownDependency},
			{[]*task.Spec{spec("x", "z"), spec("y", "x"), spec("z", "y", "a")}, task.ErrCycle},
		}
		for _, tt := range tests {
			if err := h.submit(t, tt.batch...); !errors.Is(err, tt.want) {
				t.Errorf("submit %v: %v, want %v", tt.batch, err, tt.want)
			}
		}
		recs := h.Records()
		if len(recs) != 1 || recs[0].ID != "a" {
			t.Errorf("records after rejected batches: %v, want only a", recs)
		}
		if rows, _ := h.store.Load(); len(rows) != 1 {
			t.Errorf("store holds %d tasks, want 1", len(rows))
		}
	})
}

func TestResumeKeepsCompletedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.runner.script["b"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("a"), spec("b"), spec("c", "b"), spec("d", "a"))
		first := h.run(t)
		if first["a"].State != task.Complete || first["b"].State != task.Failed || first["c"].State != task.Blocked {
			t.Fatalf("first run: %+v", first)
		}
		h.Close()

		h2 := newHarness(t, Config{}, st)
		defer h2.Close()
		h2.mustSubmit(t, spec("a"), spec("b"), spec("c", "b"), spec("d", "a"), spec("e", "a"))
		recs := h2.run(t)
		got := h2.runner.startOrder()
		slices.Sort(got)
		if want := []string{"b#2", "c#1", "e#1"}; !slices.Equal(got, want) {
			t.Errorf("resumed run started %v, want %v (a and d were complete)", got, want)
		}
		for id, r := range recs {
			if r.State != task.Complete {
				t.Errorf("%s: %s", id, r.State)
			}
		}
		if n := len(recs["b"].Attempts); n != 2 || !recs["b"].Attempts[0].Ended() || recs["b"].Attempts[0].Error != "exit code 1" {
			t.Errorf("b attempts = %+v, want the failed one kept and a second", recs["b"].Attempts)
		}
	})
}

func TestResumeRerunsDependentsOfRerunTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.mustSubmit(t, spec("a"), spec("b", "a"))
		h.run(t)
		h.Close()
		// Pretend a's completion was lost: mark it failed in the store.
		rows, _ := st.Load()
		st.Apply(&store.Batch{Tasks: []store.TaskWrite{{ID: "a", Seq: rows[0].Seq, Kind: "command", State: task.Failed}}})

		h2 := newHarness(t, Config{}, st)
		defer h2.Close()
		h2.mustSubmit(t, spec("a"), spec("b", "a"))
		h2.run(t)
		if got := h2.runner.startOrder(); !slices.Equal(got, []string{"a#2", "b#2"}) {
			t.Errorf("started %v, want a#2 then b#2: b's input is recomputed", got)
		}
	})
}

func TestOpenMarksLostAttemptsInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		started := time.Now().Add(-time.Hour)
		st.Apply(&store.Batch{
			Tasks:    []store.TaskWrite{{ID: "t", Seq: 1, Kind: "command", Spec: []byte(`{"id":"t"}`), State: task.Running}},
			Attempts: []store.AttemptWrite{{TaskID: "t", Attempt: task.Attempt{Number: 1, Start: started}, Handle: local.EncodeHandle(executor.Process{PID: 99, PGID: 99, StartTicks: 5})}},
		})
		h := newHarness(t, Config{}, st)
		defer h.Close()
		rows, _ := st.Load()
		if rows[0].State != task.Pending || !rows[0].Attempts[0].Interrupted || !rows[0].Attempts[0].Ended() {
			t.Fatalf("after Open: %+v", rows[0])
		}
		if o := h.runner.orphans; len(o) != 1 || o[0].Req.Spec.ID != "t" || o[0].Req.Number != 1 || o[0].Handle.IsZero() {
			t.Errorf("Recover was asked %+v, want attempt 1 of t with its stored handle", o)
		}
		if got := rows[0].Attempts[0].Error; !strings.Contains(got, "killed 3 leftover") || rows[0].Attempts[0].EndReason != "lost" {
			t.Errorf("interrupted attempt: error %q, end reason %q", got, rows[0].Attempts[0].EndReason)
		}
		h.mustSubmit(t, spec("t"))
		r := h.run(t)["t"]
		if r.State != task.Complete || len(r.Attempts) != 2 || r.Attempts[1].Number != 2 {
			t.Errorf("t = %+v, want complete with attempt 2", r)
		}
	})
}

func TestStoreFailureStopsScheduling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		st := &store.Failing{Store: mem}
		r := &fakeRunner{script: map[string][]step{"a": {{dur: 10 * time.Second}}}}
		e, err := Open(Config{MaxParallel: 1, Store: st, Runner: r, LogDir: "/l"})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		a, b := spec("a"), spec("b")
		for _, s := range []*task.Spec{a, b} {
			s.Normalize()
		}
		if err := e.Submit(Submission{Specs: []*task.Spec{a, b}, JSON: [][]byte{[]byte(`{}`), []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { st.Fail(errors.New("disk full")) })
		_, err = e.Run(context.Background())
		if err == nil || err.Error() != "save state: disk full" {
			t.Errorf("Run error = %v, want save state: disk full", err)
		}
		if got := r.startOrder(); !slices.Equal(got, []string{"a#1"}) {
			t.Errorf("started %v after the store broke, want only a#1", got)
		}
		if err := e.Submit(Submission{Specs: []*task.Spec{spec("c")}, JSON: [][]byte{[]byte(`{}`)}}); err == nil {
			t.Error("Submit on a broken engine succeeded")
		}
	})
}

func TestObserverSeesCommittedTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{exit: 1}, {exit: 0}}
		h.runner.script["x"] = []step{{exit: 2}}
		a := spec("a")
		a.Retries = 1
		h.mustSubmit(t, a, spec("x"), spec("y", "x"))
		h.run(t)
		var got []string
		for _, ev := range h.events {
			got = append(got, fmt.Sprintf("%s %s %d", ev.Kind, ev.TaskID, ev.Attempt.Number))
		}
		want := []string{"started a 1", "retrying a 1", "started a 2", "complete a 2", "started x 1", "failed x 1", "blocked y 0"}
		if !slices.Equal(got, want) {
			t.Errorf("events:\n got %q\nwant %q", got, want)
		}
	})
}

func TestRunWhileRunningAndAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		h.runner.script["a"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, spec("a"))
		done := make(chan error)
		go func() { _, err := h.Run(context.Background()); done <- err }()
		synctest.Wait()
		if _, err := h.Run(context.Background()); !errors.Is(err, ErrRunning) {
			t.Errorf("second Run = %v, want ErrRunning", err)
		}
		if err := <-done; err != nil {
			t.Errorf("first Run = %v", err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Run(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close = %v", err)
		}
		if err := h.submit(t, spec("b")); !errors.Is(err, ErrClosed) {
			t.Errorf("Submit after Close = %v", err)
		}
	})
}

func TestCloseStopsRunningAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		h.runner.script["a"] = []step{{block: true}}
		h.mustSubmit(t, spec("a"))
		done := make(chan error)
		go func() { _, err := h.Run(context.Background()); done <- err }()
		time.Sleep(time.Second)
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Run = %v, want ErrClosed", err)
		}
		rows, _ := h.store.Load()
		if rows[0].State != task.Cancelled {
			t.Errorf("a is %s in the store, want cancelled", rows[0].State)
		}
	})
}
