package engine

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

func storedRow(t *testing.T, st *store.Memory, id string) store.Row {
	t.Helper()
	r, ok, err := st.LookupTask(id)
	if err != nil || !ok {
		t.Fatalf("task %s not in the store: %v", id, err)
	}
	return r
}

func TestPauseKeepsATaskFromStartingAndResumeLetsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		defer h.Close()
		h.mustSubmit(t, spec("a"), spec("b"), spec("c", "b"))
		got, err := h.Pause([]string{"b", "c"}, false)
		if err != nil || !slices.Equal(got, []string{"b", "c"}) {
			t.Fatalf("Pause = %v, %v; want [b c]", got, err)
		}
		recs := h.run(t)
		if got := h.runner.startOrder(); !slices.Equal(got, []string{"a#1"}) {
			t.Errorf("started %v, want only a: b and c are paused", got)
		}
		for _, id := range []string{"b", "c"} {
			r := recs[id]
			if r.State != task.Pending || !r.Paused || r.Waiting.Kind != task.WaitPaused {
				t.Errorf("%s = %s, paused %v, waiting %v; want pending, paused", id, r.State, r.Paused, r.Waiting)
			}
			if row := storedRow(t, st, id); !row.Paused || row.Waiting.Kind != task.WaitPaused {
				t.Errorf("%s stored: paused %v, waiting %v", id, row.Paused, row.Waiting)
			}
		}
		if got, err := h.Pause([]string{"a", "b"}, false); err != nil || len(got) != 0 {
			t.Errorf("Pause of a complete and a paused task = %v, %v; want nothing done", got, err)
		}
		if _, err := h.Pause([]string{"nope"}, false); !errors.Is(err, task.ErrUnknownTask) {
			t.Errorf("Pause of an unknown task: %v, want ErrUnknownTask", err)
		}

		got, err = h.Resume([]string{"b"})
		if err != nil || !slices.Equal(got, []string{"b"}) {
			t.Fatalf("Resume = %v, %v", got, err)
		}
		recs = h.run(t)
		if recs["b"].State != task.Complete || recs["b"].Paused {
			t.Errorf("b after resume = %+v, want complete", recs["b"])
		}
		if r := recs["c"]; r.State != task.Pending || r.Waiting.Kind != task.WaitPaused {
			t.Errorf("c = %s waiting %v: still paused, its dependency done", r.State, r.Waiting)
		}
		h.Resume([]string{"c"})
		if recs = h.run(t); recs["c"].State != task.Complete {
			t.Errorf("c after resume = %s", recs["c"].State)
		}
		if row := storedRow(t, st, "b"); row.Paused {
			t.Error("b is stored paused after it completed")
		}
	})
}

func TestPausedRunningTaskRunsOnAndWaitsPausedToRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{DefaultRetries: 2}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{exit: 1}, {exit: 0}}
		h.runner.hook = func(req AttemptRequest) {
			if req.Number == 1 {
				if got, err := h.Pause([]string{"a"}, false); err != nil || !slices.Equal(got, []string{"a"}) {
					t.Errorf("Pause of running a = %v, %v", got, err)
				}
			}
		}
		h.mustSubmit(t, spec("a"))
		r := h.run(t)["a"]
		if r.State != task.Pending || len(r.Attempts) != 1 || r.Waiting.Kind != task.WaitPaused {
			t.Fatalf("a = %s after %d attempts, waiting %v; want its retry to wait paused", r.State, len(r.Attempts), r.Waiting)
		}
		h.Resume([]string{"a"})
		if r = h.run(t)["a"]; r.State != task.Complete || len(r.Attempts) != 2 {
			t.Errorf("a after resume = %s after %d attempts", r.State, len(r.Attempts))
		}
	})
}

func TestRetryOfABlockedChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		a := spec("a")
		a.Retries = 1
		h.runner.script["a"] = []step{{exit: 1}, {exit: 2}, {exit: 3}, {exit: 0}}
		h.mustSubmit(t, a, spec("b", "a"), spec("c", "b"), spec("d"))
		recs := h.run(t)
		if recs["a"].State != task.Failed || recs["b"].State != task.Blocked || recs["c"].State != task.Blocked {
			t.Fatalf("first run: a %s, b %s, c %s", recs["a"].State, recs["b"].State, recs["c"].State)
		}
		for _, ids := range [][]string{{"d"}, {"b"}} {
			if _, err := h.Retry(ids); !errors.Is(err, ErrNotRetryable) {
				t.Errorf("Retry(%v) = %v, want ErrNotRetryable", ids, err)
			}
		}
		if recs := byID(h.Records()); recs["b"].State != task.Blocked {
			t.Errorf("a refused retry changed b: %s", recs["b"].State)
		}
		got, err := h.Retry([]string{"a"})
		if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("Retry(a) = %v, %v; want [a b c]", got, err)
		}
		recs = h.run(t)
		for _, id := range []string{"a", "b", "c"} {
			if recs[id].State != task.Complete {
				t.Errorf("%s = %s (%s), want complete after the retry", id, recs[id].State, recs[id].Error)
			}
		}
		// Its retries were renewed: attempt 3 failed, attempt 4 ran.
		if n := len(recs["a"].Attempts); n != 4 {
			t.Errorf("a ran %d attempts, want 4 (two, then two more after Retry)", n)
		}
		if _, err := h.Retry([]string{"a"}); !errors.Is(err, ErrNotRetryable) {
			t.Errorf("Retry of a complete task = %v, want ErrNotRetryable", err)
		}
	})
}

func TestPauseSurvivesReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.mustSubmit(t, spec("a"), spec("b"))
		if _, err := h.Pause([]string{"a"}, false); err != nil {
			t.Fatal(err)
		}
		h.Close()

		h2 := newHarness(t, Config{}, st)
		defer h2.Close()
		h2.mustSubmit(t, spec("a"), spec("b"))
		recs := h2.run(t)
		if got := h2.runner.startOrder(); !slices.Equal(got, []string{"b#1"}) {
			t.Errorf("reopened engine started %v, want only b: a was paused", got)
		}
		if r := recs["a"]; r.State != task.Pending || !r.Paused || r.Waiting.Kind != task.WaitPaused {
			t.Errorf("a = %s, paused %v, waiting %v", r.State, r.Paused, r.Waiting)
		}
		h2.Resume([]string{"a"})
		if recs = h2.run(t); recs["a"].State != task.Complete {
			t.Errorf("a after resume = %s", recs["a"].State)
		}
	})
}

// signalRunner is a fakeRunner that can signal attempts: it notes each
// signal with the attempt's PID.
type signalRunner struct {
	*fakeRunner
	sent []string // "pid:SIGNAL", guarded by fakeRunner.mu
}

func (s *signalRunner) Signal(h executor.Handle, sig syscall.Signal) error {
	p, err := local.DecodeHandle(h)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.sent = append(s.sent, fmt.Sprintf("%d:%s", p.PID, executor.SignalName(sig)))
	s.mu.Unlock()
	return nil
}

// Pause with stop signals the running attempt's handle, Resume continues
// it; a pending task paused with stop gets no signal.
func TestPauseStopSignalsTheRunningAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &signalRunner{fakeRunner: &fakeRunner{}}
		h := newHarness(t, Config{MaxParallel: 1, Runner: r}, nil)
		defer h.Close()
		r.script["a"] = []step{{block: true}}
		release := make(chan struct{})
		r.hook = func(req AttemptRequest) {
			if req.Spec.ID != "a" {
				return
			}
			got, err := h.Pause([]string{"a", "b"}, true)
			if err != nil || !slices.Equal(got, []string{"a", "b"}) {
				t.Errorf("Pause --stop = %v, %v", got, err)
			}
			if got, err := h.Resume([]string{"a"}); err != nil || !slices.Equal(got, []string{"a"}) {
				t.Errorf("Resume = %v, %v", got, err)
			}
			close(release)
		}
		h.mustSubmit(t, spec("a"), spec("b"))
		go func() { <-release; h.Cancel("a") }()
		recs := h.run(t)
		r.mu.Lock()
		sent := slices.Clone(r.sent)
		r.mu.Unlock()
		if want := []string{"40001:SIGSTOP", "40001:SIGCONT"}; !slices.Equal(sent, want) {
			t.Errorf("signals sent %v, want %v", sent, want)
		}
		if b := recs["b"]; b.State != task.Pending || b.Waiting.Kind != task.WaitPaused {
			t.Errorf("b = %s waiting %v, want pending, paused", b.State, b.Waiting)
		}
	})
}

// Pause with stop of a task whose attempt has not started yet (no handle
// recorded: it waits in a batch system's queue, or its start is not
// applied yet) stops it when it starts: pause --stop is not answered done
// while the task goes on running.
func TestPauseStopBeforeTheStartStopsAtTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &signalRunner{fakeRunner: &fakeRunner{}}
		h := newHarness(t, Config{MaxParallel: 1, Runner: r}, nil)
		defer h.Close()
		r.script["a"] = []step{{queue: []executor.Progress{{System: "Slurm", Job: "7", State: "PENDING", Queued: true}},
			queueWait: time.Minute, block: true}}
		h.mustSubmit(t, spec("a"))
		var sent []string
		go func() {
			time.Sleep(30 * time.Second) // queued: no handle yet
			if got, err := h.Pause([]string{"a"}, true); err != nil || !slices.Equal(got, []string{"a"}) {
				t.Errorf("Pause --stop = %v, %v", got, err)
			}
			time.Sleep(time.Minute) // it started meanwhile, its start applied
			r.mu.Lock()
			sent = slices.Clone(r.sent)
			r.mu.Unlock()
			h.Cancel("a")
		}()
		h.run(t)
		if !slices.Equal(sent, []string{"40001:SIGSTOP"}) {
			t.Errorf("signals sent once it started: %v, want SIGSTOP to the attempt", sent)
		}
	})
}
