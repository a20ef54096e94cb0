package engine

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Why each pending task waits. The loop sets a task's reason where it
// decides: at submission (its dependencies, or a slot), when it becomes
// ready (a slot), when decide passes it over (the GPUs), when its attempt
// fails (a retry delay or a back-off). A ready GPU task's reason is also
// read again as the cards change, by decide's rules (rereadGPU): while
// every slot is taken no decision looks at it. A reason lives in the node
// (node.rec.Waiting) and goes to the store with the task's row: a change
// of kind is written in the turn's commit (in the row the turn writes
// anyway when there is one: a task that becomes ready and starts is
// written once), and no commit is made for a reason alone.
//
// Details change more often than kinds: the dependencies still unfinished,
// the memory the cards have left. Those are written at most every
// refreshEvery, refreshBatch tasks at a time, so that a queue of
// thousands of GPU tasks over cards whose memory moves at each reading
// costs a few hundred row writes a second at most, not all of them at
// every turn. The detail of a task waiting for dependencies is not kept
// in memory: it is made from them when the row is written and when the
// engine answers (Waiting, Records), so it is always current there, and
// it changes exactly when one of them completes.

const (
	refreshEvery = time.Second
	refreshBatch = 512
)

// waits is the loop's bookkeeping of reasons whose detail may go stale.
type waits struct {
	stale []*node // waiting for dependencies, one of which completed since its detail was written; oldest first
	gpu   []*node // ready GPU tasks, whose reasons are read again as the cards change
	// A sweep re-reads the GPU reasons, gpu[at:] still to do; again: the
	// cards changed during it, so another follows.
	sweeping, again bool
	at              int
	next            time.Time // no refresh before
}

// setWait sets why pending task n waits. A change is queued for the
// commit with the task's row.
func (e *Engine) setWait(n *node, w task.WaitReason) {
	old := n.rec.Waiting
	if old.Kind == w.Kind && old.Detail == w.Detail && old.Until.Equal(w.Until) {
		return
	}
	n.rec.Waiting = w
	if n.inReady && old.Kind != w.Kind {
		e.ready.refresh(n) // the GPU index sums reasons up
	}
	if n.rec.State == task.Pending {
		e.writeTask(n)
	}
}

// forgetWait drops the reason of a task that no longer waits.
func (e *Engine) forgetWait(n *node) {
	n.rec.Waiting = task.WaitReason{}
	if n.inReady {
		e.ready.refresh(n)
	}
}

// addGPUWait puts a GPU task that became ready in waits.gpu: its reason
// is read again as the cards change, whatever it is (one that waits for
// a slot while every slot is taken may stop fitting, and then it waits
// for the GPU whatever the slots do).
func (e *Engine) addGPUWait(n *node) {
	e.waits.gpu = append(e.waits.gpu, n)
	n.gpuWaitAt = int32(len(e.waits.gpu))
}

// dropGPUWait takes a GPU task that is no longer ready out of waits.gpu.
func (e *Engine) dropGPUWait(n *node) {
	if n.gpuWaitAt == 0 {
		return
	}
	// Swap with the last. (A sweep that spans turns may miss the one
	// moved, when it had passed its new place: the next sweep reads it.)
	i, last := int(n.gpuWaitAt)-1, len(e.waits.gpu)-1
	m := e.waits.gpu[last]
	e.waits.gpu[i], m.gpuWaitAt = m, int32(i+1)
	e.waits.gpu[last] = nil
	e.waits.gpu = e.waits.gpu[:last]
	n.gpuWaitAt = 0
}

// staleDeps notes that one of n's dependencies completed: the detail of
// its reason, which names the unfinished ones, is out of date.
func (e *Engine) staleDeps(n *node) {
	if !n.staleWait {
		n.staleWait = true
		e.waits.stale = append(e.waits.stale, n)
	}
}

// sweepGPUWaits asks for the GPU reasons to be read again: the cards
// changed.
func (e *Engine) sweepGPUWaits() {
	switch {
	case len(e.waits.gpu) == 0:
	case e.waits.sweeping:
		e.waits.again = true
	default:
		e.waits.sweeping, e.waits.at = true, 0
	}
}

// waitReason is n's reason with its detail: for dependencies, made from
// them now.
func (n *node) waitReason() task.WaitReason {
	if n.rec.Waiting.Kind == task.WaitDependencies {
		return task.WaitReason{Kind: task.WaitDependencies, Detail: depsDetail(n)}
	}
	return n.rec.Waiting
}

