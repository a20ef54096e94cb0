package engine

import (
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Views of the engine for a long-lived caller (a daemon) that must not
// copy every record to learn about one task.

// Stored returns every task the store held when the engine opened, in
// submission order (by Seq). The rows are the engine's: the caller must
// not change them. Safe for concurrent use.
func (e *Engine) Stored() []*store.Row {
	rows := make([]*store.Row, 0, len(e.earlier))
	for _, r := range e.earlier {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *store.Row) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return rows
}

// Record returns a copy of task id's record, and whether the engine holds
// the task in memory (submitted to it, or adopted at Open).
func (e *Engine) Record(id string) (task.Record, bool) {
	reply := make(chan recordReply, 1)
	if !e.send(recordEvent{id, reply}) {
		return task.Record{}, false
	}
	r, _ := await(e, reply)
	return r.rec, r.ok
}

type recordReply struct {
	rec task.Record
	ok  bool
}

type recordEvent struct {
	id    string
	reply chan recordReply
}

func (ev recordEvent) apply(e *Engine) {
	if n := e.node(ev.id); n != nil {
		ev.reply <- recordReply{n.record(), true}
		return
	}
	ev.reply <- recordReply{}
}

// Cards returns the cards as admission sees them now, and whether they are
// known: the engine reads the GPUs only while GPU tasks wait or run, so an
// engine that has run none may know nothing of them.
func (e *Engine) Cards() ([]gpu.CardView, bool) {
	reply := make(chan cardsReply, 1)
	if !e.send(cardsEvent{reply}) {
		return nil, false
	}
	r, _ := await(e, reply)
	return r.cards, r.known
}

type cardsReply struct {
	cards []gpu.CardView
	known bool
}

type cardsEvent struct{ reply chan cardsReply }

func (ev cardsEvent) apply(e *Engine) {
	if e.board == nil || !e.board.Known() {
		ev.reply <- cardsReply{}
		return
	}
	ev.reply <- cardsReply{e.board.Views(e.cfg.Now()), true}
}

// Lookup returns task id as the store holds it now (what is committed of
// it), whether or not it is in memory: a task retired (Config.Retire) or
// left by an earlier run is read so. ok is false when the store has no
// such task. The read runs on the loop, the store's one user.
func (e *Engine) Lookup(id string) (row store.Row, ok bool, err error) {
	reply := make(chan lookupReply, 1)
	if !e.send(lookupEvent{id, reply}) {
		return store.Row{}, false, ErrClosed
	}
	r, sent := await(e, reply)
	if !sent {
		return store.Row{}, false, ErrClosed
	}
	return r.row, r.ok, r.err
}

type lookupReply struct {
	row store.Row
	ok  bool
	err error
}

type lookupEvent struct {
	id    string
	reply chan lookupReply
}

func (ev lookupEvent) apply(e *Engine) {
	r, ok, err := e.cfg.Store.LookupTask(ev.id)
	if err != nil {
		err = fmt.Errorf("read task %q: %w", ev.id, err)
	}
	ev.reply <- lookupReply{r, ok, err}
}
