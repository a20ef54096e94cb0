package engine

// The GPU index: how decide passes over, in O(log n), runs of waiting GPU
// tasks that it would only pass over again with the reason they carry.
//
// With thousands of GPU tasks waiting for memory, most decisions start
// nothing and report nothing: every waiting task is looked at, does not
// fit, and keeps its reason. The index is, per owner, a second ordered
// tree over the same ready tasks (a treap, in the ready queue's order),
// each of whose subtrees carries a summary of its tasks: whether one is
// not a plain waiting GPU task, and for the plain ones the least and most
// GPU memory they ask by the reason they carry, the most cores and host
// memory, the lowest priority and the longest wait. The walk goes through
// the queue's B-tree as before; at a task that may be passed over, it
// asks the index for the first task from there that decide must look at,
// passing over whole each subtree on the way of which every task would be
// passed over with its own reason and change nothing (skipper), and goes
// on from that task (indexWalk). Everything else is visited in exactly
// the order and with exactly the questions of the full walk, so the
// decisions are the same (TestIndexedDecideMatchesFullWalk,
// TestSimulationThroughTheIndex and, in every engine test, verifyIndex
// compare them).
//
// What the skipper assumes of decide's rules (a change to them shows in
// those tests): a plain task reserves only while nothing is reserved in
// the decision, ReserveAfter is not negative and it has waited that long;
// it fits a card only if the card takes work, is not held exclusively and
// has its memory left, and, on a card reserved in the decision, only if
// the reservation holds memory and the task leaves it that; passed over,
// its reason is roomWhy over measureKept's figures.
//
// The index is built when the first GPU task becomes ready (a queue of CPU
// tasks never pays for it), and kept by the ready set's insert and delete
// and by the engine when a ready task's reason changes (readySet.refresh).
// decide stays pure: the summaries are input data, read through the
// queue (skipQueue); a queue without them gets the full walk.

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// skipQueue is a Queue that can pass over subtrees of ready tasks: it
// calls skip with the summary of a run of tasks, of one owner (its index
// in View.Owners), that comes next in the walk, and passes the run over
// without calling fn when skip says so.
type skipQueue interface {
	Queue
	AscendSkip(fn func(Candidate) bool, skip func(owner int32, s needSum) bool)
}

// needSum sums up a run of ready tasks for skipper. A plain task is a
// GPU task on this machine's cards, on one card, not exclusive, asking no
// custom resource, whose reason is gpu-memory, card-reserved or
// card-unavailable; the others set other and are otherwise left out.
type needSum struct {
	other   bool  // a task is not plain
	cpus    int32 // the most cores a plain task takes
	lowPrio int32 // the lowest priority (saturated to int32)
	hostMiB int64 // the most host memory a plain task takes
	// GPU memory asked: the least and the most of every plain task; the
	// least of those that wait for gpu-memory; the most of those that wait
	// for a reserved card; the least and most of those that wait for an
	// unavailable card. (Empty: MaxInt64 for a least, MinInt64 for a most.)
	minMiB, maxMiB int64
	memLo, resHi   int64
	unavLo, unavHi int64
	oldest         *time.Time // the earliest ReadySince of a plain task; nil: none
}

// emptySum sums up no task.
var emptySum = needSum{lowPrio: math.MaxInt32, minMiB: math.MaxInt64, maxMiB: math.MinInt64,
	memLo: math.MaxInt64, resHi: math.MinInt64, unavLo: math.MaxInt64, unavHi: math.MinInt64}

// add adds the tasks t sums up to s.
func (s *needSum) add(t *needSum) {
	s.other = s.other || t.other
	s.cpus = max(s.cpus, t.cpus)
	s.lowPrio = min(s.lowPrio, t.lowPrio)
	s.hostMiB = max(s.hostMiB, t.hostMiB)
	s.minMiB, s.maxMiB = min(s.minMiB, t.minMiB), max(s.maxMiB, t.maxMiB)
	s.memLo, s.resHi = min(s.memLo, t.memLo), max(s.resHi, t.resHi)
	s.unavLo, s.unavHi = min(s.unavLo, t.unavLo), max(s.unavHi, t.unavHi)
	if t.oldest != nil && (s.oldest == nil || t.oldest.Before(*s.oldest)) {
		s.oldest = t.oldest
	}
}

