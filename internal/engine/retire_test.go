package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// inMemory returns the ids of the tasks the loop holds, sorted.
func inMemory(t *testing.T, e *Engine) []string {
	t.Helper()
	var ids []string
	onLoop(t, e, func(e *Engine) {
		for id := range e.tasks {
			ids = append(ids, id)
		}
	})
	slices.Sort(ids)
	return ids
}

func mustWait(t *testing.T, e *Engine, ids ...string) map[string]task.Record {
	t.Helper()
	recs, err := e.Wait(context.Background(), ids)
	if err != nil {
		t.Fatalf("Wait(%v): %v", ids, err)
	}
	return byID(recs)
}

// Finished tasks leave memory; later submissions still see them, through
// the store, as they would in memory.
func TestRetiredTasksStillCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{MaxParallel: 2, Retire: true}, st)
		defer h.Close()
		stop := serve(h.Engine)
		defer stop()
		h.runner.script["bad"] = []step{{exit: 1}}
		h.runner.script["long"] = []step{{block: true}}
		h.mustSubmit(t, spec("ok"), spec("bad"), spec("after-bad", "bad"), spec("long"))
		mustWait(t, h.Engine, "ok", "bad", "after-bad")
		if err := h.Cancel("long"); err != nil {
			t.Fatal(err)
		}
		if got := inMemory(t, h.Engine); len(got) != 0 {
			t.Errorf("finished tasks still in memory: %v", got)
		}
		if recs := h.Records(); len(recs) != 0 {
			t.Errorf("Records = %v, want none: all retired", states(recs))
		}
		if rows, _ := st.Load(); len(rows) != 4 {
			t.Errorf("the store holds %d tasks, want 4", len(rows))
		}

		h.mustSubmit(t, spec("x", "ok"), spec("y", "bad"), spec("y2", "after-bad"), spec("z", "long"), spec("w", "x"))
		recs := mustWait(t, h.Engine, "x", "y", "y2", "z", "w")
		want := map[string]string{"x": "complete ", "y": "blocked bad", "y2": "blocked bad", "z": "blocked long", "w": "complete "}
		for id, w := range want {
			if got := recs[id].State.String() + " " + recs[id].BlockedBy; got != w {
				t.Errorf("%s: %q, want %q", id, got, w)
			}
		}
		if got := recs["y2"].Error; got != `blocked: dependency "bad" failed` {
			t.Errorf("y2's error = %q: it should name the task that failed", got)
		}

		for _, tt := range []struct {
			batch []*task.Spec
			want  error
		}{
			{[]*task.Spec{spec("ok")}, task.ErrDuplicateTask},
			{[]*task.Spec{spec("new"), spec("after-bad")}, task.ErrDuplicateTask},
			{[]*task.Spec{spec("v", "nope")}, task.ErrUnknownDependency},
		} {
			if err := h.submit(t, tt.batch...); !errors.Is(err, tt.want) {
				t.Errorf("submit %v = %v, want %v", tt.batch, err, tt.want)
			}
		}
		if err := h.Cancel("ok"); err != nil {
			t.Errorf("Cancel of a retired task = %v, want nil", err)
		}
		recs = mustWait(t, h.Engine, "ok", "after-bad")
		if recs["ok"].State != task.Complete || len(recs["ok"].Attempts) != 1 || recs["after-bad"].State != task.Blocked {
			t.Errorf("Wait on retired tasks = %+v", recs)
		}
		if err := h.Cancel("nope"); !errors.Is(err, task.ErrUnknownTask) {
			t.Errorf("Cancel(nope) = %v", err)
		}
	})
}

