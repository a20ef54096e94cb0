package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// submitAgain submits specs with Again, as a daemon queues again the
// tasks an earlier daemon left unfinished, or retries a task it no
// longer holds.
func (h *harness) submitAgain(t *testing.T, specs ...*task.Spec) error {
	t.Helper()
	blobs := make([][]byte, len(specs))
	for i, s := range specs {
		s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid spec in test: %v", err)
		}
		blobs[i], _ = json.Marshal(s)
	}
	return h.Submit(Submission{Specs: specs, JSON: blobs, Again: true})
}

// specsOf returns the definitions of a workflow by id, made afresh.
func specsOf(wf func() []*task.Spec) map[string]*task.Spec {
	m := map[string]*task.Spec{}
	for _, s := range wf() {
		m[s.ID] = s
	}
	return m
}

// After a restart, retrying a task that had finished before it makes the
// pending tasks that counted its end (on: any, on: failure) wait for its
// new end and judge their conditions by it, as Retry does without a
// restart (TestRetryOfATaskAnAggregateCounted); a dependent already
// running, or finished, is left as it is. The restarted engine is given
// its unfinished tasks again as a daemon gives them, with every
// dependency, those on finished tasks included.
func TestRetryAfterRestartRelinksDependents(t *testing.T) {
	wf := func() []*task.Spec {
		return []*task.Spec{
			spec("x"),
			on(spec("any", "x"), task.AfterAny, "x"),
			on(spec("fail", "x"), task.AfterFailure, "x"),
			spec("plain", "x"),                        // blocked by x's failure: the retry takes it up
			on(spec("runs", "x"), task.AfterAny, "x"), // started before the retry
			on(spec("done", "x"), task.AfterAny, "x"), // finished before the restart
		}
	}
	for _, retire := range []bool{true, false} {
		t.Run(fmt.Sprintf("retire=%v", retire), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := store.NewMemory()
				cfg := Config{MaxParallel: 4, Retire: retire}
				first := newHarness(t, cfg, st)
				first.runner.script["x"] = []step{{exit: 1}}
				first.mustSubmit(t, wf()...)
				// Held back, so that they are pending when the engine closes.
				if _, err := first.Pause([]string{"any", "fail", "runs"}, false); err != nil {
					t.Fatal(err)
				}
				first.run(t)
				first.Close()

				h := newHarness(t, cfg, st)
				defer h.Close()
				h.runner.script["x"] = []step{{}, {dur: 10 * time.Second}} // attempt 2 completes
				h.runner.script["runs"] = []step{{dur: 30 * time.Second}}
				s := specsOf(wf)
				if err := h.submitAgain(t, s["any"], s["fail"], s["runs"]); err != nil {
					t.Fatalf("queue again the unfinished tasks, with their dependencies: %v", err)
				}
				if _, err := h.Resume([]string{"runs"}); err != nil {
					t.Fatal(err)
				}
				stop := serve(h.Engine)
				defer stop()
				synctest.Wait() // runs has started, on x's first end
				if err := h.submitAgain(t, s["x"], s["plain"]); err != nil {
					t.Fatalf("retry x: %v", err)
				}
				if _, err := h.Resume([]string{"any", "fail"}); err != nil {
					t.Fatal(err)
				}
				checkWait(t, h, "any", task.WaitDependencies, "x (any outcome)")
				checkWait(t, h, "fail", task.WaitDependencies, "x (on its failure)")
				checkWait(t, h, "runs", task.NotWaiting, "")

				recs := mustWait(t, h.Engine, "x", "any", "fail", "plain", "runs")
				if r, ok, err := st.LookupTask("done"); err != nil || !ok {
					t.Fatalf("done: %v, %v", ok, err)
				} else {
					recs["done"] = task.Record{ID: r.ID, State: r.State, Attempts: r.Attempts}
				}
				x := recs["x"]
				if x.State != task.Complete || len(x.Attempts) != 2 {
					t.Fatalf("x: %s with %d attempts, want complete on its second", x.State, len(x.Attempts))
				}
				xEnd := x.Attempts[1].End
				for _, id := range []string{"any", "plain"} {
					if r := recs[id]; r.State != task.Complete || len(r.Attempts) != 1 || r.Attempts[0].Start.Before(xEnd) {
						t.Errorf("%s: %s, attempts %v; want complete, started once after x's second end (%v)", id, r.State, r.Attempts, xEnd)
					}
				}
				if r := recs["fail"]; r.State != task.Blocked || !r.NotNeeded || r.BlockedBy != "x" || len(r.Attempts) != 0 {
					t.Errorf("fail: %s by %q, not needed %v, %d attempts; want not needed: x completed", r.State, r.BlockedBy, r.NotNeeded, len(r.Attempts))
				}
				for _, id := range []string{"runs", "done"} {
					if r := recs[id]; r.State != task.Complete || len(r.Attempts) != 1 {
						t.Errorf("%s: %s with %d attempts; want left as it was, complete once", id, r.State, len(r.Attempts))
					}
				}
				if r := recs["runs"]; !r.Attempts[0].Start.Before(xEnd) {
					t.Errorf("runs started at %v, after x's second end %v: it should have run on at the retry", r.Attempts[0].Start, xEnd)
				}
			})
		})
	}
}

