package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// onLoop runs f on the loop goroutine, for a test to look at the loop's
// state without a race.
func onLoop(t *testing.T, e *Engine, f func(e *Engine)) {
	t.Helper()
	done := make(chan struct{})
	if !e.send(probeEvent{f, done}) {
		t.Fatal("engine closed")
	}
	<-done
}

type probeEvent struct {
	f    func(e *Engine)
	done chan struct{}
}

func (ev probeEvent) apply(e *Engine) { ev.f(e); close(ev.done) }

// serve runs Serve until the test ends it with the returned stop, which
// returns Serve's error.
func serve(e *Engine) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx) }()
	return func() error { cancel(); return <-done }
}

func states(recs []task.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID+":"+r.State.String())
	}
	return out
}

// Tasks submitted from several goroutines while the engine serves all run,
// in dependency order, and each submitter's Wait sees its own tasks end.
func TestServeSchedulesSubmissionsFromManyGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 3}, nil)
		defer h.Close()
		stop := serve(h.Engine)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				var ids []string
				for i := range 5 {
					s := spec(fmt.Sprintf("g%d-%d", g, i))
					if i > 0 {
						s.Dependencies = []string{ids[i-1]}
					}
					ids = append(ids, s.ID)
					if err := h.submit(t, s); err != nil {
						t.Errorf("submit %s: %v", s.ID, err)
						return
					}
					time.Sleep(time.Duration(g) * 300 * time.Millisecond)
				}
				recs, err := h.Wait(context.Background(), ids)
				if err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				for i, r := range recs {
					if r.ID != ids[i] || r.State != task.Complete || len(r.Attempts) != 1 {
						t.Errorf("Wait returned %s: %s with %d attempts, want %s complete", r.ID, r.State, len(r.Attempts), ids[i])
					}
					if i > 0 && r.Attempts[0].Start.Before(recs[i-1].Attempts[0].End) {
						t.Errorf("%s started before %s ended", r.ID, recs[i-1].ID)
					}
				}
			})
		}
		wg.Wait()
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
		if got := len(h.runner.startOrder()); got != 40 {
			t.Errorf("%d attempts started, want 40", got)
		}
		if h.runner.maxRunning > 3 {
			t.Errorf("%d ran at once, more than MaxParallel 3", h.runner.maxRunning)
		}
	})
}

// Wait returns every task's final state, in the order asked, whatever the
// state; a task finished already (blocked on submission) needs no Serve.
func TestWaitReturnsFinalStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		h.runner.script["bad"] = []step{{exit: 1}}
		h.runner.script["long"] = []step{{block: true}}
		h.mustSubmit(t, spec("ok"), spec("bad"), spec("after-bad", "bad"), spec("long"))
		stop := serve(h.Engine)
		go func() { time.Sleep(10 * time.Second); h.Cancel("long") }()
		recs, err := h.Wait(context.Background(), []string{"long", "after-bad", "ok", "bad", "ok"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"long:cancelled", "after-bad:blocked", "ok:complete", "bad:failed", "ok:complete"}
		if got := states(recs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Wait = %v, want %v", got, want)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v", err)
		}

		// Blocked from the start, on submission: Wait answers without Serve.
		h.mustSubmit(t, spec("late", "after-bad"))
		recs, err = h.Wait(context.Background(), []string{"late"})
		if err != nil || len(recs) != 1 || recs[0].State != task.Blocked || recs[0].BlockedBy != "bad" {
			t.Errorf("Wait(late) = %v, %v; want blocked by bad", states(recs), err)
		}
	})
}

func TestWaitErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		h.mustSubmit(t, spec("a"))
		var te *task.Error
		if _, err := h.Wait(context.Background(), []string{"a", "nope"}); !errors.As(err, &te) || !errors.Is(err, task.ErrUnknownTask) || te.TaskID != "nope" {
			t.Errorf("Wait(unknown) = %v, want a task error about nope", err)
		}
		// Nothing serves: a waits until the caller gives up.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := h.Wait(ctx, []string{"a"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait past its deadline = %v", err)
		}
		synctest.Wait()
		onLoop(t, h.Engine, func(e *Engine) {
			if len(e.svc.watched) != 0 {
				t.Errorf("a waiter that gave up is still watching %d tasks", len(e.svc.watched))
			}
		})
		// The engine closes under a Wait.
		done := make(chan error)
		go func() { _, err := h.Wait(context.Background(), []string{"a"}); done <- err }()
		synctest.Wait()
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Wait when the engine closes = %v, want ErrClosed", err)
		}
		if _, err := h.Wait(context.Background(), []string{"a"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Wait after Close = %v, want ErrClosed", err)
		}
	})
}

