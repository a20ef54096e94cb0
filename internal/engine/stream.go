package engine

import (
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// streamMin is the fewest tasks of a batch whose rows are streamed to
// the store while it is admitted (submitStreamed): below it, a goroutine
// and a transaction of its own cost more than they save.
const streamMin = 1024

// rowStream is the range of the batch's task rows, e.batch.Tasks[from:to],
// handed to the store's writer while a submission goes on admitting: those
// rows are final, and a later write of one of their tasks in the same turn
// goes after them in the batch (writeTask) instead of replacing them.
type rowStream struct{ from, to int }

// holds says whether the batch's row i was handed to the writer.
func (s rowStream) holds(i int) bool { return i >= s.from && i < s.to }

// submitStreamed submits a big batch whose tasks come after the tasks
// they depend on (as a generated graph's do) in one pass, each task
// linked and admitted as it comes, while the store writes the rows
// admitted so far on another goroutine (store.Streamer): the transaction
// runs beside the engine's work instead of after it. The batch is
// committed, with whatever the turn queued before it, before this
// returns (the store cannot be read while its rows stream), and the
// commit's effects are performed.
//
// It returns false, having changed nothing (the stream rolled back), when
// the batch cannot be taken so: not big enough, a store that cannot
// stream, adopted or retired tasks about (the caller's checked), a reason
// saved by an earlier scheduler for every stored task still to forget,
// or a task that depends on one after it, on itself or on an unknown
// task, a duplicate, a task this engine could never start. The caller's
// general path then submits it or finds what is wrong with it.
func (e *Engine) submitStreamed(ev submitEvent, digest string, first int64, now time.Time) bool {
	sub := ev.Submission
	specs := sub.Specs
	streamer, ok := e.cfg.Store.(store.Streamer)
	if !ok || len(specs) < streamMin || e.staleAll {
		return false
	}
	if len(e.tasks) == 0 {
		e.tasks = make(map[string]*node, len(specs)) // sized once for a big first batch
	}
	ndeps := 0
	for _, s := range specs {
		ndeps += len(s.Dependencies)
	}
	// Each row's place, in submission order, handed to the writer as
	// admission fills it.
	at := len(e.batch.Tasks)
	e.batch.Tasks = slices.Grow(e.batch.Tasks, len(specs))[:at+len(specs)]
	st := streamer.StreamTasks(e.batch.Tasks[at:])
	e.stream = rowStream{from: at, to: at}
	slab := make([]node, len(specs)) // one allocation for the batch's nodes
	depsArr := make([]*node, ndeps)  // their dependency lists
	inBatch := 0                     // dependencies inside the batch
	added := 0                       // specs[:added] are in e.tasks
	for i, s := range specs {
		if _, dup := e.tasks[s.ID]; dup {
			break
		}
		n := &slab[i]
		e.newNode(n, sub, i, nil, first+int64(i), now)
		ids := s.Dependencies
		n.deps, depsArr = depsArr[:len(ids):len(ids)], depsArr[len(ids):]
		resolved := true
		for j, id := range ids {
			d := e.tasks[id] // one after it, or itself, is not there yet
			if d == nil {
				resolved = false
				break
			}
			n.deps[j] = d
			if d.seq >= first {
				d.inBatchDependents++
				inBatch++
			}
		}
		if !resolved {
			break
		}
		e.tasks[s.ID] = n
		added = i + 1
		n.writeIdx = int32(at + i)
		e.batch.Tasks[at+i] = store.TaskWrite{ID: s.ID} // writeTask fills its own row
		e.judge(n)                                      // its dependencies are judged: they come before it
		e.writeTask(n)
		e.stream.to = at + i + 1
		st.Fill(i + 1)
	}
	// A task this engine could never start: refused, the general path
	// says why (after any problem with the graph, as it checks).
	if added < len(specs) || e.checkSubmitted(sub) != nil {
		st.Rollback()
		for _, s := range specs[:added] {
			delete(e.tasks, s.ID)
		}
		clear(e.batch.Tasks[at:])
		e.batch.Tasks = e.batch.Tasks[:at]
		e.stream = rowStream{}
		return false
	}
	// Nothing is refused from here on.
	e.nextSeq += int64(len(specs))
	dependentsArr := make([]*node, inBatch)
	for i := range slab {
		n := &slab[i]
		k := int(n.inBatchDependents)
		n.dependents, dependentsArr = dependentsArr[:0:k], dependentsArr[k:]
	}
	for i := range slab {
		n := &slab[i]
		for _, d := range n.deps {
			d.dependents = append(d.dependents, n)
		}
	}
	for i := range slab {
		n := &slab[i]
		e.admitted(n)
		if n.rec.State == task.Complete {
			e.queueRetire(n) // complete from an earlier run: no event to wait for
		}
	}
	if ev.Key != "" {
		e.rememberKey(ev.Key, digest, true)
	}
	e.effects = append(e.effects, func(err error) { ev.reply <- err })
	e.forgetStaleWaits() // the loop's first commit may be this one
	err := st.Commit(&e.batch, at)
	e.stream = rowStream{}
	e.committed(err)
	e.runEffects(err)
	return true
}
