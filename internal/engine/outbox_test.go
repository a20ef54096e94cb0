package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// deliveries records what Deliver was handed and fails on demand.
type deliveries struct {
	mu     sync.Mutex
	got    []string // "task#event@time"
	fail   map[string]int
	failed []int64
	block  chan struct{}
}

func (d *deliveries) deliver(ctx context.Context, dl Delivery) error {
	if d.block != nil {
		select {
		case <-d.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, fmt.Sprintf("%s#%d", dl.TaskID, dl.EventID))
	if d.fail[dl.TaskID] > 0 {
		d.fail[dl.TaskID]--
		d.failed = append(d.failed, dl.EventID)
		return errors.New("handler down")
	}
	return nil
}

func eventHarness(t *testing.T, st *store.Memory, d *deliveries, cfg Config) *harness {
	t.Helper()
	cfg.WantsEvent = func(s *task.Spec) bool { return s.ID != "quiet" }
	cfg.Deliver = d.deliver
	return newHarness(t, cfg, st)
}

func TestCompletionEventsDeliveredInOrderAndAcked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		d := &deliveries{fail: map[string]int{"a": 2}}
		h := eventHarness(t, st, d, Config{MaxParallel: 1})
		defer h.Close()
		h.mustSubmit(t, spec("a"), spec("quiet"), spec("b"))
		start := time.Now()
		recs := h.run(t)
		for id, r := range recs {
			if r.State != task.Complete {
				t.Errorf("%s: %s", id, r.State)
			}
		}
		// a's event fails twice (retried after 1s, then 2s), and b's waits
		// behind it: order holds.
		want := []string{"a#1", "a#1", "a#1", "b#2"}
		if !slices.Equal(d.got, want) {
			t.Errorf("deliveries = %v, want %v", d.got, want)
		}
		if took := time.Since(start); took < 3*time.Second {
			t.Errorf("Run returned after %v, before the retries (1s + 2s backoff) were done", took)
		}
		evs := st.Events()
		if len(evs) != 2 || evs[0].Acked.IsZero() || evs[1].Acked.IsZero() || evs[0].Tries != 2 || evs[0].LastError != "handler down" {
			t.Errorf("stored events = %+v", evs)
		}
	})
}

func TestEventWrittenWithTheCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		d := &deliveries{block: make(chan struct{})}
		h := eventHarness(t, st, d, Config{})
		h.mustSubmit(t, spec("a"))
		done := make(chan struct{})
		go func() { h.Run(context.Background()); close(done) }()
		time.Sleep(5 * time.Second) // a completed, its delivery hangs
		rows, _ := st.Load()
		evs := st.Events()
		if rows[0].State != task.Complete || len(evs) != 1 || !evs[0].Acked.IsZero() {
			t.Fatalf("while delivering: task %s, events %+v", rows[0].State, evs)
		}
		if n := h.EventsPending(); n != 1 {
			t.Errorf("while delivering: EventsPending = %d, want 1", n)
		}
		// The scheduler stops before the handler returns: the event stays
		// pending, to be delivered by the next scheduler.
		h.Close()
		<-done
		if evs := st.Events(); !evs[0].Acked.IsZero() {
			t.Fatalf("event acknowledged though its delivery never finished: %+v", evs)
		}

		d2 := &deliveries{}
		h2 := eventHarness(t, st, d2, Config{})
		defer h2.Close()
		h2.mustSubmit(t, spec("a"), spec("b"))
		h2.run(t)
		if want := []string{"a#1", "b#2"}; !slices.Equal(d2.got, want) {
			t.Errorf("after restart, deliveries = %v, want %v (the old event first)", d2.got, want)
		}
		if n := h2.EventsPending(); n != 0 {
			t.Errorf("after both were delivered: EventsPending = %d, want 0", n)
		}
	})
}

func TestRunEndsWithAnEventStillFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		d := &deliveries{fail: map[string]int{"a": 100}}
		h := eventHarness(t, st, d, Config{})
		defer h.Close()
		h.mustSubmit(t, spec("a"))
		h.run(t) // returns: the event failed maxTriesBeforeRunEnds times
		if n := len(d.got); n != maxTriesBeforeRunEnds {
			t.Errorf("delivered %d times before Run ended, want %d", n, maxTriesBeforeRunEnds)
		}
		if evs := st.Events(); !evs[0].Acked.IsZero() || evs[0].Tries != maxTriesBeforeRunEnds {
			t.Errorf("events = %+v", evs)
		}
		h.Close()
		// The next run delivers it at once, whatever backoff was pending.
		d2 := &deliveries{}
		h2 := eventHarness(t, st, d2, Config{})
		defer h2.Close()
		h2.mustSubmit(t, spec("a"))
		start := time.Now()
		h2.run(t)
		if took := time.Since(start); len(d2.got) != 1 || took > 100*time.Millisecond {
			t.Errorf("next run delivered %v after %v, want at once", d2.got, took)
		}
		if evs := st.Events(); evs[0].Acked.IsZero() {
			t.Errorf("event not acknowledged: %+v", evs)
		}
	})
}

func TestResumeVerdictsAndUpstreamReruns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.mustSubmit(t, spec("prepare"), spec("train", "prepare"), spec("evaluate", "train"), spec("other"))
		h.run(t)
		h.Close()

		h2 := newHarness(t, Config{}, st)
		defer h2.Close()
		specs := []*task.Spec{spec("prepare"), spec("train", "prepare"), spec("evaluate", "train"), spec("other")}
		blobs := make([][]byte, len(specs))
		for i, s := range specs {
			s.Normalize()
			blobs[i] = []byte(`{}`)
		}
		resume := []Resume{{Intact: true}, {Why: "artifact missing: out/model.pt"}, {Intact: true}, {Intact: true}}
		if err := h2.Submit(Submission{Specs: specs, JSON: blobs, Resume: resume}); err != nil {
			t.Fatal(err)
		}
		recs := h2.run(t)
		got := h2.runner.startOrder()
		if want := []string{"train#2", "evaluate#2"}; !slices.Equal(got, want) {
			t.Errorf("ran %v, want %v", got, want)
		}
		rows, _ := st.Load()
		why := map[string]string{}
		for _, r := range rows {
			why[r.ID] = r.Rerun
		}
		if why["train"] != "artifact missing: out/model.pt" || why["prepare"] != "" || recs["train"].State != task.Complete {
			t.Errorf("after the run: train %q (%s), prepare %q; want the reasons kept for the run's record", why["train"], recs["train"].State, why["prepare"])
		}
		var events []string
		for _, ev := range h2.events {
			if ev.Kind == Started {
				events = append(events, ev.TaskID+": "+ev.Rerun)
			}
		}
		if want := []string{"train: artifact missing: out/model.pt", "evaluate: upstream train reruns"}; !slices.Equal(events, want) {
			t.Errorf("start events = %q, want %q", events, want)
		}
	})
}

func TestOnFailureCalledOnceWhenRetriesAreSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var calls []string
		h := newHarness(t, Config{DefaultRetries: 2, OnFailure: func(s *task.Spec, r task.Record) {
			mu.Lock()
			calls = append(calls, fmt.Sprintf("%s after %d", s.ID, len(r.Attempts)))
			mu.Unlock()
		}}, nil)
		defer h.Close()
		h.runner.script["bad"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("bad"), spec("good"))
		h.run(t)
		synctest.Wait()
		if want := []string{"bad after 3"}; !slices.Equal(calls, want) {
			t.Errorf("OnFailure calls = %v, want %v", calls, want)
		}
	})
}

// A completion handler that hangs is stopped after DeliverTimeout; the
// delivery counts as failed, is retried, and the run ends.
func TestHangingDeliveryTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		d := &deliveries{block: make(chan struct{})} // never unblocked: every delivery hangs
		h := eventHarness(t, st, d, Config{DeliverTimeout: 30 * time.Second})
		defer h.Close()
		h.mustSubmit(t, spec("a"))
		recs := h.run(t)
		if recs["a"].State != task.Complete {
			t.Errorf("a: %s", recs["a"].State)
		}
		evs := st.Events()
		if len(evs) != 1 || !evs[0].Acked.IsZero() || evs[0].Tries != maxTriesBeforeRunEnds ||
			evs[0].LastError != "completion handler timed out after 30s (it was stopped): context deadline exceeded" {
			t.Errorf("stored events = %+v", evs)
		}
		var failed int
		for _, ev := range h.events {
			if ev.Kind == DeliveryFailed {
				failed++
			}
		}
		if failed != maxTriesBeforeRunEnds {
			t.Errorf("%d event-failed notices, want %d", failed, maxTriesBeforeRunEnds)
		}
	})
}