// own is what the index keeps of one task, so that summing a subtree up
// or finding the task reads no task: its class (0: not plain; else the
// reason it waits), the GPU memory, cores and host memory it asks, and
// its place in the queue (priority, saturated to int32, estimate rank and
// submission). (And its node's treap priority, pri, which fills the
// padding: an inode is 144 bytes, a size class; for that, the cores are
// 16 bits: a task asking more is not plain.)
type own struct {
	mib, hostMiB int64
	seq          int64
	prio         int32
	est          int32
	pri          uint32
	cpus         uint16
	class        task.WaitKind
}

// ownOf is what the index keeps of n as it is now.
func ownOf(n *node) own {
	o := own{prio: int32(min(max(n.spec.Priority, math.MinInt32), math.MaxInt32)), est: n.est, seq: n.seq}
	r := &n.spec.Resources
	switch k := n.rec.Waiting.Kind; {
	case !n.localGPU(), n.need.Count > 1, n.need.Exclusive, n.need.MiB < 0, len(r.Counters) > 0, r.CPUCount() > math.MaxUint16:
	case k == task.WaitGPUMemory, k == task.WaitCardReserved, k == task.WaitCardUnavailable:
		o.class, o.mib, o.hostMiB, o.cpus = k, n.need.MiB, r.MemoryMiBHost, uint16(r.CPUCount())
	}
	return o
}

// sum sums up x's own task.
func (x *inode) ownSum() needSum {
	o := &x.own
	s := emptySum
	s.lowPrio = o.prio
	if o.class == task.NotWaiting {
		s.other = true
		return s
	}
	s.cpus, s.hostMiB, s.oldest = int32(o.cpus), o.hostMiB, &x.n.readySince // an address: the node is not read
	s.minMiB, s.maxMiB = o.mib, o.mib
	switch o.class {
	case task.WaitGPUMemory:
		s.memLo = o.mib
	case task.WaitCardReserved:
		s.resHi = o.mib
	case task.WaitCardUnavailable:
		s.unavLo, s.unavHi = o.mib, o.mib
	case task.NotWaiting, task.WaitDependencies, task.WaitSlot, task.WaitGPUUnknown,
		task.WaitRetryDelay, task.WaitBackoff, task.WaitPaused, task.WaitUserCap,
		task.WaitQueued, task.WaitCPU, task.WaitHostMemory, task.WaitResource:
		// these reasons bound no card rule: the sum keeps only the memory,
		// cores, host memory and wait set above
	}
	return s
}

// inode is a task in an owner's index: a treap node, ordered as the ready
// queue (lessNode), heap-ordered by own.pri.
type inode struct {
	l, r *inode
	n    *node
	sum  needSum // of the subtree
	own  own
}

// key is a task's place in the queue, for finding it in the index
// without reading the tasks on the way.
type key struct {
	prio int
	seq  int64
	est  int32
}

func keyOf(n *node) key { return key{n.spec.Priority, n.seq, n.est} }

// before reports whether x's task comes before k in the queue (lessNode).
func (x *inode) before(k key) bool {
	p := int(x.own.prio)
	if p == math.MinInt32 || p == math.MaxInt32 {
		p = x.n.spec.Priority // saturated: read the task
	}
	if p != k.prio {
		return p > k.prio
	}
	if x.own.est != k.est {
		return x.own.est > k.est
	}
	return x.own.seq < k.seq
}

// fix sums x's subtree up again from its own task and its children's
// sums; it reports whether the sum changed (if not, nor do those above).
func (x *inode) fix() bool {
	s := x.ownSum()
	if x.l != nil {
		s.add(&x.l.sum)
	}
	if x.r != nil {
		s.add(&x.r.sum)
	}
	changed := s != x.sum
	x.sum = s
	return changed
}

// gpuIndex is an owner's index: its ready tasks, in queue order.
type gpuIndex struct{ root *inode }

// insert adds n, whose key no task in the index has, with treap priority pri.
func (ix *gpuIndex) insert(n *node, pri uint32) {
	x := &inode{n: n, own: ownOf(n)}
	x.own.pri = pri
	ix.root, _ = insertNode(ix.root, x, keyOf(n))
}

