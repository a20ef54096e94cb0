package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// checkWait checks task id's reason as the engine answers it (Waiting and
// Records) and as the store holds it. kind NotWaiting: not pending.
// detail is a part the detail must contain ("" checks nothing).
func checkWait(t *testing.T, h *harness, id string, kind task.WaitKind, detail string) {
	t.Helper()
	synctest.Wait()
	got, ok := h.Waiting(id)[id]
	if kind == task.NotWaiting {
		if ok {
			t.Errorf("%s waits (%s: %q); want it not pending", id, got.Kind, got.Detail)
		}
	} else if !ok || got.Kind != kind || !strings.Contains(got.Detail, detail) {
		t.Errorf("%s waits %q: %q (in Waiting: %v); want %q with %q", id, got.Kind, got.Detail, ok, kind, detail)
	}
	for _, r := range h.Records() {
		if r.ID == id && r.Waiting != got {
			t.Errorf("%s: Records says %+v, Waiting %+v", id, r.Waiting, got)
		}
	}
	r, _, _ := h.store.LookupTask(id)
	if r.Waiting.Kind != kind || !strings.Contains(r.Waiting.Detail, detail) {
		t.Errorf("%s: the store says %q: %q; want %q with %q", id, r.Waiting.Kind, r.Waiting.Detail, kind, detail)
	}
}

// A task waits for its dependencies, named in its reason; then for a free
// slot; running, it waits for nothing. The store says the same: the
// reason written at submit, then each change.
func TestWaitingForDependenciesThenASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		h.runner.script["a"] = []step{{dur: 10 * time.Second}}
		h.runner.script["b"] = []step{{dur: 10 * time.Second}}
		h.runner.script["d"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, spec("a"), spec("b"), spec("d"), spec("c", "a", "b"))
		// Before any Run, what submit wrote.
		checkWait(t, h, "c", task.WaitDependencies, "a, b")
		checkWait(t, h, "d", task.WaitSlot, "")
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second) // a runs; b and d wait for the one slot
		checkWait(t, h, "a", task.NotWaiting, "")
		checkWait(t, h, "b", task.WaitSlot, "")
		checkWait(t, h, "c", task.WaitDependencies, "a, b")
		time.Sleep(10 * time.Second) // a completed, b runs: c waits for b only
		checkWait(t, h, "c", task.WaitDependencies, "b")
		if w := h.Waiting("c")["c"]; w.Detail != "b" {
			t.Errorf("c's detail = %q, want b", w.Detail)
		}
		time.Sleep(10 * time.Second) // b completed: c is ready, d (before it in the queue) runs
		checkWait(t, h, "c", task.WaitSlot, "")
		if got := h.Waiting(); len(got) != 1 {
			t.Errorf("Waiting() = %v, want c only (d runs)", got)
		}
	})
}

// A task with many dependencies names the first ten unfinished ones and
// counts the rest; as they complete, the engine answers afresh at once,
// and the store follows within refreshEvery.
func TestWaitingNamesTenDependenciesAndCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		var specs []*task.Spec
		var deps []string
		for i := range 12 {
			id := fmt.Sprint("p", i)
			h.runner.script[id] = []step{{dur: 100 * time.Millisecond}}
			specs = append(specs, spec(id))
			deps = append(deps, id)
		}
		h.mustSubmit(t, append(specs, spec("join", deps...))...)
		checkWait(t, h, "join", task.WaitDependencies, "p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 and 2 more")
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(450 * time.Millisecond) // p0..p3 complete, p4 runs
		synctest.Wait()
		want := "p4, p5, p6, p7, p8, p9, p10, p11"
		if w := h.Waiting("join")["join"]; w.Detail != want {
			t.Errorf("join's detail from the engine = %q, want %q", w.Detail, want)
		}
		time.Sleep(refreshEvery - 100*time.Millisecond) // p4..p11 complete meanwhile
		checkWait(t, h, "join", task.NotWaiting, "")    // it runs
		rows, _ := h.store.Load()
		for _, r := range rows {
			if r.Waiting.Waiting() {
				t.Errorf("%s (%s) still has a reason in the store: %+v", r.ID, r.State, r.Waiting)
			}
		}
	})
}

