package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/internal/task"
)

// The engine as a service.
//
// Run schedules what was submitted until nothing more can run; Serve
// schedules whatever is submitted, whenever, until it is stopped. They
// share the loop's one gate (e.run): decide starts tasks only while one of
// them is in progress, and both stop the same way. Wait lets a caller
// follow its own tasks to the end.

// service is the state of subscribers, waiters, submit keys and
// retirement. Owned by the loop goroutine.
type service struct {
	// Events: the last one's sequence number, the latest EventHistory
	// events (ring[seq % EventHistory]), the subscribers.
	seq  uint64
	ring []Event
	subs []*Subscription

	// watched: the waiters of each task not yet finished that a Wait
	// names.
	watched map[*node][]*waiter

	keys submitKeys

	// firstSeq is the first task seq of this engine's life: a row of the
	// store with a smaller one was not submitted to this engine.
	firstSeq int64
	// retired counts the tasks retired so far; none: no need to look in
	// the store.
	retired int
	// candidates are tasks that may be retirable after this turn.
	candidates []*node
	// eventsPending counts each task's completion events in the outbox,
	// so that what the outbox keeps of a task goes with its last event.
	eventsPending map[string]int
}

// initService readies the service's state as the loop starts, once Open
// has loaded the store.
func (e *Engine) initService() {
	e.svc.firstSeq = e.nextSeq
	e.svc.watched = map[*node][]*waiter{}
	e.svc.keys.init()
	e.svc.eventsPending = map[string]int{}
	for i := range e.outbox {
		for _, ev := range e.outbox[i].queue {
			e.svc.eventsPending[ev.TaskID]++
		}
	}
}

// afterTurn ends a turn of the loop, once its batch is committed: it
// answers the waiters when the store broke, and retires what it can.
func (e *Engine) afterTurn() {
	if e.broken != nil && len(e.svc.watched) > 0 {
		for n, ws := range e.svc.watched {
			for _, w := range ws {
				w.answer(nil, e.broken)
			}
			delete(e.svc.watched, n)
		}
	}
	e.retire()
}

// Serve schedules every task submitted, from any goroutine and at any
// time, until ctx is done or the engine is closed. Then, as for Run, the
// running attempts are stopped and recorded cancelled, tasks that had not
// started stay pending (for a later Serve or Run), and Serve returns ctx's
// error, or ErrClosed, ErrStoppedNow, or the error that broke the store.
// Serve and Run exclude each other (ErrRunning).
func (e *Engine) Serve(ctx context.Context) error {
	reply := make(chan runResult, 1)
	if !e.send(runEvent{ctx: ctx, reply: reply, serve: true}) {
		return ErrClosed
	}
	r, ok := await(e, reply)
	if !ok {
		return ErrClosed
	}
	return r.err
}

// Wait returns once every task in ids is finished (complete, failed,
// blocked or cancelled), with their records in the order of ids, and once
// that is committed. It returns ctx's error when ctx is done first,
// ErrClosed when the engine closes, the store's error when it breaks. An
// id that was never submitted to this engine is a *task.Error of kind
// task.ErrUnknownTask. Tasks only run while Serve or Run is in progress;
// Wait does not start them. A task stopped by the end of a Serve or Run
// ends cancelled; one that was waiting for it stays pending.
func (e *Engine) Wait(ctx context.Context, ids []string) ([]task.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &waiter{ids: slices.Clone(ids), reply: make(chan waitResult, 1)}
	if !e.send(waitEvent{w}) {
		return nil, ErrClosed
	}
	select {
	case r := <-w.reply:
		return r.recs, r.err
	case <-ctx.Done():
		e.send(unwaitEvent{w})
		return nil, ctx.Err()
	case <-e.closed:
		select { // the loop may have answered just before it ended
		case r := <-w.reply:
			return r.recs, r.err
		default:
			return nil, ErrClosed
		}
	}
}

// waiter is a Wait in progress. Owned by the loop.
type waiter struct {
	ids   []string
	recs  []task.Record
	left  int // tasks not finished yet
	done  bool
	reply chan waitResult
}

type waitResult struct {
	recs []task.Record
	err  error
}

// answer replies once.
func (w *waiter) answer(recs []task.Record, err error) {
	if w.done {
		return
	}
	w.done = true
	w.reply <- waitResult{recs, err}
}

type waitEvent struct{ w *waiter }

func (ev waitEvent) apply(e *Engine) {
	w := ev.w
	switch {
	case e.closing != nil:
		w.answer(nil, ErrClosed)
		return
	case e.broken != nil:
		w.answer(nil, e.broken)
		return
	}
	w.recs = make([]task.Record, len(w.ids))
	var open []*node // not finished
	for i, id := range w.ids {
		if n := e.node(id); n != nil {
			if n.rec.State.Terminal() {
				w.recs[i] = n.record()
			} else if !slices.Contains(open, n) {
				open = append(open, n)
			}
			continue
		}
		r, ok, err := e.lookupRetired(id)
		switch {
		case err != nil:
			w.answer(nil, fmt.Errorf("wait for task %q: %w", id, err))
			return
		case !ok:
			w.answer(nil, &task.Error{TaskID: id, Reason: "no such task", Kind: task.ErrUnknownTask})
			return
		}
		w.recs[i] = r.Record
	}
	w.left = len(open)
	for _, n := range open {
		e.svc.watched[n] = append(e.svc.watched[n], w)
	}
	if w.left == 0 {
		// Finished, but maybe not committed yet: answer after the commit.
		e.effects = append(e.effects, func(err error) {
			if err != nil {
				w.answer(nil, fmt.Errorf("save state: %w", err))
				return
			}
			w.answer(w.recs, nil)
		})
	}
}

type unwaitEvent struct{ w *waiter }

func (ev unwaitEvent) apply(e *Engine) {
	w := ev.w
	if w.done {
		return
	}
	w.done = true // its caller is gone
	for _, id := range w.ids {
		n := e.node(id)
		if n == nil {
			continue
		}
		ws := e.svc.watched[n]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
		}
		if len(ws) == 0 {
			delete(e.svc.watched, n)
		} else {
			e.svc.watched[n] = ws
		}
	}
}

// node returns the task in memory: submitted, or adopted at Open and not
// claimed by a submission yet; nil if neither.
func (e *Engine) node(id string) *node {
	if n := e.tasks[id]; n != nil {
		return n
	}
	return e.adopted[id]
}

// settled is told, after the commit, that a task finished: its waiters get
// its record, and it may be retired.
func (e *Engine) settled(n *node) {
	ws := e.svc.watched[n]
	if ws != nil {
		delete(e.svc.watched, n)
		for _, w := range ws {
			for i, id := range w.ids {
				if id == n.spec.ID {
					w.recs[i] = n.record() // each caller its own copy
				}
			}
			if w.left--; w.left == 0 {
				w.answer(w.recs, nil)
			}
		}
	}
	e.queueRetire(n)
}