// insertNode inserts x, whose key is k, into t, and reports whether t's
// sum changed.
func insertNode(t, x *inode, k key) (*inode, bool) {
	if t == nil {
		x.fix()
		return x, true
	}
	if x.own.pri > t.own.pri {
		was := t.sum
		x.l, x.r = split(t, k)
		x.fix()
		return x, x.sum != was
	}
	var changed bool
	if t.before(k) {
		t.r, changed = insertNode(t.r, x, k)
	} else {
		t.l, changed = insertNode(t.l, x, k)
	}
	if changed {
		changed = t.fix()
	}
	return t, changed
}

// split splits t into the tasks before k and the others.
func split(t *inode, k key) (before, after *inode) {
	if t == nil {
		return nil, nil
	}
	if t.before(k) {
		t.r, after = split(t.r, k)
		t.fix()
		return t, after
	}
	before, t.l = split(t.l, k)
	t.fix()
	return before, t
}

// merge joins a and b, every task of a before every task of b.
func merge(a, b *inode) *inode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.own.pri > b.own.pri:
		a.r = merge(a.r, b)
		a.fix()
		return a
	}
	b.l = merge(a, b.l)
	b.fix()
	return b
}

// remove takes n out of the index, if it is there.
func (ix *gpuIndex) remove(n *node) {
	ix.root, _ = removeNode(ix.root, n, keyOf(n))
}

// removeNode removes n from t, and reports whether t's sum may have
// changed (false when n is not there).
func removeNode(t *inode, n *node, k key) (*inode, bool) {
	if t == nil {
		return nil, false
	}
	if t.n == n {
		return merge(t.l, t.r), true
	}
	var changed bool
	if t.before(k) {
		t.r, changed = removeNode(t.r, n, k)
	} else {
		t.l, changed = removeNode(t.l, n, k)
	}
	if changed {
		changed = t.fix()
	}
	return t, changed
}

// refresh reads n again (its reason changed), if it is in the index.
func (ix *gpuIndex) refresh(n *node) { refreshNode(ix.root, n, keyOf(n)) }

// refreshNode reads n again, and reports whether t's sum changed.
func refreshNode(t *inode, n *node, k key) bool {
	if t == nil {
		return false
	}
	if t.n == n {
		pri := t.own.pri
		t.own = ownOf(n)
		t.own.pri = pri
		return t.fix()
	}
	var changed bool
	if t.before(k) {
		changed = refreshNode(t.r, n, k)
	} else {
		changed = refreshNode(t.l, n, k)
	}
	return changed && t.fix()
}

// indexWalk is walkSkip's walk of an owner's queue: the queue's B-tree,
// as walk does, except that a task that may be passed over sends the
// walk through the index to the first task from it that is not (every
// subtree and task on the way that skip says to is passed over), and the
// B-tree walk goes on from there. A queue of tasks decide must all look
// at is walked as without the index.
type indexWalk struct {
	skip  func(owner int32, s needSum) bool
	o     *owner
	prio  int  // merge: the priority of the owner's run being walked
	merge bool // owners merged: pass over only tasks of prio
}

// run walks w.o's queue from from (nil: its first task), calling fn on
// the tasks not passed over until fn returns false. (fn is passed down,
// not kept in w: a function called from a field escapes, and with it
// what the caller's closure holds.)
func (w *indexWalk) run(from *node, fn func(*owner, *node) bool) {
	var jump, landed *node
	stopped := false
	visit := func(n *node) bool {
		if k := n.rec.Waiting.Kind; n != landed && (k == task.WaitGPUMemory || k == task.WaitCardReserved || k == task.WaitCardUnavailable) {
			switch x := w.first(w.o.index.root, keyOf(n)); {
			case x == nil: // every task from n on is passed over
				return false
			case x.n != n:
				jump = x.n
				return false
			}
		}
		if !fn(w.o, n) {
			stopped = true
			return false
		}
		return true
	}
	for {
		if from == nil {
			w.o.ready.Ascend(visit)
		} else {
			w.o.ready.AscendGreaterOrEqual(from, visit)
		}
		if stopped || jump == nil {
			return
		}
		from, landed, jump = jump, jump, nil
	}
}

// passes reports whether the tasks s sums up are passed over. (s is
// handed to skip by value: a pointer would move a task's own summary, and
// the walk, to the heap.)
func (w *indexWalk) passes(s *needSum) bool {
	return !s.other && (!w.merge || int(s.lowPrio) == w.prio) && w.skip(w.o.idx, *s)
}

