package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// on makes s depend on its dependencies with the condition c, each.
func on(s *task.Spec, c task.Condition, deps ...string) *task.Spec {
	if s.DependencyOn == nil {
		s.DependencyOn = map[string]task.Condition{}
	}
	for _, d := range deps {
		s.DependencyOn[d] = c
	}
	return s
}

// The end of a task that a task "t" depends on, and how to bring it about.
var depEnds = []struct {
	name  string
	setup func(h *harness) []*task.Spec // what to submit before t; "dep" is the dependency
	// cancel: "dep" is cancelled before the run.
	cancel bool
}{
	{"complete", func(h *harness) []*task.Spec { return []*task.Spec{spec("dep")} }, false},
	{"failed", func(h *harness) []*task.Spec {
		h.runner.script["dep"] = []step{{exit: 2}}
		return []*task.Spec{spec("dep")}
	}, false},
	{"cancelled", func(h *harness) []*task.Spec { return []*task.Spec{spec("dep")} }, true},
	{"blocked", func(h *harness) []*task.Spec {
		h.runner.script["up"] = []step{{exit: 1}}
		return []*task.Spec{spec("up"), spec("dep", "up")}
	}, false},
	{"not needed", func(h *harness) []*task.Spec {
		return []*task.Spec{spec("up"), on(spec("dep", "up"), task.AfterFailure, "up")}
	}, false},
}

// Each condition against each end of the dependency: t runs, or is
// blocked by the right task, not needed or not, whether it was submitted
// with the dependency (judged when the dependency ends) or after it ended
// (judged at submission).
func TestConditionAgainstEachEnd(t *testing.T) {
	type want struct {
		state     task.State
		blockedBy string
		notNeeded bool
	}
	ran := want{state: task.Complete}
	wants := map[task.Condition]map[string]want{
		task.AfterSuccess: {
			"complete": ran, "failed": {task.Blocked, "dep", false}, "cancelled": {task.Blocked, "dep", false},
			"blocked": {task.Blocked, "up", false}, "not needed": {task.Blocked, "up", true},
		},
		task.AfterFailure: {
			"complete": {task.Blocked, "dep", true}, "failed": ran, "cancelled": ran,
			"blocked": ran, "not needed": {task.Blocked, "up", true},
		},
		task.AfterAny: {"complete": ran, "failed": ran, "cancelled": ran, "blocked": ran, "not needed": ran},
	}
	for _, cond := range []task.Condition{task.AfterSuccess, task.AfterFailure, task.AfterAny} {
		for _, end := range depEnds {
			for _, late := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/late=%v", cond, end.name, late)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						h := newHarness(t, Config{}, nil)
						defer h.Close()
						specs := end.setup(h)
						tsk := on(spec("t", "dep"), cond, "dep")
						if !late {
							specs = append(specs, tsk)
						}
						h.mustSubmit(t, specs...)
						if end.cancel {
							if err := h.Cancel("dep"); err != nil {
								t.Fatal(err)
							}
						}
						recs := h.run(t)
						if late {
							h.mustSubmit(t, tsk)
							recs = h.run(t)
						}
						w, r := wants[cond][end.name], recs["t"]
						if r.State != w.state || r.BlockedBy != w.blockedBy || r.NotNeeded != w.notNeeded {
							t.Errorf("t: %s by %q (not needed %v, %q); want %s by %q (not needed %v)",
								r.State, r.BlockedBy, r.NotNeeded, r.Error, w.state, w.blockedBy, w.notNeeded)
						}
						if ranT := slices.Contains(h.runner.startOrder(), "t#1"); ranT != (w.state == task.Complete) {
							t.Errorf("t ran: %v", ranT)
						}
						if w.state == task.Complete && !r.OK() || w.state == task.Blocked && r.OK() != w.notNeeded {
							t.Errorf("t: OK() = %v", r.OK())
						}
						row, _, _ := h.store.LookupTask("t")
						if row.State != r.State || row.NotNeeded != r.NotNeeded || row.BlockedBy != r.BlockedBy {
							t.Errorf("the store has t %s by %q, not needed %v", row.State, row.BlockedBy, row.NotNeeded)
						}
					})
				})
			}
		}
	}
}

