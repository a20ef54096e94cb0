package engine

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// savedAttempt returns attempt 1 of task id as the store has it.
func savedAttempt(t *testing.T, h *harness, id string) task.Attempt {
	t.Helper()
	rows, err := h.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == id && len(r.Attempts) > 0 {
			return r.Attempts[0]
		}
	}
	t.Fatalf("%s has no attempt in the store", id)
	return task.Attempt{}
}

// That an attempt runs (its PID and handle) costs no commit of its own: it
// is written with the next commit, or alone once laterDelay has passed.
func TestRunningWaitsForTheNextCommit(t *testing.T) {
	t.Run("alone, after laterDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{}, nil)
			defer h.Close()
			h.runner.script["a"] = []step{{dur: 10 * time.Second}}
			h.mustSubmit(t, spec("a"))
			go h.Run(context.Background())
			synctest.Wait() // started, and running
			commits := h.store.Applies()
			if a := savedAttempt(t, h, "a"); a.PID != 0 {
				t.Errorf("PID %d saved at once, want it to wait for a commit", a.PID)
			}
			time.Sleep(laterDelay)
			synctest.Wait()
			if got := h.store.Applies(); got != commits+1 {
				t.Errorf("%d commits after laterDelay, want 1", got-commits)
			}
			if a := savedAttempt(t, h, "a"); a.PID != 40001 || a.Ended() {
				t.Errorf("saved attempt: PID %d, ended %v; want PID 40001, running", a.PID, a.Ended())
			}
		})
	})
	t.Run("with another task's start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{MaxParallel: 2}, nil)
			defer h.Close()
			h.runner.script["a"] = []step{{dur: 10 * time.Second}}
			h.runner.script["b"] = []step{{dur: time.Millisecond}}
			h.runner.script["c"] = []step{{dur: 10 * time.Second}}
			h.mustSubmit(t, spec("a"), spec("b"), spec("c"))
			go h.Run(context.Background())
			synctest.Wait() // a and b run
			commits := h.store.Applies()
			time.Sleep(time.Millisecond) // b ends, c starts: one commit
			synctest.Wait()
			if got := h.store.Applies(); got != commits+1 {
				t.Errorf("%d commits for b's end and c's start, want 1", got-commits)
			}
			if a := savedAttempt(t, h, "a"); a.PID == 0 {
				t.Error("a's PID was not written with that commit")
			}
			if b := savedAttempt(t, h, "b"); b.PID == 0 || !b.Ended() {
				t.Errorf("b saved with PID %d, ended %v; want its PID, ended", b.PID, b.Ended())
			}
		})
	})
}

// The owners' usage is saved at most once per usageEvery while attempts
// run, and at once when the last one ends.
func TestUsageSavedAtMostOnceASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 3}, nil)
		defer h.Close()
		h.runner.script["s1"] = []step{{dur: time.Millisecond}}
		h.runner.script["s2"] = []step{{dur: 2 * time.Millisecond}}
		h.runner.script["long"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, spec("s1"), spec("s2"), spec("long"))
		done := make(chan struct{})
		go func() { h.Run(context.Background()); close(done) }()
		time.Sleep(3 * time.Millisecond) // s1 and s2 have ended, long runs
		synctest.Wait()
		first := h.store.Meta(metaUsage)
		if first == "" {
			t.Fatal("usage not saved at the first attempt's end")
		}
		if !strings.Contains(first, `"at":"2000-01-01T00:00:00.001Z"`) {
			t.Errorf("usage saved %q: want it as of s1's end (1 ms), s2's (2 ms) waiting", first)
		}
		time.Sleep(usageEvery)
		synctest.Wait()
		second := h.store.Meta(metaUsage)
		if second == first {
			t.Errorf("usage not saved again within usageEvery of s2's end: %q", second)
		}
		<-done
		if last := h.store.Meta(metaUsage); last == second {
			t.Errorf("usage not saved again when long ended: %q", last)
		}
	})
}
