package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// startGaps returns the time between the end of each attempt and the start
// of the next one.
func startGaps(r task.Record) []time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(r.Attempts); i++ {
		gaps = append(gaps, r.Attempts[i].Start.Sub(r.Attempts[i-1].End))
	}
	return gaps
}

func TestRetryDelayDoublesUpToTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{DefaultRetryDelay: time.Second, RetryDelayMax: 3 * time.Second}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{exit: 1}, {exit: 1}, {exit: 1}, {exit: 1}, {}}
		s := spec("a")
		s.Retries = 4
		h.mustSubmit(t, s)
		recs := h.run(t)
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
		if got := startGaps(recs["a"]); recs["a"].State != task.Complete || !slices.Equal(got, want) {
			t.Errorf("a %s, gaps between attempts %v, want %v", recs["a"].State, got, want)
		}
		var retryAt []time.Duration
		for _, ev := range h.events {
			if ev.Kind == Retrying {
				retryAt = append(retryAt, ev.RetryAt.Sub(ev.Attempt.End))
			}
		}
		if !slices.Equal(retryAt, want) {
			t.Errorf("Retrying events' RetryAt - attempt end = %v, want %v", retryAt, want)
		}
	})
}

// A task's own RetryDelay beats the queue's; NoRetryDelay retries at once.
// While it waits, the task is pending with RetryAt saved, and other tasks
// use the slot.
func TestRetryDelayOfTheTaskAndWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1, DefaultRetryDelay: time.Minute}, nil)
		defer h.Close()
		h.runner.script["own"] = []step{{exit: 1}, {}}
		h.runner.script["none"] = []step{{exit: 1}, {}}
		h.runner.script["other"] = []step{{dur: 3 * time.Second}}
		own, none := spec("own"), spec("none")
		own.Retries, own.RetryDelay = 1, 10*time.Second
		none.Retries, none.RetryDelay = 1, task.NoRetryDelay
		h.mustSubmit(t, own, none, spec("other"))
		var saved time.Time
		h.runner.hook = func(req AttemptRequest) {
			if req.Spec.ID == "other" {
				rows, _ := h.store.Load()
				for _, r := range rows {
					if r.ID == "own" && r.State == task.Pending {
						saved = r.RetryAt
					}
				}
			}
		}
		recs := h.run(t)
		if got := startGaps(recs["own"]); len(got) != 1 || got[0] != 10*time.Second {
			t.Errorf("own: gaps %v, want [10s]", got)
		}
		if got := startGaps(recs["none"]); len(got) != 1 || got[0] != 0 {
			t.Errorf("none: gaps %v, want [0s]", got)
		}
		if saved.IsZero() {
			t.Error("while own waited out its delay, the store had no retry_at for it")
		}
		if !recs["own"].RetryAt.IsZero() {
			t.Errorf("a completed task still has RetryAt %v", recs["own"].RetryAt)
		}
	})
}

func TestRetryOnExitCodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		h.runner.script["listed"] = []step{{exit: 75}, {}}
		h.runner.script["unlisted"] = []step{{exit: 3}, {}}
		listed, unlisted := spec("listed"), spec("unlisted")
		for _, s := range []*task.Spec{listed, unlisted} {
			s.Retries, s.RetryOnExitCodes = 3, []int{75, 76}
		}
		h.mustSubmit(t, listed, unlisted)
		recs := h.run(t)
		if r := recs["listed"]; r.State != task.Complete || len(r.Attempts) != 2 {
			t.Errorf("listed: %s after %d attempts, want complete after 2", r.State, len(r.Attempts))
		}
		r := recs["unlisted"]
		if r.State != task.Failed || len(r.Attempts) != 1 ||
			r.Error != "exit code 3; not retried: retry_on_exit_codes does not list exit code 3" {
			t.Errorf("unlisted: %s after %d attempts, error %q", r.State, len(r.Attempts), r.Error)
		}
	})
}

// A timed-out attempt is final unless the task sets RetryOnTimeout.
func TestRetryOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		h.runner.script["plain"] = []step{{block: true}, {}}
		h.runner.script["opted"] = []step{{block: true}, {}}
		plain, opted := spec("plain"), spec("opted")
		for _, s := range []*task.Spec{plain, opted} {
			s.Retries, s.Timeout = 2, time.Minute
		}
		opted.RetryOnTimeout = true
		h.mustSubmit(t, plain, opted)
		recs := h.run(t)
		if r := recs["plain"]; r.State != task.Failed || len(r.Attempts) != 1 ||
			!strings.HasSuffix(r.Error, "timed out after 1m0s; not retried after a timeout (retry_on_timeout is off)") {
			t.Errorf("plain: %s after %d attempts, error %q", r.State, len(r.Attempts), r.Error)
		}
		if r := recs["opted"]; r.State != task.Complete || len(r.Attempts) != 2 || !r.Attempts[0].TimedOut {
			t.Errorf("opted: %s after %d attempts", r.State, len(r.Attempts))
		}
	})
}