// A blocked task says why: a failure upstream, a dependency that
// completed when the task runs on its failure, one that was not needed;
// the event says the same.
func TestBlockedReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		h.runner.script["broken"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("prep"), spec("broken"),
			on(spec("cleanup", "prep"), task.AfterFailure, "prep"),
			spec("after-cleanup", "cleanup"),
			spec("after-broken", "broken"))
		recs := h.run(t)
		want := map[string]string{
			"cleanup":       `not needed: dependency "prep" completed; this task runs on its failure`,
			"after-cleanup": `not needed: dependency "cleanup" was not needed ("prep" completed)`,
			"after-broken":  `blocked: dependency "broken" failed`,
		}
		for id, msg := range want {
			if recs[id].Error != msg {
				t.Errorf("%s: error %q, want %q", id, recs[id].Error, msg)
			}
		}
		if r := recs["after-cleanup"]; r.BlockedBy != "prep" || !r.NotNeeded {
			t.Errorf("after-cleanup: blocked by %q, not needed %v; want prep, true", r.BlockedBy, r.NotNeeded)
		}
		blocked := map[string]Event{}
		for _, ev := range h.events {
			if ev.Kind == TaskBlocked {
				blocked[ev.TaskID] = ev
			}
		}
		for id, msg := range want {
			ev := blocked[id]
			if ev.Error != msg || ev.NotNeeded != recs[id].NotNeeded || ev.BlockedBy != recs[id].BlockedBy {
				t.Errorf("%s's blocked event = %+v; want its record's reason", id, ev)
			}
		}
	})
}

// A failure upstream names the block of a task that both a failure and a
// task not needed block.
func TestFailureNamesTheBlockBeforeNotNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		h.runner.script["bad"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("good"), spec("bad"))
		h.run(t)
		h.mustSubmit(t, on(spec("t", "good", "bad"), task.AfterFailure, "good"))
		r := h.run(t)["t"]
		if r.State != task.Blocked || r.BlockedBy != "bad" || r.NotNeeded {
			t.Errorf("t: %s by %q, not needed %v; want blocked by bad, a failure", r.State, r.BlockedBy, r.NotNeeded)
		}
	})
}

// An aggregate over a sweep with on: any runs once every run of the sweep
// has ended, some failed; a clean-up on failure runs after the failure;
// what depends on them follows the ordinary rules.
func TestPartialSweepAndCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4}, nil)
		defer h.Close()
		h.runner.script["train-1"] = []step{{dur: 3 * time.Second}}
		h.runner.script["train-2"] = []step{{dur: time.Second, exit: 1}}
		h.runner.script["train-3"] = []step{{dur: 5 * time.Second}}
		h.runner.script["cleanup"] = []step{{exit: 4}}
		trains := []string{"train-1", "train-2", "train-3"}
		h.mustSubmit(t, spec("train-1"), spec("train-2"), spec("train-3"),
			on(spec("aggregate", trains...), task.AfterAny, trains...),
			spec("report", "aggregate"),
			on(spec("cleanup", trains...), task.AfterFailure, "train-2"),
			spec("after-cleanup", "cleanup"))
		recs := h.run(t)
		want := map[string]task.State{"train-1": task.Complete, "train-2": task.Failed, "train-3": task.Complete,
			"aggregate": task.Complete, "report": task.Complete, "cleanup": task.Failed, "after-cleanup": task.Blocked}
		for id, st := range want {
			if recs[id].State != st {
				t.Errorf("%s: %s, want %s (%s)", id, recs[id].State, st, recs[id].Error)
			}
		}
		if r := recs["after-cleanup"]; r.BlockedBy != "cleanup" || r.NotNeeded {
			t.Errorf("after-cleanup: by %q, not needed %v; want blocked by cleanup's failure", r.BlockedBy, r.NotNeeded)
		}
		// aggregate started after every train ended: its attempt became
		// ready once train-3, the last, ended.
		agg := recs["aggregate"].Attempts[0]
		for _, id := range trains {
			if end := recs[id].Attempts[0].End; agg.Start.Before(end) {
				t.Errorf("aggregate started at %v, before %s ended at %v", agg.Start, id, end)
			}
		}
	})
}

// A task waiting with conditions says which: "train-3 (any outcome)".
func TestWaitingNamesConditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4}, nil)
		defer h.Close()
		h.runner.script["train-1"] = []step{{dur: time.Second, exit: 1}}
		h.runner.script["train-2"] = []step{{dur: 10 * time.Second}}
		h.runner.script["prep"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, spec("train-1"), spec("train-2"), spec("prep"),
			on(spec("aggregate", "train-1", "train-2"), task.AfterAny, "train-1", "train-2"),
			on(spec("cleanup", "prep"), task.AfterFailure, "prep"),
			on(spec("mixed", "prep", "train-2"), task.AfterAny, "train-2"))
		checkWait(t, h, "aggregate", task.WaitDependencies, "train-1 (any outcome), train-2 (any outcome)")
		checkWait(t, h, "cleanup", task.WaitDependencies, "prep (on its failure)")
		checkWait(t, h, "mixed", task.WaitDependencies, "prep, train-2 (any outcome)")
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(2 * time.Second) // train-1 failed: aggregate waits for train-2 alone
		if w := h.Waiting("aggregate")["aggregate"]; w.Detail != "train-2 (any outcome)" {
			t.Errorf("aggregate's detail = %q, want train-2 (any outcome)", w.Detail)
		}
		if got := (task.WaitReason{Kind: task.WaitDependencies, Detail: "train-2 (any outcome)"}).Text(time.Time{}); got != "waiting for train-2 (any outcome)" {
			t.Errorf("Text = %q", got)
		}
	})
}