// Queued again after a restart, a task is judged by the stored ends of
// the finished tasks it depends on: one stopped with the run (cancelled)
// blocks a task that needs it to complete; one that completed meets it;
// and a task complete from the earlier run whose dependencies are all
// complete then stays complete. A plain submission (without Again) still
// may not depend on a task of an earlier engine (TestRetiredMeansThisEngine).
func TestRestoreJudgesFinishedDependencies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		first := newHarness(t, Config{MaxParallel: 2}, st)
		first.runner.script["long"] = []step{{block: true}}
		first.mustSubmit(t, spec("ok"), spec("long"), spec("after-long", "long"), spec("kept", "ok"),
			on(spec("wait", "ok"), task.AfterAny, "ok"))
		if _, err := first.Pause([]string{"wait"}, false); err != nil {
			t.Fatal(err)
		}
		stop := serve(first.Engine)
		mustWait(t, first.Engine, "ok", "kept")
		stop() // long is stopped with the run: cancelled; after-long stays pending
		first.Close()
		if r, _, _ := st.LookupTask("after-long"); r.State != task.Pending {
			t.Fatalf("after-long is %s after the stop, want pending", r.State)
		}

		h := newHarness(t, Config{MaxParallel: 2, Retire: true}, st)
		defer h.Close()
		if err := h.submit(t, spec("new", "ok")); !errors.Is(err, task.ErrUnknownDependency) {
			t.Errorf("a plain submission after a task of an earlier engine = %v, want ErrUnknownDependency", err)
		}
		if err := h.submitAgain(t, spec("after-long", "long"), on(spec("wait", "ok"), task.AfterAny, "ok"), spec("kept", "ok")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Resume([]string{"wait"}); err != nil {
			t.Fatal(err)
		}
		stop = serve(h.Engine)
		defer stop()
		recs := mustWait(t, h.Engine, "after-long", "wait", "kept")
		if r := recs["after-long"]; r.State != task.Blocked || r.BlockedBy != "long" || r.Error != `blocked: dependency "long" cancelled` {
			t.Errorf("after-long: %s by %q (%q); want blocked by long, cancelled", r.State, r.BlockedBy, r.Error)
		}
		if r := recs["wait"]; r.State != task.Complete || len(r.Attempts) != 1 {
			t.Errorf("wait: %s with %d attempts, want run once", r.State, len(r.Attempts))
		}
		if r := recs["kept"]; r.State != task.Complete || len(r.Attempts) != 1 || r.Rerun != "" {
			t.Errorf("kept: %s with %d attempts (rerun %q), want kept complete", r.State, len(r.Attempts), r.Rerun)
		}
		if got := h.runner.startOrder(); len(got) != 1 || got[0] != "wait#1" {
			t.Errorf("started %v, want only wait", got)
		}
	})
}

// Open takes the rows Config.Rows gives (read by its caller beside other
// work) in place of reading the store again, and fails with its error.
func TestOpenTakesRowsGiven(t *testing.T) {
	st := store.NewMemory()
	st.Apply(&store.Batch{Tasks: []store.TaskWrite{{ID: "t", Seq: 1, Kind: "command", Spec: []byte(`{"id":"t"}`), State: task.Complete}}})
	rows, err := st.Load()
	if err != nil || len(rows) != 1 {
		t.Fatal(rows, err)
	}
	rows[0].State = task.Failed // told apart from the store's
	calls := 0
	h := newHarness(t, Config{Rows: func() ([]store.Row, error) { calls++; return rows, nil }}, st)
	defer h.Close()
	if r, ok := h.Earlier("t"); calls != 1 || !ok || r.State != task.Failed {
		t.Fatalf("after %d calls of Rows, Earlier(t) = %+v, %v; want the row given (failed)", calls, r, ok)
	}
	broken := errors.New("rows unreadable")
	_, err = Open(Config{MaxParallel: 1, Store: st, Runner: &fakeRunner{store: st}, Rows: func() ([]store.Row, error) { return nil, broken }})
	if !errors.Is(err, broken) {
		t.Errorf("Open with Rows failing: %v, want its error", err)
	}
}