// The store's detail of a task waiting for dependencies is rewritten at
// most every refreshEvery, however fast they complete; the engine's answer
// is always current.
func TestWaitingDependenciesDetailIsThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		var specs []*task.Spec
		var deps []string
		for i := range 5 {
			id := fmt.Sprint("p", i)
			h.runner.script[id] = []step{{dur: 100 * time.Millisecond}}
			specs = append(specs, spec(id))
			deps = append(deps, id)
		}
		h.runner.script["p4"] = []step{{block: true}}
		h.mustSubmit(t, append(specs, spec("join", deps...))...)
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(150 * time.Millisecond) // p0 completed: written at once, the first change
		synctest.Wait()
		if r, _, _ := h.store.LookupTask("join"); r.Waiting.Detail != "p1, p2, p3, p4" {
			t.Errorf("store after p0: %q", r.Waiting.Detail)
		}
		time.Sleep(200 * time.Millisecond) // p1, p2 completed: not written yet
		synctest.Wait()
		if r, _, _ := h.store.LookupTask("join"); r.Waiting.Detail != "p1, p2, p3, p4" {
			t.Errorf("store 0.35s in: %q, want the detail of 0.15s (refreshed at most every %v)", r.Waiting.Detail, refreshEvery)
		}
		if w := h.Waiting("join")["join"]; w.Detail != "p3, p4" {
			t.Errorf("engine 0.35s in: %q, want p3, p4", w.Detail)
		}
		time.Sleep(refreshEvery) // p3 completed too; p4 runs on
		checkWait(t, h, "join", task.WaitDependencies, "p4")
		if r, _, _ := h.store.LookupTask("join"); r.Waiting.Detail != "p4" {
			t.Errorf("store after the refresh: %q, want p4", r.Waiting.Detail)
		}
	})
}

// A task waiting out its retry delay says until when and after what; one
// backing off after a fault of the environment says so.
func TestWaitingForARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2, DefaultRetries: 2, DefaultRetryDelay: 10 * time.Second}, nil)
		defer h.Close()
		h.runner.script["flaky"] = []step{{exit: 3}, {}}
		fault := fmt.Errorf("open log: too many open files: %w", executor.ErrEnvironment)
		h.runner.script["unlucky"] = []step{{fault: fault}, {}}
		h.mustSubmit(t, spec("flaky"), spec("unlucky"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(500 * time.Millisecond) // unlucky could not start: it backs off 1s
		checkWait(t, h, "unlucky", task.WaitBackoff, "too many open files")
		if got := h.Waiting("unlucky")["unlucky"].Text(time.Time{}); !strings.Contains(got, "; not counted against its retries: open log: too many open files") {
			t.Errorf("unlucky's text = %q", got)
		}
		time.Sleep(1500 * time.Millisecond) // flaky failed after 1s
		checkWait(t, h, "flaky", task.WaitRetryDelay, "exit code 3")
		w := h.Waiting("flaky")["flaky"]
		r, _, _ := h.store.LookupTask("flaky")
		if w.Until.IsZero() || !w.Until.Equal(r.RetryAt) || !r.Waiting.Until.Equal(r.RetryAt) {
			t.Errorf("flaky waits until %v; its retry is at %v, the store's reason until %v", w.Until, r.RetryAt, r.Waiting.Until)
		}
		if got := w.Text(w.Until.Add(-3 * time.Second)); !strings.HasPrefix(got, "retry at ") || !strings.Contains(got, "(in 3s) after: exit code 3") {
			t.Errorf("flaky's text = %q", got)
		}
		time.Sleep(15 * time.Second)
		checkWait(t, h, "flaky", task.NotWaiting, "")
		checkWait(t, h, "unlucky", task.NotWaiting, "")
	})
}

