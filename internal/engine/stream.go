package engine

import (
	"fmt"
	"math"
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
	early := e.planEarly(sub) // first: its bound is found meanwhile
	if len(e.tasks) == 0 {
		e.tasks = make(map[string]*node, len(specs)) // sized once for a big first batch
	}
	ndeps := 0
	for _, s := range specs {
		ndeps += len(s.Dependencies)
	}
	checked := false           // checkSubmitted passed
	var unstarted *store.Batch // an early start's writes, when it did not start
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
		if early != nil && early.consider(n, i+1) {
			if early.sound(e, sub) {
				checked = true
				unstarted = e.startEarly(early.best, st, i+1)
			}
			early = nil // at most one try
		}
	}
	// A task this engine could never start: refused, the general path
	// says why (after any problem with the graph, as it checks). Neither
	// can happen after an early start (earlyStart.sound).
	if added < len(specs) || (!checked && e.checkSubmitted(sub) != nil) {
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
	if unstarted != nil {
		e.batch.Tasks = append(e.batch.Tasks, unstarted.Tasks...)
		e.batch.Attempts = append(e.batch.Attempts, unstarted.Attempts...)
		e.batch.Events = append(e.batch.Events, unstarted.Events...)
	}
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

// An early start: a streamed batch may start its first task before its
// last rows are written, in two transactions instead of one.
//
//   - T1 holds the rows of the batch's first tasks, up to the one started
//     (a prefix closed under dependencies: the batch comes in dependency
//     order), and the start's own writes (its row running, its attempt);
//     it is committed (TaskStream.CommitPrefix), then the attempt is
//     launched, as a start committed at the end of a turn would be.
//   - T2 holds the rest of the batch and whatever the turn queued after,
//     and is committed before the submission replies. The loop applies
//     nothing else meanwhile, so the attempt's end (or any other event)
//     is committed after T2.
//
// Every transition is still durable before the side effect it permits:
// the attempt is launched after T1, and nothing of T2 permits anything
// before T2 is committed. A scheduler that dies between the two leaves the
// prefix's rows as this submission wrote them and the others as they
// were, each row a whole one of either run (a submission writes a task's
// state, definition and fingerprint together). The next Open and
// submission judge such a state as they judge any: a submission never
// makes a task complete, only keeps one complete whose own row is, so the
// complete rows are a subset of the earlier run's, and a task is kept
// only if every task it depends on is kept too (judge): a task of the
// old rows complete downstream of a prefix task that now runs again is
// not kept ("upstream ... reruns"). The started attempt is found as any
// attempt a dead scheduler left running (adoption or recovery). The
// waiting reasons an earlier scheduler saved stay hidden (T2 forgets
// them: store.MetaWaitingStale stays set until then). See docs/states.md.
//
// The task started is the one decide would start first with the whole
// batch admitted: the best ready task of the prefix (lessNode) when no
// task after the prefix could come before it (a higher priority, or the
// same and a longer estimate; a tie in both goes to the prefix's, which
// was submitted first), among tasks of one owner on the CPU only, the
// engine holding nothing else, so that decide starts the best ready task
// first whatever else is ready, if it starts it at all: decide is asked
// with that task alone ready, and when it does not start it (the host's
// cores or memory), nothing starts early. And the
// batch can no longer be refused: no id twice, each dependency an earlier
// task of the batch (checked on another goroutine meanwhile), and
// checkSubmitted passed. Otherwise nothing starts early.
type earlyStart struct {
	best  *node            // the prefix's best ready task so far
	bound *earlyBound      // once found
	found chan *earlyBound // finds it, on another goroutine
}

// earlyBound is what an early start needs to know of a whole batch.
type earlyBound struct {
	// ok: one owner, CPU tasks only, each id once, each dependency an
	// earlier task of the batch.
	ok bool
	// topPri[i], topEst[i]: the best (priority, estimate) of the tasks of
	// specs[i:] that could be ready once admitted; the lowest there is
	// for none.
	topPri []int
	topEst []int32
}

// planEarly returns the plan of an early start for a streamed batch, or
// nil where there can be none. The batch's bound is found on another
// goroutine, while the batch is admitted.
func (e *Engine) planEarly(sub Submission) *earlyStart {
	switch {
	case e.run == nil && !sub.RunNext, e.run != nil && e.run.stop != nil,
		len(e.tasks) > 0, len(e.adopted) > 0, e.running > 0, e.ready.Len() > 0,
		e.batch.Len() > 0, len(e.effects) > 0, len(e.later) > 0,
		e.broken != nil, e.closing != nil:
		return nil
	}
	p := &earlyStart{found: make(chan *earlyBound, 1)}
	go func() { p.found <- boundOf(sub, e.earlier) }()
	return p
}

// boundOf finds sub's earlyBound. A task could be ready once admitted
// unless one of the tasks it depends on cannot be complete then, and it
// waits for that one's end, or is blocked by it: a task of the batch is
// complete once admitted only when it completed in an earlier run
// (earlier), is still intact (newNode), and every task it depends on is
// kept complete too, unless it is pinned (judge). A task that depends on
// one with a condition other than success is counted as one that could
// be ready, whatever its dependencies.
func boundOf(sub Submission, earlier map[string]*store.Row) *earlyBound {
	specs := sub.Specs
	b := &earlyBound{topPri: make([]int, len(specs)+1), topEst: make([]int32, len(specs)+1)}
	index := make(map[string]int32, len(specs))
	mayComplete := make([]bool, len(specs))
	mayReady := make([]bool, len(specs))
	owner := specs[0].Owner
	for i, s := range specs {
		if s.Resources.GPU() || s.Owner != owner {
			return b
		}
		if _, dup := index[s.ID]; dup {
			return b
		}
		ready, allKept := true, true
		for _, d := range s.Dependencies {
			j, ok := index[d]
			if !ok {
				return b // one after it, itself, or unknown
			}
			if !mayComplete[j] {
				allKept = false
				if s.On(d) == task.AfterSuccess {
					ready = false
				}
			}
		}
		index[s.ID] = int32(i)
		mayReady[i] = ready
		v := Resume{Intact: true}
		if sub.Resume != nil {
			v = sub.Resume[i]
		}
		// The earlier row looked up last: most tasks of a resumed batch
		// are not intact, or depend on one not kept.
		if v.Intact && (allKept || v.Pinned) {
			r := earlier[s.ID]
			mayComplete[i] = r != nil && r.State == task.Complete && !r.NotNeeded
		}
	}
	b.ok = true
	pri, est := math.MinInt, int32(math.MinInt32)
	b.topPri[len(specs)], b.topEst[len(specs)] = pri, est
	for i := len(specs) - 1; i >= 0; i-- {
		if mayReady[i] {
			p, t := specs[i].Priority, int32(0)
			if sub.Estimate != nil {
				t = rankOf(sub.Estimate[i])
			}
			if p > pri || p == pri && t > est {
				pri, est = p, t
			}
		}
		b.topPri[i], b.topEst[i] = pri, est
	}
	return b
}

// consider notes n, just judged as the batch's task next-1, and says
// whether the prefix's best ready task is the one to start: no task after
// it could come before it. The first ready task waits for the bound.
func (p *earlyStart) consider(n *node, next int) bool {
	if n.rec.State == task.Pending && n.waiting == 0 && !n.rec.Paused && !n.placed && (p.best == nil || lessNode(n, p.best)) {
		p.best = n
	}
	if p.best == nil {
		return false
	}
	if p.bound == nil {
		p.bound = <-p.found
	}
	if !p.bound.ok {
		return true // and not sound
	}
	pri, est := p.best.spec.Priority, p.best.est
	top, topEst := p.bound.topPri[next], p.bound.topEst[next]
	return pri > top || pri == top && est >= topEst
}

// sound says whether the batch can no longer be refused (earlyStart),
// once consider has said yes.
func (p *earlyStart) sound(e *Engine, sub Submission) bool {
	return p.bound.ok && e.checkSubmitted(sub) == nil
}

// testHookStartedEarly, if set (by tests), is called on the loop once an
// early start's T1 is committed and its attempt launched, before the rest
// of the batch is admitted.
var testHookStartedEarly func()

// startEarly starts n, the best ready task of the batch's first k rows,
// in a transaction of its own with those rows (earlyStart). Its writes
// and effects are kept apart from the batch's, whose rows the stream
// holds; when it is not started after all, its writes are returned, to
// go in the batch after the stream's rows.
func (e *Engine) startEarly(n *node, st *store.TaskStream, k int) (notStarted *store.Batch) {
	batch, effects, stream := e.batch, e.effects, e.stream
	e.batch, e.effects, e.stream = store.Batch{}, nil, rowStream{}
	e.makeReady(n)
	e.startChosen()
	own, ownEffects := e.batch, e.effects
	e.batch, e.effects, e.stream = batch, effects, stream
	if n.rec.State != task.Running {
		// decide did not start it (given earlyStart's conditions it
		// always does): it stays ready, and what was written goes with
		// the batch, after the stream's rows.
		e.effects = append(e.effects, ownEffects...)
		return &own
	}
	err := st.CommitPrefix(k, &own)
	if err != nil && e.broken == nil {
		e.broken = fmt.Errorf("save state: %w", err)
		e.stopAll(e.broken)
	}
	for _, f := range ownEffects {
		f(err)
	}
	if testHookStartedEarly != nil {
		testHookStartedEarly()
	}
	return nil
}
