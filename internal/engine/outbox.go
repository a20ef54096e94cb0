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

// Delivery is an outbox event handed to Config.Deliver.
type Delivery struct {
	EventID int64
	// Kind says what the event is for: store.EventComplete,
	// EventFailure, EventRunEnd or EventWebhook.
	Kind    string
	TaskID  string     // the task it is about; "" for the run or the cards
	Attempt int        // the attempt that completed the task (or last failed)
	Spec    *task.Spec // the definition of TaskID's task; nil without one
	Tries   int        // failed deliveries before this one
	Created time.Time  // when the event was recorded
	Payload []byte     // what its Notice carried; nil for completions
}

// Notice is an outbox event to record with a transition (Config.Notices)
// or a run's end (Config.RunEnded): Kind says what delivers it (a
// store.Event* kind), Payload what it carries, opaque to the engine.
type Notice struct {
	Kind    string
	Payload []byte
}

// RunEnd is how a Run ended, as Config.RunEnded is told.
type RunEnd struct {
	Records []task.Record // every task's, as Run returns them
	// Stopped is why the Run stopped before its end (its context's
	// error, ErrStoppedNow, ErrClosed); nil when it ran to the end.
	Stopped error
	Started time.Time // when Run was called
	Ended   time.Time
}

// The outbox.
//
// A transition that wants telling gets an event row written in the same
// transaction: a completion whose kind wants it (Config.WantsEvent), any
// event for which Config.Notices returns notices (a failure, a card
// quarantined), and the end of a Run (Config.RunEnded). Events are handed
// to Config.Deliver one at a time per lane, in the order they were
// written; an event is acknowledged (and written so) only once Deliver
// returns nil. A failed delivery is retried after a backoff (1s, 2s, 4s,
// ... 1m); events behind it in its lane wait, so order holds. There are
// two lanes, so that a webhook that does not answer never holds back the
// handlers: webhooks, and everything else (completions, failures, runs'
// ends, in one order). A webhook is given up after WebhookTries failed
// deliveries in all; handlers never are. Events not acknowledged when the
// scheduler stops, however it stops, are loaded at Open and delivered
// first.

// errDeliverTimeout is the cause of a delivery's context when it took
// longer than Config.DeliverTimeout.
var errDeliverTimeout = errors.New("completion handler timed out")

// maxTriesBeforeRunEnds: at the end of a run, a failing event is retried
// this many times in all before Run returns without it (it stays pending,
// for the next run).
const maxTriesBeforeRunEnds = 4

// WebhookTries is how many failed deliveries of a webhook event, counted
// across runs, make the engine give it up: it is acknowledged as given up
// (store.EventWrite.GaveUp) and reported (a DeliveryFailed event with
// GaveUp). With the backoff, ten tries span about four minutes of a run.
const WebhookTries = 10

func backoff(tries int) time.Duration {
	return min(time.Second<<min(tries-1, 10), time.Minute)
}

// The lanes of the outbox.
const (
	handlerLane = iota // completions, failures, runs' ends: handlers and commands
	webhookLane        // POSTs to a webhook
	numLanes
)

func laneOf(kind string) int {
	if kind == store.EventWebhook {
		return webhookLane
	}
	return handlerLane
}

// lane is one queue of the outbox, owned by the loop.
type lane struct {
	queue      []*pendingEvent // pending, oldest first
	delivering bool            // its head is being delivered
}