// passesOwn reports whether x's own task is passed over.
func (w *indexWalk) passesOwn(x *inode) bool {
	if x.own.class == task.NotWaiting {
		return false
	}
	one := x.ownSum()
	return w.passes(&one)
}

// first returns the first task of t not before k that is not passed over
// (nil: none), passing over those before it, in order.
func (w *indexWalk) first(t *inode, k key) *inode {
	for t != nil {
		if t.before(k) {
			t = t.r
			continue
		}
		if x := w.first(t.l, k); x != nil {
			return x
		}
		if !w.passesOwn(t) {
			return t
		}
		return w.firstOf(t.r)
	}
	return nil
}

// firstOf is first over all of t.
func (w *indexWalk) firstOf(t *inode) *inode {
	for t != nil {
		if w.passes(&t.sum) {
			return nil
		}
		if x := w.firstOf(t.l); x != nil {
			return x
		}
		if !w.passesOwn(t) {
			return t
		}
		t = t.r
	}
	return nil
}

// skipper answers, for decide, whether a run of waiting tasks would all be
// passed over with the reason they carry, changing nothing.
type skipper struct {
	d *decision
	// What it read of the cards, and the plan's size when it did (the
	// cards change only with a start or a reservation), and whether the
	// kept cards were noted then.
	starts, reserved int
	read, keptNoted  bool
	fitMax           int64 // no plain task asking more fits on any card now
	// measureKept's figures as it would find them now: over the cards
	// kept, or that would be kept once noted.
	roomReserved, roomResting int64
	kept                      []int // scratch
}

// passesOver reports whether decide, coming to the tasks s sums up (of
// owner), would pass over every one with the reason it carries, starting
// nothing, reserving nothing and holding nothing back: each is a plain
// GPU task whose owner is at no cap it could reach, that the machine's
// cores and memory would take, that fits on no card now, that would not
// reserve cards, and whose reason is the one decide would give it. Then,
// as the first of them would have, it notes the cards kept off.
func (k *skipper) passesOver(owner int32, s needSum) bool {
	d := k.d
	if s.other || !d.gpuKnown {
		return false
	}
	if c := d.caps; c != nil {
		if int(owner) < len(c.owners) {
			o := &c.owners[owner]
			if c.running > 0 && o.Running >= c.running || c.gpuMiB > 0 && o.GPUMiB > 0 && s.maxMiB > c.gpuMiB-o.GPUMiB {
				return false
			}
		}
		if h := &c.host; h.on && (s.cpus > 0 && int(s.cpus) > h.cpus || s.hostMiB > 0 && s.hostMiB > h.mib) {
			return false
		}
	}
	if d.p.Reserved == nil && d.reserveAfter >= 0 && s.oldest != nil && d.now.Sub(*s.oldest) >= d.reserveAfter {
		return false
	}
	if !k.read || k.starts != len(d.p.Starts) || k.reserved != len(d.p.Reserved) || k.keptNoted != (d.kept != nil) {
		k.readCards()
	}
	// The room decide gives reasons by: none when no card is kept; the
	// figures measureKept found, until they are stale (a card was reserved
	// or its reservation ended: a task started on a kept card leaves them
	// as they were); else what it will find.
	r, u := k.roomReserved, k.roomResting
	switch {
	case d.kept != nil && len(d.kept) == 0:
		r, u = -1, -1
	case d.kept != nil && !d.stale:
		r, u = d.roomReserved, d.roomResting
	}
	if s.minMiB <= k.fitMax ||
		s.memLo <= max(r, u) || // gpu-memory: room on no kept card
		s.resHi > r || // card-reserved: room on a reserved card
		s.unavLo <= r || s.unavHi > u { // card-unavailable: room only on a resting card
		return false
	}
	// As the first of them would have: note the kept cards, measure them.
	if d.kept == nil {
		d.kept, d.stale = keptCards(make([]int, 0), d.cards), true
	}
	if len(d.kept) > 0 && d.stale {
		d.measureKept()
	}
	return true
}