// Run 1: prep fails, its clean-up runs, the report after prep is blocked.
// Run 2, prep fixed: prep runs again and completes, the report runs, and
// the clean-up is not needed this time (blocked so, its attempt of run 1
// in its history), which is no failure. Run 3 runs nothing.
func TestResumeWithConditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		batch := func() []*task.Spec {
			return []*task.Spec{spec("prep"), on(spec("cleanup", "prep"), task.AfterFailure, "prep"), spec("report", "prep")}
		}
		h := newHarness(t, Config{}, st)
		h.runner.script["prep"] = []step{{exit: 1}}
		h.mustSubmit(t, batch()...)
		first := h.run(t)
		if first["prep"].State != task.Failed || first["cleanup"].State != task.Complete || first["report"].State != task.Blocked {
			t.Fatalf("run 1: prep %s, cleanup %s, report %s", first["prep"].State, first["cleanup"].State, first["report"].State)
		}
		h.Close()

		h = newHarness(t, Config{}, st)
		h.mustSubmit(t, batch()...)
		second := h.run(t)
		if got := h.runner.startOrder(); !slices.Equal(got, []string{"prep#2", "report#1"}) {
			t.Errorf("run 2 started %v, want prep#2 then report#1", got)
		}
		c := second["cleanup"]
		if c.State != task.Blocked || !c.NotNeeded || c.BlockedBy != "prep" || len(c.Attempts) != 1 || c.Attempts[0].Error != "" || !c.OK() {
			t.Errorf("run 2 cleanup: %s by %q, not needed %v, attempts %+v", c.State, c.BlockedBy, c.NotNeeded, c.Attempts)
		}
		for id, r := range second {
			if !r.OK() {
				t.Errorf("run 2: %s is %s (%s)", id, r.State, r.Error)
			}
		}
		h.Close()

		h = newHarness(t, Config{}, st)
		defer h.Close()
		h.mustSubmit(t, batch()...)
		third := h.run(t)
		if got := h.runner.startOrder(); len(got) != 0 {
			t.Errorf("run 3 started %v, want nothing", got)
		}
		if c := third["cleanup"]; c.State != task.Blocked || !c.NotNeeded {
			t.Errorf("run 3 cleanup: %s, not needed %v", c.State, c.NotNeeded)
		}
	})
}

// A task that completed in an earlier run is kept while nothing it depends
// on runs again, even when its condition changed meanwhile so that it
// would not run now: it did run.
func TestKeptDespiteAChangedCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.mustSubmit(t, spec("prep"), spec("cleanup", "prep"))
		h.run(t)
		h.Close()
		h = newHarness(t, Config{}, st)
		defer h.Close()
		h.mustSubmit(t, spec("prep"), on(spec("cleanup", "prep"), task.AfterFailure, "prep"))
		if r := h.run(t)["cleanup"]; r.State != task.Complete || len(h.runner.startOrder()) != 0 {
			t.Errorf("cleanup: %s, started %v; want kept complete, nothing run", r.State, h.runner.startOrder())
		}
	})
}