// depsDetail names the dependencies of n it still waits for, in the order
// it lists them: the first task.MaxNamedDependencies, then how many more.
// One it waits for with a condition other than success says which ("train-3
// (any outcome)"). The names are n's own list's (n.deps follows it), not
// read from each dependency: fewer cache misses when 100,000 tasks are
// submitted.
func depsDetail(n *node) string {
	ids := n.spec.Dependencies
	first := ""
	named, more, size := 0, 0, 0
	for i, d := range n.deps {
		switch on := n.spec.On(ids[i]); {
		case on.Judge(d.rec.State, d.rec.NotNeeded) == task.Met:
		case named == task.MaxNamedDependencies:
			more++
		default:
			if named == 0 && on == task.AfterSuccess {
				first = ids[i]
			}
			named++
			size += len(ids[i]) + len(on.Phrase()) + 2
		}
	}
	switch {
	case named == 0:
		return ""
	case named == 1 && more == 0 && first != "":
		return first // the common case: no copy
	}
	tail := ""
	if more > 0 {
		tail = " and " + strconv.Itoa(more) + " more"
	}
	var b strings.Builder
	b.Grow(size + len(tail)) // one allocation
	named = 0
	for i, d := range n.deps {
		on := n.spec.On(ids[i])
		if on.Judge(d.rec.State, d.rec.NotNeeded) == task.Met || named == task.MaxNamedDependencies {
			continue
		}
		if named > 0 {
			b.WriteString(", ")
		}
		b.WriteString(ids[i])
		b.WriteString(on.Phrase())
		named++
	}
	b.WriteString(tail)
	return b.String()
}

// gpuReason is the reason of GPU task n, passed over for why, with its
// detail from the cards as the decision saw them.
func (e *Engine) gpuReason(n *node, why task.WaitKind, cards []gpu.CardView) task.WaitReason {
	if why == task.WaitGPUUnknown {
		unknown, _ := e.board.Err()
		return task.WaitReason{Kind: why, Detail: unknown}
	}
	return task.WaitReason{Kind: why, Detail: gpu.Explain(cards, n.need, n.spec.ID, "")}
}

// refreshWaits brings stale details up to date, refreshBatch tasks at a
// time and at most every refreshEvery, and returns when to refresh again
// (zero: nothing is stale).
func (e *Engine) refreshWaits(now time.Time) time.Time {
	w := &e.waits
	if len(w.stale) == 0 && !w.sweeping {
		return time.Time{}
	}
	if now.Before(w.next) {
		return w.next
	}
	budget := refreshBatch
	for budget > 0 && len(w.stale) > 0 {
		n := w.stale[0]
		w.stale[0] = nil
		w.stale = w.stale[1:]
		n.staleWait = false
		if n.rec.State == task.Pending && n.rec.Waiting.Kind == task.WaitDependencies {
			e.writeTask(n) // one of its dependencies completed: its detail changed
			budget--
		}
	}
	if w.sweeping && budget > 0 {
		cards := e.cardViews(now)
		kept := keptCards(nil, cards)
		for budget > 0 && w.at < len(w.gpu) {
			n := w.gpu[w.at]
			w.at++
			e.setWait(n, e.rereadGPU(n, cards, kept))
			budget--
		}
		if w.at >= len(w.gpu) {
			w.sweeping, w.at = w.again && len(w.gpu) > 0, 0
			w.again = false
		}
	}
	w.next = now.Add(refreshEvery)
	if len(w.stale) > 0 || w.sweeping {
		return w.next
	}
	return time.Time{}
}

// rereadGPU is the reason of a ready GPU task against the cards as they
// are now, by the rules decide follows: one that fits on a card now waits
// for a slot (or for the next decision).
func (e *Engine) rereadGPU(n *node, cards []gpu.CardView, kept []int) task.WaitReason {
	if k := n.rec.Waiting.Kind; k == task.WaitUserCap && e.atCap(n) || hostKind(k) {
		// What the cards say does not matter yet. (The machine's
		// resources: decide says when they change.)
		return n.rec.Waiting
	}
	if !e.board.Known() {
		return e.gpuReason(n, task.WaitGPUUnknown, nil)
	}
	if n.need.Count > 1 {
		if gpu.CountFits(cards, n.need, n.spec.ID) == n.need.Cards() {
			return task.WaitReason{Kind: task.WaitSlot}
		}
		return e.gpuReason(n, setWhy(cards, n.need, n.spec.ID), cards)
	}
	if gpu.Fit(cards, n.need, e.board.Settings().Placement, n.spec.ID) >= 0 {
		return task.WaitReason{Kind: task.WaitSlot}
	}
	return e.gpuReason(n, passedWhy(cards, kept, n.need), cards)
}