// GPU tasks: one that no card has room for says what it needs and what
// the best card has left; when the GPUs cannot be read, it says why.
func TestWaitingForGPUMemoryAndUnknownState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500) // capacity 40000 with the margin
		h := newGPUHarness(t, probe, Config{MaxParallel: 4})
		defer h.Close()
		h.runner.script["hog"] = []step{{dur: time.Minute}}
		h.mustSubmit(t, gspec("hog", 30000))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		h.mustSubmit(t, gspec("waiter", 20000))
		time.Sleep(time.Second)
		checkWait(t, h, "waiter", task.WaitGPUMemory, "needs 20000 MiB; best card 0 has 10000 MiB left (foreign 0, hog holds 30000)")

		probe.set(func(p *fakeProbe) { p.err = errors.New("nvidia-smi timed out after 10s") })
		time.Sleep(3 * time.Second) // the next reading fails
		checkWait(t, h, "waiter", task.WaitGPUUnknown, "nvidia-smi timed out after 10s")
		if got := h.Waiting("waiter")["waiter"].Text(time.Time{}); !strings.HasPrefix(got, "GPU state unknown: nvidia-smi timed out") {
			t.Errorf("text = %q", got)
		}
		probe.set(func(p *fakeProbe) { p.err = nil })
		time.Sleep(3 * time.Second)
		checkWait(t, h, "waiter", task.WaitGPUMemory, "best card 0 has 10000 MiB left")
		time.Sleep(time.Minute) // hog ends; waiter runs
		checkWait(t, h, "waiter", task.NotWaiting, "")
	})
}

// The detail of a GPU task's reason follows the cards: memory taken by
// another process shows at the next readings.
func TestWaitingGPUDetailFollowsTheCards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 4})
		defer h.Close()
		h.runner.script["hog"] = []step{{dur: time.Hour}}
		h.mustSubmit(t, gspec("hog", 30000))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		h.mustSubmit(t, gspec("waiter", 20000))
		time.Sleep(time.Second)
		checkWait(t, h, "waiter", task.WaitGPUMemory, "(foreign 0, hog holds 30000)")
		probe.set(func(p *fakeProbe) { p.foreign[0] = 4000 })
		time.Sleep(5 * time.Second)
		checkWait(t, h, "waiter", task.WaitGPUMemory, "best card 0 has 6000 MiB left (foreign 4000, hog holds 30000)")
	})
}

// A task that would fit on a card reserved for a starving task waits for
// that reservation.
func TestWaitingForACardReservedForAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 4, GPU: GPUConfig{ReserveAfter: 5 * time.Second}})
		defer h.Close()
		h.runner.script["running"] = []step{{dur: time.Hour}}
		h.mustSubmit(t, gspec("running", 25000), gspec("big", 30000))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(10 * time.Second) // big starves: card 0 is reserved for it
		checkWait(t, h, "big", task.WaitGPUMemory, "needs 30000 MiB")
		h.mustSubmit(t, gspec("small", 10000)) // 15000 left: it would fit
		time.Sleep(time.Second)
		checkWait(t, h, "small", task.WaitCardReserved, "card 0 is reserved for big")
	})
}

// A task that would fit on a card cooling down after a task left it waits
// for the card, and starts once the cooldown is over.
func TestWaitingForACardCoolingDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500) // cooldown 3s (gpuSettings)
		h := newGPUHarness(t, probe, Config{MaxParallel: 4})
		defer h.Close()
		h.runner.script["first"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, gspec("first", 30000), gspec("second", 20000))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(5 * time.Second)
		checkWait(t, h, "second", task.WaitGPUMemory, "needs 20000 MiB")
		time.Sleep(6 * time.Second) // first ended at 10s: the card cools until 13s
		checkWait(t, h, "second", task.WaitCardUnavailable, "card 0 cooling down")
		if got := h.Waiting("second")["second"].Text(time.Time{}); !strings.Contains(got, "cooling down") {
			t.Errorf("text = %q", got)
		}
		time.Sleep(3 * time.Second)
		checkWait(t, h, "second", task.NotWaiting, "")
	})
}