// loadOutbox reads the pending events at Open, with the definitions their
// tasks completed (or failed) with.
func (e *Engine) loadOutbox(rows []store.Row) error {
	pending, maxID, err := e.cfg.Store.PendingEvents()
	if err != nil {
		return err
	}
	e.nextEventID = maxID + 1
	// The definitions of the tasks with pending events only: a map of
	// every row's cost 0.05 s on 100,000 tasks, at every open, for an
	// outbox that is nearly always empty.
	specs := map[string][]byte{}
	for i := range pending {
		if pending[i].TaskID != "" {
			specs[pending[i].TaskID] = nil
		}
	}
	if len(specs) > 0 {
		for i := range rows {
			if _, ok := specs[rows[i].ID]; ok {
				specs[rows[i].ID] = rows[i].Spec
			}
		}
	}
	e.outboxSpecs = map[string]*task.Spec{}
	for i := range pending {
		ev := pending[i]
		if _, ok := e.outboxSpecs[ev.TaskID]; !ok && ev.TaskID != "" {
			var sp task.Spec
			if err := json.Unmarshal(specs[ev.TaskID], &sp); err != nil {
				return fmt.Errorf("read the definition of task %q for its pending event %d: %w", ev.TaskID, ev.ID, err)
			}
			sp.Normalize()
			e.outboxSpecs[ev.TaskID] = &sp
		}
		ev.NextTry = time.Time{} // a new run tries at once
		l := &e.outbox[laneOf(ev.Kind)]
		l.queue = append(l.queue, &pendingEvent{EventWrite: ev})
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
	e.queueNotice(n.spec.ID, n.spec, attempt, Notice{Kind: store.EventComplete})
}

// queueNotices writes, with the batch, the events Config.Notices asks for
// on ev.
func (e *Engine) queueNotices(ev Event) {
	if e.cfg.Notices == nil || e.cfg.Deliver == nil {
		return
	}
	var spec *task.Spec
	var rec *task.Record
	if ev.TaskID != "" {
		n := e.tasks[ev.TaskID]
		if n == nil {
			n = e.adopted[ev.TaskID]
		}
		if n != nil {
			spec, rec = n.spec, &n.rec
		}
	}
	for _, nt := range e.cfg.Notices(ev, spec, rec) {
		e.queueNotice(ev.TaskID, spec, ev.Attempt.Number, nt)
	}
}

// queueNotice writes an event with the batch; it joins its lane once
// committed. It returns the event's id.
func (e *Engine) queueNotice(taskID string, spec *task.Spec, attempt int, nt Notice) int64 {
	ev := &pendingEvent{EventWrite: store.EventWrite{ID: e.nextEventID, Kind: nt.Kind, TaskID: taskID, Attempt: attempt,
		Created: e.cfg.Now(), Payload: nt.Payload}}
	e.nextEventID++
	e.batch.Events = append(e.batch.Events, ev.EventWrite)
	if spec != nil {
		e.outboxSpecs[taskID] = spec
	}
	// Delivered only once committed: the effect runs after the commit.
	e.effects = append(e.effects, func(err error) {
		if err == nil {
			l := &e.outbox[laneOf(ev.Kind)]
			l.queue = append(l.queue, ev)
			e.svc.eventsPending[ev.TaskID]++
		}
	})
	return ev.ID
}

// queueRunEnd writes the events of the Run's end (Config.RunEnded) with
// the batch, once the Run has nothing more to do or is stopping and
// nothing runs: before the Run returns, so they are owed even if the
// process dies right after.
func (e *Engine) queueRunEnd() {
	r := e.run
	if r == nil || r.serve || r.endQueued || e.cfg.RunEnded == nil || e.cfg.Deliver == nil || e.running > 0 || e.broken != nil {
		return
	}
	stopped := r.stop
	if stopped == nil && e.closing != nil {
		stopped = ErrClosed
	}
	if stopped == nil && (e.ready.Len() > 0 || e.delayed.Len() > 0) {
		return
	}
	r.endQueued = true
	for _, nt := range e.cfg.RunEnded(RunEnd{Records: e.records(), Stopped: stopped, Started: r.started, Ended: e.cfg.Now()}) {
		id := e.queueNotice("", nil, 0, nt)
		e.effects = append(e.effects, func(err error) {
			if err == nil && e.run == r {
				r.endIDs = append(r.endIDs, id)
			}
		})
	}
}

// deliver hands the oldest pending event of each lane to Deliver when
// nothing of that lane is in flight and its backoff has passed; it
// returns when the next try is due (zero if none is waiting).
func (e *Engine) deliver(now time.Time) time.Time {
	if e.closing != nil || e.broken != nil || e.cfg.Deliver == nil {
		return time.Time{}
	}
	var next time.Time
	for i := range e.outbox {
		if t := e.deliverLane(i, now); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

func (e *Engine) deliverLane(i int, now time.Time) time.Time {
	l := &e.outbox[i]
	if l.delivering || len(l.queue) == 0 {
		return time.Time{}
	}
	ev := l.queue[0]
	if now.Before(ev.NextTry) {
		return ev.NextTry
	}
	l.delivering = true
	d := Delivery{EventID: ev.ID, Kind: ev.Kind, TaskID: ev.TaskID, Attempt: ev.Attempt, Spec: e.outboxSpecs[ev.TaskID],
		Tries: ev.Tries, Created: ev.Created, Payload: ev.Payload}
	if ev.TaskID == "" {
		d.Spec = nil
	}
	deliverFn, ctx, timeout := e.cfg.Deliver, e.deliverCtx, e.cfg.DeliverTimeout
	go func() {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, timeout, errDeliverTimeout)
			defer cancel()
		}
		err := deliverFn(ctx, d)
		if err != nil && context.Cause(ctx) == errDeliverTimeout {
			err = fmt.Errorf("%s timed out after %s (it was stopped): %w", deliverer(d.Kind), timeout, err)
		}
		e.send(deliveredEvent{lane: i, id: d.EventID, err: err})
	}()
	return time.Time{}
}

// deliverer names what delivers an event of kind, for messages.
func deliverer(kind string) string {
	switch kind {
	case store.EventFailure:
		return "failure handler"
	case store.EventRunEnd:
		return "run-end command"
	case store.EventWebhook:
		return "webhook"
	}
	return "completion handler"
}

type deliveredEvent struct {
	lane int
	id   int64
	err  error
}

func (ev deliveredEvent) apply(e *Engine) {
	l := &e.outbox[ev.lane]
	l.delivering = false
	if len(l.queue) == 0 || l.queue[0].ID != ev.id {
		return // cannot happen: one delivery at a time per lane, from the head
	}
	head := l.queue[0]
	now := e.cfg.Now()
	gaveUp := false
	if ev.err != nil {
		head.Tries++
		head.triesNow++
		head.LastError = ev.err.Error()
		head.NextTry = now.Add(backoff(head.triesNow))
		gaveUp = head.Kind == store.EventWebhook && head.Tries >= WebhookTries
		msg := fmt.Sprintf("event %d, try %d: %v", head.ID, head.Tries, ev.err)
		if head.Kind != store.EventComplete && head.Kind != "" {
			msg = head.Kind + " " + msg
		}
		if gaveUp {
			msg += fmt.Sprintf("; given up after %d tries", head.Tries)
		}
		e.notify(Event{Kind: DeliveryFailed, TaskID: head.TaskID, Error: msg, Notification: head.Kind, GaveUp: gaveUp})
	}
	if ev.err == nil || gaveUp {
		head.Acked, head.GaveUp, head.NextTry = now, gaveUp, time.Time{}
		l.queue = l.queue[1:]
		e.eventAcked(head.TaskID)
		if e.run != nil {
			e.run.endIDs = deleteID(e.run.endIDs, head.ID)
		}
	}
	e.batch.Events = append(e.batch.Events, head.EventWrite)
}

func deleteID(ids []int64, id int64) []int64 {
	for i, v := range ids {
		if v == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}

// outboxHoldsRun reports whether Run should wait for the outbox: events
// remain that have not failed too often yet.
func (e *Engine) outboxHoldsRun() bool {
	if e.cfg.Deliver == nil {
		return false
	}
	for i := range e.outbox {
		l := &e.outbox[i]
		if len(l.queue) > 0 && (l.delivering || l.queue[0].triesNow < maxTriesBeforeRunEnds) {
			return true
		}
	}
	return false
}

// runEndHoldsStop reports whether a Run that is stopping should still wait
// for the outbox: the events of its end are not delivered yet, and it is
// stopped by its context (not by StopNow, Close or a broken store), so
// that an interrupted run still says it ended.
func (e *Engine) runEndHoldsStop() bool {
	if len(e.run.endIDs) == 0 || e.broken != nil || e.closing != nil {
		return false
	}
	select {
	case <-e.killNow:
		return false
	default:
	}
	return e.outboxHoldsRun()
}

// delivering reports whether a delivery is in flight.
func (e *Engine) delivering() bool {
	for i := range e.outbox {
		if e.outbox[i].delivering {
			return true
		}
	}
	return false
}

// pendingEvents returns how many events are recorded and not delivered.
func (e *Engine) pendingEvents() int {
	n := 0
	for i := range e.outbox {
		n += len(e.outbox[i].queue)
	}
	return n
}

// EventsPending returns how many outbox events (completions, failures,
// runs' ends, webhooks) are recorded and not delivered yet; 0 once the
// engine is closed.
func (e *Engine) EventsPending() int {
	reply := make(chan int, 1)
	if !e.send(eventsPendingEvent{reply}) {
		return 0
	}
	n, _ := await(e, reply)
	return n
}

type eventsPendingEvent struct{ reply chan int }

func (ev eventsPendingEvent) apply(e *Engine) { ev.reply <- e.pendingEvents() }

// stopDeliveries cancels the events in flight; they are delivered again
// later.
func (e *Engine) stopDeliveries() {
	if e.cancelDeliver != nil {
		e.cancelDeliver()
	}
}

func (e *Engine) initOutbox() {
	e.deliverCtx, e.cancelDeliver = context.WithCancel(context.Background())
	e.outboxSpecs = map[string]*task.Spec{}
}
