package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Delivery is a completion event handed to Config.Deliver.
type Delivery struct {
	EventID int64
	TaskID  string
	Attempt int        // the attempt that completed the task
	Spec    *task.Spec // the definition it completed with
	Tries   int        // failed deliveries before this one
}

// Completion events: the outbox.
//
// A completed task whose kind wants events (Config.WantsEvent) gets an event
// row written in the same transaction as its completion. Events are handed
// to Config.Deliver one at a time, in completion order; an event is
// acknowledged (and written so) only once Deliver returns nil. A failed
// delivery is retried after a backoff (1s, 2s, 4s, ... 1m); events behind it
// wait, so order holds. Events not acknowledged when the scheduler stops,
// however it stops, are loaded at Open and delivered first.

// errDeliverTimeout is the cause of a delivery's context when it took
// longer than Config.DeliverTimeout.
var errDeliverTimeout = errors.New("completion handler timed out")

// maxTriesBeforeRunEnds: at the end of a run, a failing event is retried
// this many times in all before Run returns without it (it stays pending,
// for the next run).
const maxTriesBeforeRunEnds = 4

func backoff(tries int) time.Duration {
	return min(time.Second<<min(tries-1, 10), time.Minute)
}

// loadOutbox reads the pending events at Open, with the definitions their
// tasks completed with.
func (e *Engine) loadOutbox(rows []store.Row) error {
	pending, maxID, err := e.cfg.Store.PendingEvents()
	if err != nil {
		return err
	}
	e.nextEventID = maxID + 1
	specs := map[string][]byte{}
	for i := range rows {
		specs[rows[i].ID] = rows[i].Spec
	}
	e.outboxSpecs = map[string]*task.Spec{}
	for i := range pending {
		ev := pending[i]
		if _, ok := e.outboxSpecs[ev.TaskID]; !ok {
			var sp task.Spec
			if err := json.Unmarshal(specs[ev.TaskID], &sp); err != nil {
				return fmt.Errorf("read the definition of task %q for its pending event %d: %w", ev.TaskID, ev.ID, err)
			}
			sp.Normalize()
			e.outboxSpecs[ev.TaskID] = &sp
		}
		ev.NextTry = time.Time{} // a new run tries at once
		e.outbox = append(e.outbox, &pendingEvent{EventWrite: ev})
	}
	return nil
}

// pendingEvent is an outbox entry and its failed tries in this engine's
// life (the stored Tries count every run's).
type pendingEvent struct {
	store.EventWrite
	triesNow int
}

// queueEvent writes a completion event for n with the batch, if its kind
// wants one.
func (e *Engine) queueEvent(n *node, attempt int) {
	if e.cfg.WantsEvent == nil || e.cfg.Deliver == nil || !e.cfg.WantsEvent(n.spec) {
		return
	}
	ev := &pendingEvent{EventWrite: store.EventWrite{ID: e.nextEventID, TaskID: n.spec.ID, Attempt: attempt, Created: e.cfg.Now()}}
	e.nextEventID++
	e.batch.Events = append(e.batch.Events, ev.EventWrite)
	e.outboxSpecs[n.spec.ID] = n.spec
	// Delivered only once committed: the effect runs after the commit.
	e.effects = append(e.effects, func(err error) {
		if err == nil {
			e.outbox = append(e.outbox, ev)
			e.svc.eventsPending[ev.TaskID]++
		}
	})
}

// deliver hands the oldest pending event to Deliver when nothing is in
// flight and its backoff has passed; it returns when the next try is due
// (zero if none is waiting).
func (e *Engine) deliver(now time.Time) time.Time {
	if e.delivering || len(e.outbox) == 0 || e.closing != nil || e.broken != nil || e.cfg.Deliver == nil {
		return time.Time{}
	}
	ev := e.outbox[0]
	if now.Before(ev.NextTry) {
		return ev.NextTry
	}
	e.delivering = true
	d := Delivery{EventID: ev.ID, TaskID: ev.TaskID, Attempt: ev.Attempt, Spec: e.outboxSpecs[ev.TaskID], Tries: ev.Tries}
	deliverFn, ctx, timeout := e.cfg.Deliver, e.deliverCtx, e.cfg.DeliverTimeout
	go func() {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, timeout, errDeliverTimeout)
			defer cancel()
		}
		err := deliverFn(ctx, d)
		if err != nil && context.Cause(ctx) == errDeliverTimeout {
			err = fmt.Errorf("completion handler timed out after %s (it was stopped): %w", timeout, err)
		}
		e.send(deliveredEvent{id: d.EventID, err: err})
	}()
	return time.Time{}
}

type deliveredEvent struct {
	id  int64
	err error
}

func (ev deliveredEvent) apply(e *Engine) {
	e.delivering = false
	if len(e.outbox) == 0 || e.outbox[0].ID != ev.id {
		return // cannot happen: one delivery at a time, from the head
	}
	head := e.outbox[0]
	now := e.cfg.Now()
	if ev.err == nil {
		head.Acked = now
		e.outbox = e.outbox[1:]
		e.eventAcked(head.TaskID)
	} else {
		head.Tries++
		head.triesNow++
		head.LastError = ev.err.Error()
		head.NextTry = now.Add(backoff(head.triesNow))
		e.notify(Event{Kind: DeliveryFailed, TaskID: head.TaskID, Error: fmt.Sprintf("event %d, try %d: %v", head.ID, head.Tries, ev.err)})
	}
	e.batch.Events = append(e.batch.Events, head.EventWrite)
}

// outboxHoldsRun reports whether Run should wait for the outbox: events
// remain that have not failed too often yet.
func (e *Engine) outboxHoldsRun() bool {
	return len(e.outbox) > 0 && e.cfg.Deliver != nil && (e.delivering || e.outbox[0].triesNow < maxTriesBeforeRunEnds)
}

// EventsPending returns how many completion events are recorded and not
// delivered yet (the outbox's length); 0 once the engine is closed.
func (e *Engine) EventsPending() int {
	reply := make(chan int, 1)
	if !e.send(eventsPendingEvent{reply}) {
		return 0
	}
	n, _ := await(e, reply)
	return n
}

type eventsPendingEvent struct{ reply chan int }

func (ev eventsPendingEvent) apply(e *Engine) { ev.reply <- len(e.outbox) }

// stopDeliveries cancels an event in flight; it is delivered again later.
func (e *Engine) stopDeliveries() {
	if e.cancelDeliver != nil {
		e.cancelDeliver()
	}
}

func (e *Engine) initOutbox() {
	e.deliverCtx, e.cancelDeliver = context.WithCancel(context.Background())
	e.outboxSpecs = map[string]*task.Spec{}
}