// A scheduler that opens a store forgets the reasons an earlier one saved:
// it has decided nothing yet, and a task no longer submitted must not
// show a stale reason.
func TestOpenForgetsEarlierReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.mustSubmit(t, spec("a"), spec("b", "a"))
		h.Close()
		if r, _, _ := st.LookupTask("b"); r.Waiting.Kind != task.WaitDependencies {
			t.Fatalf("b after submit: %+v", r.Waiting)
		}
		h2 := newHarness(t, Config{}, st)
		defer h2.Close()
		for _, id := range []string{"a", "b"} {
			if r, _, _ := st.LookupTask(id); r.Waiting.Waiting() || r.State != task.Pending {
				t.Errorf("%s after a new engine opened: %s, waiting %+v", id, r.State, r.Waiting)
			}
		}
	})
}

// When the cards change under hundreds of waiting GPU tasks, their saved
// details follow refreshBatch at a time, at most every refreshEvery: never
// all of them in one commit.
func TestWaitingGPUDetailsAreThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 1000})
		defer h.Close()
		h.runner.script["hog"] = []step{{dur: time.Hour}}
		h.mustSubmit(t, gspec("hog", 30000))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		const n = refreshBatch + 88
		var specs []*task.Spec
		for i := range n {
			specs = append(specs, gspec(fmt.Sprint("w", i), 20000))
		}
		h.mustSubmit(t, specs...)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		updated := func() (k int) {
			rows, _ := h.store.Load()
			for _, r := range rows {
				if r.Waiting.Kind == task.WaitGPUMemory && strings.Contains(r.Waiting.Detail, "(foreign 4000, hog holds 30000)") {
					k++
				}
			}
			return k
		}
		probe.set(func(p *fakeProbe) { p.foreign[0] = 4000 })
		var seen []int
		for range 100 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if k := updated(); len(seen) == 0 || k != seen[len(seen)-1] {
				seen = append(seen, k)
			}
		}
		if len(seen) < 3 || seen[len(seen)-1] != n {
			t.Fatalf("tasks with the new detail in the store, as it changed: %v; want 0, then %d at most at a time, up to %d", seen, refreshBatch, n)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i]-seen[i-1] > refreshBatch {
				t.Errorf("%d details written at once (%v); at most %d", seen[i]-seen[i-1], seen, refreshBatch)
			}
		}
		if w := h.Waiting("w0")["w0"]; !strings.Contains(w.Detail, "foreign 4000") {
			t.Errorf("w0 waits %+v", w)
		}
	})
}

// While every slot is taken no decision looks at a ready GPU task; its
// reason still follows the cards: a slot while it would fit, the GPU
// memory while it would not (a free slot would not start it then).
func TestWaitingGPUTaskBehindFullSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 1})
		defer h.Close()
		h.runner.script["busy"] = []step{{dur: time.Hour}}
		h.mustSubmit(t, spec("busy"), gspec("g", 20000))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(5 * time.Second)
		checkWait(t, h, "g", task.WaitSlot, "")
		probe.set(func(p *fakeProbe) { p.foreign[0] = 30000 })
		time.Sleep(5 * time.Second)
		checkWait(t, h, "g", task.WaitGPUMemory, "needs 20000 MiB; best card 0 has 10000 MiB left (foreign 30000)")
		probe.set(func(p *fakeProbe) { p.foreign[0] = 0 })
		time.Sleep(5 * time.Second)
		checkWait(t, h, "g", task.WaitSlot, "")
	})
}

// clears records, for every batch applied, what it does to saved waiting
// reasons.
type clears struct {
	store.Store
	batches []clearing
}

type clearing struct {
	all    bool     // ClearWaiting
	of     []string // ClearWaitingOf
	mark   string   // MetaWaitingStale's value; "-" when the batch leaves it
	writes int      // task writes
}

func (c *clears) Apply(b *store.Batch) error {
	mark, ok := b.Meta[store.MetaWaitingStale]
	if !ok {
		mark = "-"
	}
	c.batches = append(c.batches, clearing{all: b.ClearWaiting, of: slices.Clone(b.ClearWaitingOf), mark: mark, writes: len(b.Tasks)})
	return c.Store.Apply(b)
}

