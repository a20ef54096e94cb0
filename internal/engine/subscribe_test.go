package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// drain reads a subscription's events until its channel is closed.
func drain(s *Subscription) []Event {
	var out []Event
	for ev := range s.C() {
		out = append(out, ev)
	}
	return out
}

func describe(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d %s %s", ev.Seq, ev.Kind, ev.TaskID))
	}
	return out
}

// A subscriber that does not read is dropped when its buffer is full; the
// loop goes on, and a subscriber with room gets every event, numbered
// without gaps, in the order the observer saw them.
func TestSlowSubscriberIsDroppedFastOneGetsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		defer h.Close()
		fast, err := h.Subscribe(0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := h.Subscribe(0, 3)
		if err != nil {
			t.Fatal(err)
		}
		h.runner.script["bad"] = []step{{exit: 1}}
		h.mustSubmit(t, spec("a"), spec("b", "a"), spec("bad"), spec("after-bad", "bad"), spec("c"))
		h.run(t) // nobody reads while it runs
		fast.Close()
		got := drain(fast)
		if fast.Err() != nil {
			t.Errorf("fast.Err() after Close = %v, want nil", fast.Err())
		}
		if len(got) != len(h.events) || len(got) < 8 {
			t.Fatalf("fast subscriber got %d events, the observer %d", len(got), len(h.events))
		}
		for i, ev := range got {
			if ev.Seq != uint64(i+1) {
				t.Fatalf("event %d has seq %d: %v", i, ev.Seq, describe(got))
			}
			if h.events[i].Seq != ev.Seq || h.events[i].Kind != ev.Kind || h.events[i].TaskID != ev.TaskID {
				t.Errorf("event %d: subscriber %v, observer %v", i, describe(got[i:i+1]), describe(h.events[i:i+1]))
			}
		}
		head := drain(slow)
		if len(head) != 3 || head[0].Seq != 1 || head[2].Seq != 3 {
			t.Errorf("slow subscriber kept %v, want the first 3 events", describe(head))
		}
		if err := slow.Err(); !errors.Is(err, ErrSlowSubscriber) || !strings.Contains(err.Error(), "3 events unread when event 4 was published") {
			t.Errorf("slow.Err() = %v, want ErrSlowSubscriber saying how far behind", err)
		}
	})
}

// A subscriber resumes after the last event it saw, from the events the
// engine keeps; older ones are refused.
func TestSubscribeResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		if _, err := h.Subscribe(1, 0); !errors.Is(err, ErrNotPublished) {
			t.Errorf("Subscribe(1) before any event = %v, want ErrNotPublished", err)
		}
		h.mustSubmit(t, spec("a"), spec("b", "a"))
		h.run(t) // 4 events
		sub, err := h.Subscribe(2, 2)
		if err != nil {
			t.Fatal(err)
		}
		h.mustSubmit(t, spec("c"))
		h.run(t) // 2 more
		sub.Close()
		want := []string{"3 started b", "4 complete b", "5 started c", "6 complete c"}
		if got := describe(drain(sub)); !slices.Equal(got, want) || sub.Err() != nil {
			t.Errorf("resumed after 2: %v (%v), want %v: the replay and a buffer of 2", got, sub.Err(), want)
		}
		if _, err := h.Subscribe(7, 0); !errors.Is(err, ErrNotPublished) {
			t.Errorf("Subscribe(7) with 6 published = %v, want ErrNotPublished", err)
		}
		sub, err = h.Subscribe(6, 0)
		if err != nil {
			t.Fatal(err)
		}
		sub.Close()
		if got := drain(sub); len(got) != 0 {
			t.Errorf("resumed after the last event: %v, want nothing", describe(got))
		}

		// A failure that blocks EventHistory tasks pushes the first events out.
		root := spec("root")
		batch := []*task.Spec{root}
		for i := range EventHistory {
			batch = append(batch, spec(fmt.Sprint("d", i), "root"))
		}
		h.runner.script["root"] = []step{{exit: 1}}
		h.mustSubmit(t, batch...)
		h.run(t)
		last := uint64(6 + 2 + EventHistory)
		oldest := last - EventHistory + 1
		if _, err := h.Subscribe(oldest-2, 0); !errors.Is(err, ErrTooOld) {
			t.Errorf("Subscribe(%d) with %d..%d kept = %v, want ErrTooOld", oldest-2, oldest, last, err)
		}
		sub, err = h.Subscribe(oldest-1, 0)
		if err != nil {
			t.Fatalf("Subscribe(%d), the event before the oldest kept: %v", oldest-1, err)
		}
		sub.Close()
		got := drain(sub)
		if len(got) != EventHistory || got[0].Seq != oldest || got[len(got)-1].Seq != last || got[len(got)-1].Kind != TaskBlocked {
			t.Errorf("replayed %d events, %v ... %v; want %d..%d", len(got), describe(got[:1]), describe(got[len(got)-1:]), oldest, last)
		}
	})
}

// Close ends every subscription, saying so.
func TestSubscriptionsEndWithTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		sub, err := h.Subscribe(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan []Event)
		go func() { done <- drain(sub) }()
		h.mustSubmit(t, spec("a"))
		h.run(t)
		time.Sleep(time.Second)
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if got := <-done; len(got) != 2 {
			t.Errorf("got %v, want the 2 events of a", describe(got))
		}
		if !errors.Is(sub.Err(), ErrClosed) {
			t.Errorf("Err() = %v, want ErrClosed", sub.Err())
		}
		sub.Close() // harmless
		if _, err := h.Subscribe(0, 0); !errors.Is(err, ErrClosed) {
			t.Errorf("Subscribe after Close = %v", err)
		}
	})
}