// When Serve's context ends, running attempts are stopped and recorded
// cancelled, what waits for them stays pending, and a later Serve runs
// what never started.
func TestServeStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		h.runner.script["long"] = []step{{block: true}}
		h.mustSubmit(t, spec("long"), spec("after", "long"), spec("other"))
		stop := serve(h.Engine)
		synctest.Wait()
		if _, err := h.Run(context.Background()); !errors.Is(err, ErrRunning) {
			t.Errorf("Run while serving = %v, want ErrRunning", err)
		}
		if err := h.Serve(context.Background()); !errors.Is(err, ErrRunning) {
			t.Errorf("Serve while serving = %v, want ErrRunning", err)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve = %v, want context.Canceled", err)
		}
		recs := byID(h.Records())
		if recs["long"].State != task.Cancelled || recs["after"].State != task.Pending || recs["other"].State != task.Pending {
			t.Fatalf("after Serve: %v", states(h.Records()))
		}
		stop = serve(h.Engine)
		r, err := h.Wait(context.Background(), []string{"other"})
		if err != nil || r[0].State != task.Complete {
			t.Errorf("second Serve: other %v, %v", states(r), err)
		}
		stop()

		// Close ends a Serve.
		done := make(chan error)
		go func() { done <- h.Serve(context.Background()) }()
		synctest.Wait()
		h.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve when closed = %v, want ErrClosed", err)
		}
		if err := h.Serve(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Serve after Close = %v, want ErrClosed", err)
		}
	})
}

// Cancel returns once the task's end is committed, whatever its state.
func TestCancelAnswersAfterTheCommit(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness) []*task.Spec // the batch, with t and child (nil: just those)
		want  task.State
		tries int // attempts t made
	}{
		{"running", func(h *harness) []*task.Spec {
			h.runner.script["t"] = []step{{block: true}}
			return nil
		}, task.Cancelled, 1},
		{"pending, waiting for a dependency", func(h *harness) []*task.Spec {
			h.runner.script["dep"] = []step{{block: true}}
			return []*task.Spec{spec("dep"), spec("t", "dep"), spec("child", "t")}
		}, task.Cancelled, 0},
		{"pending, waiting out a retry delay", func(h *harness) []*task.Spec {
			h.runner.script["t"] = []step{{exit: 1}, {}}
			s := spec("t")
			s.Retries, s.RetryDelay = 1, time.Hour
			return []*task.Spec{s, spec("child", "t")}
		}, task.Cancelled, 1},
		{"complete", func(h *harness) []*task.Spec { return nil }, task.Complete, 1},
		{"failed", func(h *harness) []*task.Spec {
			h.runner.script["t"] = []step{{exit: 2}}
			return nil
		}, task.Failed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{MaxParallel: 1}, nil)
				defer h.Close()
				batch := tt.setup(h)
				if batch == nil {
					batch = []*task.Spec{spec("t"), spec("child", "t")}
				}
				h.mustSubmit(t, batch...)
				stop := serve(h.Engine)
				defer stop()
				time.Sleep(5 * time.Second) // t runs, fails or finishes
				synctest.Wait()
				if err := h.Cancel("t"); err != nil {
					t.Fatal(err)
				}
				// Committed by now: the store says so.
				r, _, _ := h.store.LookupTask("t")
				if r.State != tt.want || len(r.Attempts) != tt.tries {
					t.Fatalf("store after Cancel: t %s with %d attempts, want %s with %d", r.State, len(r.Attempts), tt.want, tt.tries)
				}
				if tt.want == task.Cancelled {
					if !r.RetryAt.IsZero() {
						t.Errorf("cancelled t still has a retry at %v", r.RetryAt)
					}
					if c, _, _ := h.store.LookupTask("child"); c.State != task.Blocked || c.BlockedBy != "t" {
						t.Errorf("child: %s blocked by %q, want blocked by t", c.State, c.BlockedBy)
					}
					if tt.tries > 0 && tt.name == "running" && !r.Attempts[0].Cancelled {
						t.Errorf("t's attempt is not marked cancelled: %+v", r.Attempts[0])
					}
				}
				time.Sleep(2 * time.Hour) // a retry delay would be over
				synctest.Wait()
				if r, _, _ := h.store.LookupTask("t"); len(r.Attempts) != tt.tries || r.State != tt.want {
					t.Errorf("later: t %s with %d attempts, want %s with %d", r.State, len(r.Attempts), tt.want, tt.tries)
				}
			})
		})
	}
}
