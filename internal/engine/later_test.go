package engine

import (
	"context"
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