// A scheduler opening a store with reasons an earlier one saved commits at
// Open only that they are stale (a reader sees none from then on: see
// TestOpenForgetsEarlierReasons), and forgets them in its next commit, the
// submission's: only the rows that commit does not write anyway, the tasks
// no longer submitted. The submitted ones hold their new reasons then, and
// the mark is gone.
func TestStaleReasonsForgottenWithTheSubmission(t *testing.T) {
	st := store.NewMemory()
	open := func(w store.Store) *Engine {
		t.Helper()
		e, err := Open(Config{MaxParallel: 1, Store: w, Runner: &fakeRunner{store: st, script: map[string][]step{}}, LogDir: "/logs"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	submit := func(e *Engine, specs ...*task.Spec) {
		t.Helper()
		sub := Submission{Specs: specs}
		for _, s := range specs {
			s.Normalize()
			b, _ := json.Marshal(s)
			sub.JSON = append(sub.JSON, b)
		}
		if err := e.Submit(sub); err != nil {
			t.Fatal(err)
		}
	}
	e := open(keepOpen{st})
	submit(e, spec("a"), spec("b", "a"), spec("gone", "a"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	c := &clears{Store: keepOpen{st}}
	e = open(c)
	defer e.Close()
	if len(c.batches) != 1 || c.batches[0].all || len(c.batches[0].of) != 0 || c.batches[0].mark != "1" || c.batches[0].writes != 0 {
		t.Fatalf("Open's commits: %+v; want one that marks the reasons stale and writes no row", c.batches)
	}
	submit(e, spec("a"), spec("b", "a"))
	if len(c.batches) != 2 {
		t.Fatalf("commits after the submission: %+v; want Open's and the submission's", c.batches)
	}
	if got := c.batches[1]; got.all || !slices.Equal(got.of, []string{"gone"}) || got.mark != "" || got.writes != 2 {
		t.Errorf("the submission's commit: %+v; want a and b written, gone's reason forgotten, the mark removed", got)
	}
	if _, marked, _ := st.LookupMeta(store.MetaWaitingStale); marked {
		t.Error("the stale mark is still saved after the submission's commit")
	}
	for id, want := range map[string]task.WaitKind{"a": task.WaitSlot, "b": task.WaitDependencies, "gone": task.NotWaiting} {
		if r, _, _ := st.LookupTask(id); r.Waiting.Kind != want {
			t.Errorf("%s saved waiting %+v; want kind %v", id, r.Waiting, want)
		}
	}
}

// A scheduler that opened a store and died before its first commit of the
// loop left the reasons marked stale, and hidden: the next one cannot tell
// which rows hold them, and forgets them all with its submission.
func TestStaleMarkLeftByADeadSchedulerForgetsAll(t *testing.T) {
	st := store.NewMemory()
	deps := store.TaskWrite{ID: "old", Seq: 1, Kind: "command", Spec: []byte(`{"id":"old"}`), State: task.Pending, WaitKind: task.WaitDependencies, WaitDetail: "x"}
	if err := st.Apply(&store.Batch{Tasks: []store.TaskWrite{deps}, Meta: map[string]string{store.MetaWaitingStale: "1"}}); err != nil {
		t.Fatal(err)
	}
	c := &clears{Store: keepOpen{st}}
	e, err := Open(Config{MaxParallel: 1, Store: c, Runner: &fakeRunner{store: st, script: map[string][]step{}}, LogDir: "/logs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.batches); n == 0 || !c.batches[n-1].all || c.batches[n-1].mark != "" {
		t.Fatalf("commits: %+v; want the last to forget every reason and remove the mark", c.batches)
	}
	for _, b := range c.batches[:len(c.batches)-1] {
		if b.mark == "1" {
			t.Errorf("the mark was set again: %+v", c.batches)
		}
	}
	if _, marked, _ := st.LookupMeta(store.MetaWaitingStale); marked {
		t.Error("the stale mark is still saved")
	}
}