// A task stays in memory while its completion event is not delivered; a
// Wait that watches it has its record from when it finished. Without
// Config.Retire, every task stays.
func TestRetireWaitsForWaitersAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &deliveries{block: make(chan struct{})}
		h := eventHarness(t, store.NewMemory(), d, Config{MaxParallel: 2, Retire: true})
		defer h.Close()
		stop := serve(h.Engine)
		defer stop()
		h.runner.script["quiet"] = []step{{dur: time.Second}}
		h.runner.script["slow"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, spec("quiet"), spec("slow"))
		done := make(chan error)
		go func() {
			recs, err := h.Wait(context.Background(), []string{"quiet", "slow"})
			if got := states(recs); err == nil && !slices.Equal(got, []string{"quiet:complete", "slow:complete"}) {
				t.Errorf("Wait = %v", got)
			}
			done <- err
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := inMemory(t, h.Engine); !slices.Equal(got, []string{"slow"}) {
			t.Errorf("while a Wait watches: %v in memory, want slow (quiet finished, without an event)", got)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := inMemory(t, h.Engine); !slices.Equal(got, []string{"slow"}) {
			t.Errorf("after the Wait: %v in memory, want slow, whose event waits", got)
		}
		close(d.block)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := inMemory(t, h.Engine); len(got) != 0 {
			t.Errorf("after delivery: %v in memory, want none", got)
		}
		onLoop(t, h.Engine, func(e *Engine) {
			if len(e.outboxSpecs) != 0 {
				t.Errorf("definitions of delivered events kept: %v", e.outboxSpecs)
			}
		})
	})
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		h.mustSubmit(t, spec("a"), spec("b"))
		h.run(t)
		if got := inMemory(t, h.Engine); len(got) != 2 {
			t.Errorf("without Retire: %v in memory, want a and b", got)
		}
	})
}

// A Wait that gives up leaves nothing behind that would keep its tasks.
func TestRetireAfterAWaitGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Retire: true}, nil)
		defer h.Close()
		h.runner.script["never"] = []step{{block: true}}
		h.mustSubmit(t, spec("never"))
		stop := serve(h.Engine)
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := h.Wait(ctx, []string{"never"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait = %v", err)
		}
		if err := h.Cancel("never"); err != nil {
			t.Fatal(err)
		}
		onLoop(t, h.Engine, func(e *Engine) {
			if len(e.tasks) != 0 || len(e.svc.watched) != 0 {
				t.Errorf("after the Wait gave up and the task ended: %d tasks in memory, %d watched", len(e.tasks), len(e.svc.watched))
			}
		})
	})
}

// Tasks of an earlier engine on the same store are not retired ones: a
// dependency on one that was not submitted again is unknown, as before.
func TestRetiredMeansThisEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{Retire: true}, st)
		h.mustSubmit(t, spec("old"))
		h.run(t)
		h.Close()
		h = newHarness(t, Config{Retire: true}, st)
		defer h.Close()
		h.mustSubmit(t, spec("a"))
		h.run(t) // a is retired: lookups in the store begin
		if got := inMemory(t, h.Engine); len(got) != 0 {
			t.Fatalf("in memory: %v", got)
		}
		if err := h.submit(t, spec("b", "old")); !errors.Is(err, task.ErrUnknownDependency) {
			t.Errorf("depending on a task of an earlier engine = %v, want ErrUnknownDependency", err)
		}
		if err := h.submit(t, spec("old")); err != nil {
			t.Errorf("submitting a task of an earlier engine again = %v, want nil (resumed)", err)
		}
		if got := h.runner.startOrder(); len(got) != 1 {
			t.Errorf("started %v, want only a: old was complete", got)
		}
		r := mustWait(t, h.Engine, "old")["old"] // retired at once, complete on submission
		if r.State != task.Complete || len(r.Attempts) != 1 {
			t.Errorf("old = %s with %d attempts, want kept complete", r.State, len(r.Attempts))
		}
	})
}

// Many tasks through a retiring engine: memory holds only the unfinished.
func TestRetireKeepsMemoryToTheUnfinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4, Retire: true}, nil)
		defer h.Close()
		stop := serve(h.Engine)
		defer stop()
		prev := ""
		for b := range 20 {
			var batch []*task.Spec
			var ids []string
			for i := range 10 {
				s := spec(fmt.Sprintf("b%d-%d", b, i))
				if prev != "" {
					s.Dependencies = []string{prev}
				}
				batch = append(batch, s)
				ids = append(ids, s.ID)
			}
			h.mustSubmit(t, batch...)
			mustWait(t, h.Engine, ids...)
			prev = ids[9]
			if got := inMemory(t, h.Engine); len(got) != 0 {
				t.Fatalf("after batch %d: %d tasks in memory", b, len(got))
			}
		}
		onLoop(t, h.Engine, func(e *Engine) {
			if e.svc.retired != 200 {
				t.Errorf("retired %d, want 200", e.svc.retired)
			}
		})
	})
}