// Retrying a failed task leaves its clean-up, which ran, as it is, and
// runs again what its failure blocked. A task not needed cannot be
// retried: nothing failed.
func TestRetryWithConditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		h.runner.script["prep"] = []step{{exit: 1}, {exit: 0}}
		h.runner.script["ok"] = []step{{dur: 2 * time.Second}} // ends after prep failed
		h.mustSubmit(t, spec("prep"), on(spec("cleanup", "prep"), task.AfterFailure, "prep"), spec("report", "prep"),
			spec("ok"), on(spec("spare", "ok"), task.AfterFailure, "ok"),
			on(spec("both", "prep", "ok"), task.AfterFailure, "ok"))
		recs := h.run(t)
		if recs["cleanup"].State != task.Complete || recs["report"].State != task.Blocked || !recs["spare"].NotNeeded {
			t.Fatalf("first run: cleanup %s, report %s, spare %s", recs["cleanup"].State, recs["report"].State, recs["spare"].State)
		}
		if r := recs["both"]; r.State != task.Blocked || r.BlockedBy != "prep" || r.NotNeeded {
			t.Fatalf("first run: both %s by %q, not needed %v; want blocked by prep's failure", r.State, r.BlockedBy, r.NotNeeded)
		}
		_, err := h.Retry([]string{"spare"})
		var te *task.Error
		if !errors.Is(err, ErrNotRetryable) || !errors.As(err, &te) || te.Reason != "it is not needed: it depends on ok (on its failure), which is complete" {
			t.Errorf("Retry(spare) = %v, want it refused as not needed", err)
		}
		// both is not needed whatever prep does now: taken up with prep,
		// it stays blocked, as not needed.
		got, err := h.Retry([]string{"prep"})
		if err != nil || !slices.Equal(got, []string{"prep", "report"}) {
			t.Fatalf("Retry(prep) = %v, %v; want [prep report]", got, err)
		}
		recs = h.run(t)
		if recs["prep"].State != task.Complete || recs["report"].State != task.Complete || recs["cleanup"].State != task.Complete {
			t.Errorf("after the retry: prep %s, report %s, cleanup %s", recs["prep"].State, recs["report"].State, recs["cleanup"].State)
		}
		if n := len(recs["cleanup"].Attempts); n != 1 {
			t.Errorf("cleanup ran %d times, want once", n)
		}
		if r := recs["both"]; r.State != task.Blocked || !r.NotNeeded || r.BlockedBy != "ok" || len(r.Attempts) != 0 {
			t.Errorf("both: %s by %q, not needed %v, %d attempts", r.State, r.BlockedBy, r.NotNeeded, len(r.Attempts))
		}
	})
}

// A task submitted after its dependency was retired from memory is judged
// by the dependency's stored end, not-needed flag included.
func TestConditionOnRetiredTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Retire: true}, nil)
		defer h.Close()
		h.runner.script["bad"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("good"), spec("bad"), on(spec("spare", "good"), task.AfterFailure, "good"))
		h.run(t)
		if got := inMemory(t, h.Engine); len(got) != 0 {
			t.Fatalf("in memory: %v, want all retired", got)
		}
		h.mustSubmit(t, on(spec("clean-good", "good"), task.AfterFailure, "good"),
			on(spec("clean-bad", "bad"), task.AfterFailure, "bad"),
			spec("after-spare", "spare"),
			on(spec("any-spare", "spare"), task.AfterAny, "spare"))
		h.run(t)
		recs := map[string]store.Row{} // retired again: read from the store
		for _, id := range []string{"clean-good", "clean-bad", "after-spare", "any-spare"} {
			recs[id], _, _ = h.store.LookupTask(id)
		}
		if r := recs["clean-good"]; r.State != task.Blocked || !r.NotNeeded || r.BlockedBy != "good" {
			t.Errorf("clean-good: %s by %q, not needed %v", r.State, r.BlockedBy, r.NotNeeded)
		}
		if r := recs["clean-bad"]; r.State != task.Complete {
			t.Errorf("clean-bad: %s, want complete", r.State)
		}
		if r := recs["after-spare"]; r.State != task.Blocked || !r.NotNeeded || r.BlockedBy != "good" {
			t.Errorf("after-spare: %s by %q, not needed %v; want not needed, by good", r.State, r.BlockedBy, r.NotNeeded)
		}
		if r := recs["any-spare"]; r.State != task.Complete {
			t.Errorf("any-spare: %s, want complete", r.State)
		}
	})
}

// A task waiting with on: any for a task that failed waits again for it
// when it is retried, and starts only after its new end.
func TestRetryOfATaskAnAggregateCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4}, nil)
		defer h.Close()
		h.runner.script["t1"] = []step{{dur: time.Second, exit: 1}, {dur: 10 * time.Second}}
		h.runner.script["t2"] = []step{{dur: 5 * time.Second}}
		h.mustSubmit(t, spec("t1"), spec("t2"), on(spec("agg", "t1", "t2"), task.AfterAny, "t1", "t2"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(2 * time.Second) // t1 failed; agg waits for t2 alone
		checkWait(t, h, "agg", task.WaitDependencies, "t2 (any outcome)")
		if got, err := h.Retry([]string{"t1"}); err != nil || !slices.Equal(got, []string{"t1"}) {
			t.Fatalf("Retry(t1) = %v, %v", got, err)
		}
		checkWait(t, h, "agg", task.WaitDependencies, "t1 (any outcome), t2 (any outcome)")
		recs := mustWait(t, h.Engine, "agg", "t1")
		agg, t1 := recs["agg"], recs["t1"]
		if agg.State != task.Complete || t1.State != task.Complete || agg.Attempts[0].Start.Before(t1.Attempts[1].End) {
			t.Errorf("agg %s, started %v; t1 %s, its second attempt ended %v", agg.State, agg.Attempts[0].Start, t1.State, t1.Attempts[1].End)
		}
	})
}