// A fault of the environment is not charged to the task: a task without
// retries survives two of them, backing off 1s then 2s; each attempt says
// so and is marked NotCharged.
func TestEnvironmentFaultsAreNotCharged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		emfile := fmt.Errorf("open log /run/logs/a/attempt-1.log: too many open files: %w", executor.ErrEnvironment)
		h.runner.script["a"] = []step{{fault: emfile}, {fault: emfile}, {}}
		a := spec("a")
		a.Retries = task.NoRetries
		h.mustSubmit(t, a)
		recs := h.run(t)
		r := recs["a"]
		if r.State != task.Complete || len(r.Attempts) != 3 {
			t.Fatalf("a: %s after %d attempts, want complete after 3", r.State, len(r.Attempts))
		}
		for _, at := range r.Attempts[:2] {
			if !at.NotCharged || !strings.Contains(at.Error, "too many open files") || !strings.HasSuffix(at.Error, "not the task's: it does not use up a retry") {
				t.Errorf("attempt %d: not charged %v, error %q", at.Number, at.NotCharged, at.Error)
			}
		}
		if r.Attempts[2].NotCharged {
			t.Error("the successful attempt is marked not charged")
		}
		if got, want := startGaps(r), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("back-off %v, want %v", got, want)
		}
	})
}

// A fault of the environment that lasts fails the task in the end: a run
// never goes on forever.
func TestEnvironmentFaultsInARowGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		fault := fmt.Errorf("create log folder: not a directory: %w", executor.ErrEnvironment)
		steps := make([]step, MaxEnvironmentFaults+1)
		for i := range steps {
			steps[i] = step{fault: fault}
		}
		h.runner.script["a"] = steps
		h.mustSubmit(t, spec("a"))
		recs := h.run(t)
		r := recs["a"]
		if r.State != task.Failed || len(r.Attempts) != MaxEnvironmentFaults ||
			!strings.HasSuffix(r.Error, fmt.Sprintf("gave up after %d such failures in a row", MaxEnvironmentFaults)) {
			t.Errorf("a: %s after %d attempts, error %q", r.State, len(r.Attempts), r.Error)
		}
	})
}

// A command that cannot run as given fails at once, retries or not.
func TestCommandFaultIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{DefaultRetries: 5}, nil)
		defer h.Close()
		missing := fmt.Errorf("start pyhton3: executable file not found in PATH: %w", executor.ErrCommand)
		h.runner.script["a"] = []step{{fault: missing}, {}}
		h.mustSubmit(t, spec("a"))
		recs := h.run(t)
		r := recs["a"]
		if r.State != task.Failed || len(r.Attempts) != 1 || !strings.HasSuffix(r.Error, "; not retried: the command cannot run as given") {
			t.Errorf("a: %s after %d attempts, error %q", r.State, len(r.Attempts), r.Error)
		}
	})
}

// When the run stops (its context cancelled), the running task is recorded
// cancelled and what depends on it stays pending, ready for the next run;
// Cancel of one task blocks what depends on it.
func TestRunStopLeavesDependentsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{block: true}}
		h.runner.script["x"] = []step{{block: true}}
		h.mustSubmit(t, spec("a"), spec("b", "a"), spec("c", "b"), spec("x"), spec("y", "x"))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, func() {
			if err := h.Cancel("x"); err != nil {
				t.Error(err)
			}
		})
		time.AfterFunc(2*time.Second, cancel)
		recs, err := h.Run(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		got := map[string]task.State{}
		for _, r := range recs {
			got[r.ID] = r.State
		}
		want := map[string]task.State{"a": task.Cancelled, "b": task.Pending, "c": task.Pending, "x": task.Cancelled, "y": task.Blocked}
		for id, st := range want {
			if got[id] != st {
				t.Errorf("%s: %s, want %s", id, got[id], st)
			}
		}
		for _, ev := range h.events {
			if ev.Kind == TaskBlocked && ev.TaskID != "y" {
				t.Errorf("blocked event for %s", ev.TaskID)
			}
		}
	})
}

// Cancelling a task that waits out a retry delay ends the wait.
func TestCancelDuringRetryDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{DefaultRetryDelay: time.Hour, RetryDelayMax: 2 * time.Hour}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{exit: 1}, {}}
		a := spec("a")
		a.Retries = 1
		h.mustSubmit(t, a, spec("b", "a"))
		time.AfterFunc(time.Minute, func() {
			if err := h.Cancel("a"); err != nil {
				t.Error(err)
			}
		})
		start := time.Now()
		recs := h.run(t)
		if recs["a"].State != task.Cancelled || len(recs["a"].Attempts) != 1 || recs["b"].State != task.Blocked {
			t.Errorf("a %s (%d attempts), b %s", recs["a"].State, len(recs["a"].Attempts), recs["b"].State)
		}
		if took := time.Since(start); took >= time.Hour {
			t.Errorf("the run waited %v, the whole retry delay", took)
		}
	})
}