// cardViews is the cards as admission sees them now, with the
// reservations of the last decision.
func (e *Engine) cardViews(now time.Time) []gpu.CardView {
	views := e.board.Views(now)
	for i := range views {
		id := e.reserved[views[i].Index]
		views[i].ReservedFor = id
		if n := e.tasks[id]; n != nil && id != "" {
			views[i].ReservedMiB = gpu.Reservation(n.need)
		}
	}
	return views
}

// keptCards appends to kept the positions of the cards reserved or not
// taking work, for passedWhy, and returns it.
func keptCards(kept []int, cards []gpu.CardView) []int {
	for i := range cards {
		if c := &cards[i]; c.ReservedFor != "" || c.State == gpu.CardCooling || c.State == gpu.CardQuarantined {
			kept = append(kept, i)
		}
	}
	return kept
}

// Waiting returns why each task named waits, as the loop decided: for the
// tasks in memory that are pending, or running with an attempt queued in
// the batch system that runs it (task.WaitQueued); with no ids, for every
// such task. Unknown, finished, other running and retired tasks are left
// out. The detail
// of a GPU reason is the one last written, which follows the cards within
// seconds (see wait.go).
func (e *Engine) Waiting(ids ...string) map[string]task.WaitReason {
	reply := make(chan map[string]task.WaitReason, 1)
	if !e.send(waitingEvent{ids, reply}) {
		return nil
	}
	m, _ := await(e, reply)
	return m
}

type waitingEvent struct {
	ids   []string
	reply chan map[string]task.WaitReason
}

func (ev waitingEvent) apply(e *Engine) {
	out := map[string]task.WaitReason{}
	add := func(n *node) {
		if n != nil && (n.rec.State == task.Pending || n.rec.Waiting.Kind == task.WaitQueued) {
			out[n.spec.ID] = n.waitReason()
		}
	}
	if len(ev.ids) == 0 {
		for _, n := range e.tasks {
			add(n)
		}
	}
	for _, id := range ev.ids {
		add(e.tasks[id])
	}
	ev.reply <- out
}

// markStaleWaits notes, at Open, the tasks whose saved waiting reasons
// (rows, as loaded) an earlier scheduler decided, and has Open's commit
// mark them stale (store.MetaWaitingStale) unless they are already: a
// scheduler that opened and died before its first commit left the mark,
// and its reasons hidden, so which rows hold them is not known here; all
// are forgotten then.
func (e *Engine) markStaleWaits(rows []store.Row) error {
	for i := range rows {
		if rows[i].Waiting.Waiting() {
			e.staleWaits = append(e.staleWaits, rows[i].ID)
		}
	}
	_, marked, err := e.cfg.Store.LookupMeta(store.MetaWaitingStale)
	if err != nil {
		return err
	}
	e.staleAll = marked
	if len(e.staleWaits) > 0 && !marked {
		if e.batch.Meta == nil {
			e.batch.Meta = map[string]string{}
		}
		e.batch.Meta[store.MetaWaitingStale] = "1"
	}
	return nil
}

// forgetStaleWaits adds to the batch about to be committed, the loop's
// first, the forgetting of the reasons markStaleWaits noted: those of the
// tasks the batch does not write (it writes the others' own reasons), and
// the removal of the mark.
func (e *Engine) forgetStaleWaits() {
	if e.staleWaits == nil && !e.staleAll {
		return
	}
	if e.staleAll {
		e.batch.ClearWaiting = true
	} else {
		written := make(map[string]struct{}, len(e.batch.Tasks))
		for i := range e.batch.Tasks {
			written[e.batch.Tasks[i].ID] = struct{}{}
		}
		for _, id := range e.staleWaits {
			if _, ok := written[id]; !ok {
				e.batch.ClearWaitingOf = append(e.batch.ClearWaitingOf, id)
			}
		}
	}
	if e.batch.Meta == nil {
		e.batch.Meta = map[string]string{}
	}
	e.batch.Meta[store.MetaWaitingStale] = "" // removed
	e.staleWaits, e.staleAll = nil, false
}
