package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// kindDeliveries records every delivery as "kind:task#event" and fails
// those of the kinds in fail, that many times (-1: always).
type kindDeliveries struct {
	mu    sync.Mutex
	got   []string
	items []Delivery
	fail  map[string]int
	block map[string]chan struct{} // by kind: deliveries wait for it (or their context)
}

func (d *kindDeliveries) deliver(ctx context.Context, dl Delivery) error {
	d.mu.Lock()
	block := d.block[dl.Kind]
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, fmt.Sprintf("%s:%s#%d", dl.Kind, dl.TaskID, dl.EventID))
	d.items = append(d.items, dl)
	if n := d.fail[dl.Kind]; n != 0 {
		d.fail[dl.Kind] = n - 1
		return errors.New(dl.Kind + " down")
	}
	return nil
}

func (d *kindDeliveries) delivered() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

// handlerDeliveries returns the deliveries of the handlers' lane, in
// order (the webhooks' lane goes its own pace).
func handlerDeliveries(got []string) []string {
	var out []string
	for _, g := range got {
		if !strings.HasPrefix(g, "webhook:") {
			out = append(out, g)
		}
	}
	return out
}

// noticeConfig asks for a failure event and a webhook event on each task
// failed for good, and a run-end event at each run's end, with payloads
// that say what they were made from.
func noticeConfig(d *kindDeliveries, ends *[]RunEnd) Config {
	return Config{
		Deliver: d.deliver,
		Notices: func(ev Event, sp *task.Spec, rec *task.Record) []Notice {
			if ev.Kind != Failed {
				return nil
			}
			if sp == nil || sp.ID != ev.TaskID || rec == nil || rec.ID != ev.TaskID || rec.State != task.Failed {
				panic(fmt.Sprintf("Notices got the definition %+v and record %+v for %s", sp, rec, ev.TaskID))
			}
			p := []byte(fmt.Sprintf(`{"attempts":%d,"error":%q}`, ev.Attempt.Number, ev.Attempt.Error))
			return []Notice{{Kind: store.EventFailure, Payload: p}, {Kind: store.EventWebhook, Payload: p}}
		},
		RunEnded: func(end RunEnd) []Notice {
			*ends = append(*ends, end)
			return []Notice{{Kind: store.EventRunEnd, Payload: []byte(fmt.Sprintf(`{"tasks":%d}`, len(end.Records)))}}
		},
	}
}

// A task that fails for good gets its failure event written in the same
// transaction as the failure; the scheduler is stopped while the event is
// delivered (as a kill between the commit and the handler's end would),
// and the next scheduler on the store delivers it, with its payload and
// the task's definition.
func TestFailureEventSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		var ends []RunEnd
		d := &kindDeliveries{block: map[string]chan struct{}{store.EventFailure: make(chan struct{})}}
		cfg := noticeConfig(d, &ends)
		cfg.DefaultRetries = 1
		var eventsAtFailure []store.EventWrite
		h := newHarness(t, cfg, st)
		observe := h.Engine.cfg.Observer
		h.Engine.cfg.Observer = func(ev Event) {
			if ev.Kind == Failed {
				eventsAtFailure = st.Events() // the commit that wrote the failure is done
			}
			observe(ev)
		}
		h.runner.script["bad"] = []step{{exit: 3}}
		bad := spec("bad")
		bad.OnFailure = []string{"notify"}
		h.mustSubmit(t, bad)
		done := make(chan struct{})
		go func() { h.Run(context.Background()); close(done) }()
		synctest.Wait() // bad failed twice; its failure event's delivery hangs
		// (The run's end, in the same turn of the loop, may be there too.)
		if len(eventsAtFailure) < 2 || eventsAtFailure[0].Kind != store.EventFailure || eventsAtFailure[1].Kind != store.EventWebhook {
			t.Errorf("events stored when the failure was committed: %+v; want its failure and webhook events", eventsAtFailure)
		}
		if got := d.delivered(); !slices.Equal(got, []string{"webhook:bad#2"}) {
			t.Errorf("delivered while the failure handler hangs: %v; want the webhook (its own lane) only", got)
		}
		h.Close()
		<-done
		evs := st.Events()
		if !evs[0].Acked.IsZero() || evs[1].Acked.IsZero() || !evs[2].Acked.IsZero() {
			t.Fatalf("after the stop: %+v; want the failure event and the run's end pending, the webhook's delivered", evs)
		}

		d2 := &kindDeliveries{}
		cfg2 := noticeConfig(d2, &ends)
		h2 := newHarness(t, cfg2, st)
		defer h2.Close()
		h2.run(t) // nothing to run: the owed events, then this run's end
		if got := d2.delivered(); !slices.Equal(got, []string{"failure:bad#1", "run-end:#3", "run-end:#4"}) {
			t.Fatalf("after restart, delivered %v; want the failure event once, the first run's end, this run's", got)
		}
		dl := d2.items[0]
		if dl.Spec == nil || dl.Spec.ID != "bad" || !slices.Equal(dl.Spec.OnFailure, []string{"notify"}) ||
			string(dl.Payload) != `{"attempts":2,"error":"exit code 3"}` || dl.Attempt != 2 {
			t.Errorf("redelivered %+v (spec %+v)", dl, dl.Spec)
		}
		if n := h2.EventsPending(); n != 0 {
			t.Errorf("EventsPending = %d after the redelivery", n)
		}
	})
}