// readCards reads the cards as they are now: the most memory a plain
// task may ask and still fit one (a card that takes work and is not held
// exclusively, its memory left; for one reserved in this decision, less
// the memory the reservation holds, or none when it holds the whole card;
// one reserved before this decision is counted whole, as its task may be
// in the queue), and the room on the kept cards as measureKept would find
// it now.
// (The reserved ones counted so follow gpu.Holds; TestIndexedDecideMatches-
// FullWalk checks that they still do.)
func (k *skipper) readCards() {
	d := k.d
	k.read, k.starts, k.reserved = true, len(d.p.Starts), len(d.p.Reserved)
	k.fitMax = math.MinInt64
	for i := range d.cards {
		c := &d.cards[i]
		if !c.Takes() || c.Exclusive {
			continue
		}
		room := c.AvailableMiB
		if c.ReservedFor != "" && d.p.Reserved[c.Index] == c.ReservedFor {
			if c.ReservedMiB <= 0 {
				continue
			}
			room -= c.ReservedMiB
		}
		k.fitMax = max(k.fitMax, room)
	}
	k.keptNoted = d.kept != nil
	kept := d.kept
	if kept == nil {
		k.kept = keptCards(k.kept[:0], d.cards)
		kept = k.kept
	}
	k.roomReserved, k.roomResting = keptRoom(d.cards, kept)
}

// walk hands decide's visit the ready tasks in queue order: through the
// index when the queue has one and the cards are known, passing over the
// runs that would change nothing; else every one.
func (d *decision) walk(q Queue, visit func(Candidate) bool) {
	if sq, ok := q.(skipQueue); ok && d.gpuKnown {
		k := &skipper{d: d}
		sq.AscendSkip(visit, k.passesOver)
		return
	}
	q.Ascend(visit)
}

// candidateOf is n, of owner o, as decide sees it.
func candidateOf(o *owner, n *node) Candidate {
	return Candidate{ID: n.spec.ID, Priority: n.spec.Priority, Seq: n.seq, Owner: o.idx,
		GPU: n.localGPU(), Remote: n.placed, Need: n.need, ReadySince: n.readySince, Res: &n.spec.Resources, Waiting: n.rec.Waiting.Kind}
}

// AscendSkip is Ascend through the owners' indexes, passing over the runs
// skip says to; without indexes (no GPU task was ever ready), Ascend.
func (q readyQueue) AscendSkip(fn func(Candidate) bool, skip func(owner int32, s needSum) bool) {
	if !q.t.indexed {
		q.Ascend(fn)
		return
	}
	q.t.walkSkip(func(o *owner, n *node) bool { return fn(candidateOf(o, n)) }, skip)
}

// enableIndex builds every owner's index from its queue; from then on the
// ready set keeps them.
func (r *readySet) enableIndex() {
	r.indexed = true
	for _, o := range r.list {
		o.index = gpuIndex{}
		o.ready.Ascend(func(n *node) bool {
			o.index.insert(n, r.nextPri())
			return true
		})
	}
}

// nextPri is a treap priority: xorshift, from a fixed seed, so that runs
// are reproducible.
func (r *readySet) nextPri() uint32 {
	if r.rng == 0 {
		r.rng = 0x9e3779b97f4a7c15
	}
	r.rng ^= r.rng << 13
	r.rng ^= r.rng >> 7
	r.rng ^= r.rng << 17
	return uint32(r.rng >> 32)
}

// refresh reads ready task n again into its owner's index: its reason
// changed.
func (r *readySet) refresh(n *node) {
	if r.indexed {
		r.ownerOf(n).index.refresh(n)
	}
}

// fullWalk hides a queue's index: decide walks every task, as it did
// before the index (the decisions the index must reproduce).
type fullWalk struct{ q Queue }

func (f fullWalk) Ascend(fn func(Candidate) bool) { f.q.Ascend(fn) }

// verifyIndex, set by this package's tests, has the engine make every
// decision by the full walk too, and panic where the two differ: every
// test that runs the loop checks the engine's upkeep of the index.
var verifyIndex bool

// decideVerified is decide, checked against the full walk when
// verifyIndex is set.
func decideVerified(v View) Plan {
	if !verifyIndex {
		return decide(v)
	}
	full := v
	full.Ready = fullWalk{v.Ready}
	full.Cards = slices.Clone(v.Cards)
	for i := range full.Cards {
		full.Cards[i].Holders = slices.Clone(full.Cards[i].Holders)
	}
	want := decide(full)
	got := decide(v)
	if !reflect.DeepEqual(got, want) {
		panic(fmt.Sprintf("decide through the GPU index:\n%+v\nby the full walk:\n%+v", got, want))
	}
	return got
}