// A webhook that keeps failing does not hold back the handlers' events:
// the completion behind it is delivered at once. It is retried with
// backoff and given up after WebhookTries failures counted across runs,
// reported as such.
func TestWebhookLaneAndGivingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		var ends []RunEnd
		d := &kindDeliveries{fail: map[string]int{store.EventWebhook: -1}}
		cfg := noticeConfig(d, &ends)
		cfg.WantsEvent = func(*task.Spec) bool { return true }
		cfg.MaxParallel = 1
		h := newHarness(t, cfg, st)
		h.runner.script["bad"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("bad"), spec("good"))
		h.run(t)
		got := d.delivered()
		webhooks, lastWebhook := 0, 0
		for i, g := range got {
			if strings.HasPrefix(g, "webhook:") {
				webhooks, lastWebhook = webhooks+1, i
			}
		}
		if handlers, want := handlerDeliveries(got), []string{"failure:bad#1", "complete:good#3", "run-end:#4"}; !slices.Equal(handlers, want) {
			t.Errorf("handlers' deliveries = %v, want %v", handlers, want)
		}
		if webhooks != maxTriesBeforeRunEnds || slices.Index(got, "run-end:#4") > lastWebhook {
			t.Errorf("deliveries = %v; want the webhook tried %d times, the handlers' events delivered while it still failed",
				got, maxTriesBeforeRunEnds)
		}
		h.Close()
		evs := st.Events()
		if evs[1].Tries != maxTriesBeforeRunEnds || !evs[1].Acked.IsZero() || evs[1].GaveUp {
			t.Fatalf("webhook after the first run: %+v; want pending after %d tries", evs[1], maxTriesBeforeRunEnds)
		}

		// Later runs go on trying it, and give it up at WebhookTries.
		var gaveUp []Event
		for run := 0; len(gaveUp) == 0 && run < 5; run++ {
			h := newHarness(t, noticeConfig(d, &ends), st)
			h.run(t)
			for _, ev := range h.events {
				if ev.Kind == DeliveryFailed && ev.GaveUp {
					gaveUp = append(gaveUp, ev)
				}
			}
			h.Close()
		}
		evs = st.Events()
		if evs[1].Tries != WebhookTries || evs[1].Acked.IsZero() || !evs[1].GaveUp || evs[1].LastError != "webhook down" {
			t.Errorf("webhook event at the end: %+v; want given up after %d tries", evs[1], WebhookTries)
		}
		if len(gaveUp) != 1 || gaveUp[0].TaskID != "bad" || gaveUp[0].Notification != store.EventWebhook ||
			gaveUp[0].Error != fmt.Sprintf("webhook event 2, try %d: webhook down; given up after %d tries", WebhookTries, WebhookTries) {
			t.Errorf("reported: %+v", gaveUp)
		}
	})
}

// The end of a Run is told once, with every record, after the tasks'
// own events, and Run returns only once it is delivered. A Run stopped by
// its context says so, and still waits for the delivery.
func TestRunEndDeliveredBeforeRunReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		var ends []RunEnd
		d := &kindDeliveries{fail: map[string]int{store.EventRunEnd: 1}}
		h := newHarness(t, noticeConfig(d, &ends), st)
		defer h.Close()
		h.runner.script["bad"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("bad"), spec("after", "bad"), spec("good"))
		start := time.Now()
		h.run(t)
		if len(ends) != 1 || len(ends[0].Records) != 3 || ends[0].Stopped != nil || !ends[0].Started.Equal(start) {
			t.Fatalf("RunEnded told %+v; want once, three records, not stopped, started %v", ends, start)
		}
		got := d.delivered()
		if want := []string{"failure:bad#1", "run-end:#3", "run-end:#3"}; !slices.Equal(handlerDeliveries(got), want) || !slices.Contains(got, "webhook:bad#2") {
			t.Errorf("deliveries before Run returned = %v, want the webhook's and %v (the failed run-end retried)", got, want)
		}
		if evs := st.Events(); len(evs) != 3 || evs[2].Acked.IsZero() || evs[2].TaskID != "" || string(evs[2].Payload) != `{"tasks":3}` {
			t.Errorf("stored events = %+v", evs)
		}

		// Stopped: the running task is cancelled, the pending one stays,
		// and the end is still delivered before Run returns.
		h.runner.script["slow"] = []step{{block: true}}
		h.mustSubmit(t, spec("slow"), spec("later", "slow"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := h.Run(ctx); done <- err }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped Run returned %v", err)
		}
		if len(ends) != 2 || !errors.Is(ends[1].Stopped, context.Canceled) {
			t.Fatalf("second run's end: %+v; want stopped by its context", ends[1:])
		}
		if got := d.delivered(); got[len(got)-1] != "run-end:#4" {
			t.Errorf("deliveries = %v; want the stopped run's end delivered before Run returned", got)
		}
	})
}

// After StopNow a stopping Run does not wait for its end's delivery: the
// event stays owed, for the next scheduler.
func TestStopNowDoesNotWaitForTheRunEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		var ends []RunEnd
		d := &kindDeliveries{block: map[string]chan struct{}{store.EventRunEnd: make(chan struct{})}}
		h := newHarness(t, noticeConfig(d, &ends), st)
		h.runner.script["slow"] = []step{{block: true}}
		h.mustSubmit(t, spec("slow"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := h.Run(ctx); done <- err }()
		synctest.Wait()
		cancel()
		synctest.Wait() // the end's delivery hangs; Run waits for it
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) while its end was being delivered", err)
		default:
		}
		h.StopNow()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
		h.Close()
		evs := st.Events()
		if len(evs) != 1 || evs[0].Kind != store.EventRunEnd || !evs[0].Acked.IsZero() {
			t.Errorf("events = %+v; want the run's end owed", evs)
		}
	})
}
