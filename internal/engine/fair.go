package engine

// Fair share between users: the ready queue is one B-tree per owner
// (task.Spec.Owner), merged when decide walks it by priority, then the
// owner's decayed usage, then submission; the usage is counted here, in
// the loop, and saved in the store's meta. See docs/daemon.md, "Fair
// share".

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/google/btree"

	"github.com/gpusched/gpusched/internal/task"
)

// DefaultFairShareHalfLife is how long it takes an owner's usage to halve
// when Config.FairShareHalfLife is 0.
const DefaultFairShareHalfLife = time.Hour

// metaUsage is the store's meta key under which the owners' usage is
// saved (JSON: owner -> usage).
const metaUsage = "fair_share_usage"

// owner is a user whose tasks the engine holds, owned by the loop.
type owner struct {
	id  string // task.Spec.Owner: a decimal uid; "" is the scheduler's own user
	idx int32  // its place in readySet.list, and Candidate.Owner
	// ready holds its ready tasks by priority, then submission; index
	// holds them too, once the set is indexed (gpuindex.go).
	ready *btree.BTreeG[*node]
	index gpuIndex
	// What its running attempts hold now: attempts, and GPU MiB charged.
	running int
	gpuMiB  int64
	use     usage
	label   string // its name for a person, once asked (ownerLabel)
}

// usage is an owner's decayed use of the machine as of At: the slots
// (attempts) and GPU memory it held, each multiplied by how long, and
// halved every half-life since.
type usage struct {
	SlotSec   float64   `json:"slot_s"`
	GPUMiBSec float64   `json:"gpu_mib_s"`
	At        time.Time `json:"at"`
}

// at returns u brought forward to now, for an owner that held slots
// attempts and mib MiB all along since u.At. The integral of a constant
// rate r over [At, now], each instant decayed to now, is
// r * H/ln2 * (1 - 2^(-dt/H)).
func (u usage) at(now time.Time, slots, mib float64, halfLife time.Duration) usage {
	dt := now.Sub(u.At)
	if u.At.IsZero() {
		return usage{At: now}
	}
	if dt <= 0 {
		return u
	}
	h := halfLife.Seconds()
	d := math.Exp2(-dt.Seconds() / h)
	k := h / math.Ln2 * (1 - d)
	return usage{SlotSec: u.SlotSec*d + slots*k, GPUMiBSec: u.GPUMiBSec*d + mib*k, At: now}
}

// share is the usage as one number: slot·seconds over the slots there are
// plus GPU MiB·seconds over the GPU memory there is (when known), that is
// seconds of the whole machine.
func (u usage) share(slots int, gpuMiB int64) float64 {
	s := u.SlotSec / float64(max(slots, 1))
	if gpuMiB > 0 {
		s += u.GPUMiBSec / float64(gpuMiB)
	}
	return s
}

// advance brings o's usage forward to now.
func (o *owner) advance(now time.Time, halfLife time.Duration) {
	o.use = o.use.at(now, float64(o.running), float64(o.gpuMiB), halfLife)
}

// readySet is the ready queue: one B-tree per owner. With one owner (every
// task's Owner equal) it is that owner's tree, walked as the single tree
// by priority and submission was. Owned by the loop.
type readySet struct {
	owners map[string]*owner
	list   []*owner // by idx
	n      int      // ready tasks, all owners together
	// How Ascend weighs owners: the clock reading of the decision, the
	// machine's slots and GPU memory, and the half-life. Set by the loop.
	now      time.Time
	slots    int
	gpuMiB   int64
	halfLife time.Duration
	cur      []cursor  // Ascend's, reused
	dirty    bool      // an attempt ended: save the usage (saveUsage)
	savedAt  time.Time // when the usage was last queued for a commit
	// indexed: the owners' GPU indexes are kept (since the first GPU task
	// was ready); rng draws their treap priorities.
	indexed bool
	rng     uint64
}

type cursor struct {
	o     *owner
	next  *node
	share float64
}

func newReadySet() *readySet {
	return &readySet{owners: map[string]*owner{}, halfLife: DefaultFairShareHalfLife, slots: 1}
}

// owner returns the owner named id, made on first sight.
func (r *readySet) owner(id string) *owner {
	if o, ok := r.owners[id]; ok {
		return o
	}
	o := &owner{id: id, idx: int32(len(r.list)), ready: btree.NewG(32, lessNode)}
	r.owners[id] = o
	r.list = append(r.list, o)
	return o
}

// ownerOf returns n's owner. (Looked up, not kept in the node: a node is
// 512 bytes, the most the runtime allocates and the garbage collector
// scans as a small object; 8 more cost BenchmarkDecide100kReady a third.)
func (r *readySet) ownerOf(n *node) *owner { return r.owner(n.spec.Owner) }

// ReplaceOrInsert adds n to its owner's queue.
func (r *readySet) ReplaceOrInsert(n *node) {
	o := r.ownerOf(n)
	_, found := o.ready.ReplaceOrInsert(n)
	if !found {
		r.n++
	}
	switch {
	case !r.indexed && n.localGPU():
		r.enableIndex()
	case r.indexed && !found:
		o.index.insert(n, r.nextPri())
	}
}

// Delete takes n out of its owner's queue.
func (r *readySet) Delete(n *node) {
	o := r.ownerOf(n)
	if _, found := o.ready.Delete(n); found {
		r.n--
		if r.indexed {
			o.index.remove(n)
		}
	}
}

// Len is the number of ready tasks.
func (r *readySet) Len() int { return r.n }

// Ascend calls fn on the ready tasks best first, until it returns false:
// by priority (higher first); among equal priority, the owner with the
// smaller usage share as of r.now first (a tie: the owner whose task comes
// first by lessNode); within an owner, lessNode's order (submission, or
// longest estimate first when estimates were given). The order is computed at
// each walk, so it follows the usage as it changes: nothing is re-sorted
// when it does.
func (r *readySet) Ascend(fn func(*node) bool) {
	r.walk(func(_ *owner, n *node) bool { return fn(n) })
}

// walk is Ascend, telling fn each task's owner too.
func (r *readySet) walk(fn func(*owner, *node) bool) { r.walkSkip(fn, nil) }

// walkSkip is walk; with skip (on an indexed set), through the owners'
// indexes, passing over the runs of an owner's tasks skip says to (of
// one priority when owners are merged: the other owners' tasks of that
// priority come between them and the next).
func (r *readySet) walkSkip(fn func(*owner, *node) bool, skip func(owner int32, s needSum) bool) {
	if !r.indexed {
		skip = nil // no index to ask
	}
	var only *owner
	count := 0
	for _, o := range r.list {
		if o.ready.Len() > 0 {
			only = o
			count++
		}
	}
	switch count {
	case 0:
		return
	case 1:
		if skip != nil {
			w := indexWalk{skip: skip, o: only}
			w.run(nil, fn)
			return
		}
		only.ready.Ascend(func(n *node) bool { return fn(only, n) })
		return
	}
	w := indexWalk{skip: skip, merge: true}
	cur := r.cur[:0]
	for _, o := range r.list {
		if n, ok := o.ready.Min(); ok {
			u := o.use.at(r.now, float64(o.running), float64(o.gpuMiB), r.halfLife)
			cur = append(cur, cursor{o: o, next: n, share: u.share(r.slots, r.gpuMiB)})
		}
	}
	defer func() { clear(cur); r.cur = cur[:0] }()
	for len(cur) > 0 {
		// The highest priority still to walk; the owners with tasks there
		// come first, lightest first.
		p := math.MinInt
		for _, c := range cur {
			p = max(p, c.next.spec.Priority)
		}
		slices.SortFunc(cur, func(a, b cursor) int {
			ap, bp := a.next.spec.Priority == p, b.next.spec.Priority == p
			switch {
			case ap != bp && ap:
				return -1
			case ap != bp:
				return 1
			case !ap:
				return 0
			}
			return cmp.Or(cmp.Compare(a.share, b.share), cmp.Compare(b.next.est, a.next.est), cmp.Compare(a.next.seq, b.next.seq))
		})
		for i := range cur {
			c := &cur[i]
			if c.next.spec.Priority != p {
				break
			}
			from, stop := c.next, false
			c.next = nil
			visit := func(n *node) bool {
				if n.spec.Priority != p {
					c.next = n
					return false
				}
				if !fn(c.o, n) {
					stop = true
					return false
				}
				return true
			}
			if skip != nil {
				w.o, w.prio = c.o, p
				w.run(from, func(_ *owner, n *node) bool { return visit(n) })
			} else {
				c.o.ready.AscendGreaterOrEqual(from, visit)
			}
			if stop {
				return
			}
		}
		cur = slices.DeleteFunc(cur, func(c cursor) bool { return c.next == nil })
	}
}

// loads returns what each owner holds now, by idx, for decide's caps.
func (r *readySet) loads() []OwnerLoad {
	out := make([]OwnerLoad, len(r.list))
	for i, o := range r.list {
		out[i] = OwnerLoad{Running: o.running, GPUMiB: o.gpuMiB}
	}
	return out
}

// charge counts an attempt of n that starts (or is adopted) now: its slot,
// and mib of GPU memory (0 for a CPU task), until uncharge.
func (e *Engine) charge(n *node, mib int64) {
	o := e.ready.ownerOf(n)
	o.advance(e.cfg.Now(), e.ready.halfLife)
	o.running++
	o.gpuMiB += mib
}

// uncharge counts the end of n's attempt, before its card is released:
// its use so far goes into its owner's usage, which is saved with a
// commit soon after (saveUsage).
func (e *Engine) uncharge(n *node) {
	o := e.ready.ownerOf(n)
	o.advance(e.cfg.Now(), e.ready.halfLife)
	o.running--
	o.gpuMiB -= chargedMiB(n)
	e.ready.dirty = true
}

// chargedMiB is the GPU memory n's running attempt was charged with: what
// it was admitted (or adopted) with; 0 off the GPUs.
func chargedMiB(n *node) int64 {
	if n.card < 0 || len(n.rec.Attempts) == 0 {
		return 0
	}
	a := &n.rec.Attempts[len(n.rec.Attempts)-1]
	cards := int64(max(len(a.GPUs), 1))
	if m := a.MemRequestedMiB; m > 0 {
		return m * cards
	}
	return n.need.MiB * cards
}

// usageEvery is how often, at most, the owners' usage is saved while
// attempts run.
const usageEvery = time.Second

// saveUsage queues the owners' usage for the turn's commit once an attempt
// ended since it was last saved: at most once per usageEvery while attempts
// run (a row of its own in every commit cost a sixth of the commit's pages
// with many short tasks), at once when none runs (the end of a run, Close).
// It returns when it is to be saved next, zero if not. What a crash loses
// is at most that second of usage, which fair share can spare.
func (e *Engine) saveUsage() time.Time {
	if !e.ready.dirty {
		return time.Time{}
	}
	now := e.cfg.Now()
	if next := e.ready.savedAt.Add(usageEvery); e.running > 0 && e.closing == nil && now.Before(next) {
		return next
	}
	e.ready.dirty = false
	e.ready.savedAt = now
	m := make(map[string]usage, len(e.ready.list))
	for _, o := range e.ready.list {
		o.advance(now, e.ready.halfLife)
		if o.use.SlotSec > 0 || o.use.GPUMiBSec > 0 {
			m[o.id] = o.use
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return time.Time{} // floats and times: cannot fail
	}
	if e.batch.Meta == nil {
		e.batch.Meta = map[string]string{}
	}
	e.batch.Meta[metaUsage] = string(b)
	return time.Time{}
}

// loadUsage reads the owners' usage an earlier engine saved. What ran
// while no scheduler counted it (between that save and now) is not
// counted; adopted attempts count from their adoption.
func (e *Engine) loadUsage() error {
	s, ok, err := e.cfg.Store.LookupMeta(metaUsage)
	if err != nil || !ok {
		return err
	}
	var m map[string]usage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil // unreadable: start afresh rather than refuse to open
	}
	for id, u := range m {
		e.ready.owner(id).use = u
	}
	return nil
}

// atCap reports whether n's owner is at a per-user cap that n may not
// pass, by decide's rule.
func (e *Engine) atCap(n *node) bool {
	o := e.ready.ownerOf(n)
	k := caps{running: e.cfg.UserMaxRunning, gpuMiB: e.cfg.UserMaxGPUMiB, owners: []OwnerLoad{{Running: o.running, GPUMiB: o.gpuMiB}}}
	return k.held(0, n.localGPU(), n.need.MiB)
}

// capReason is why n, passed over for a per-user cap, waits: which cap
// its owner is at.
func (e *Engine) capReason(n *node) task.WaitReason {
	o := e.ready.ownerOf(n)
	who := e.ownerLabel(o)
	detail := ""
	if c := e.cfg.UserMaxRunning; c > 0 && o.running >= c {
		tasks := "tasks"
		if o.running == 1 {
			tasks = "task"
		}
		detail = fmt.Sprintf("%s has %d %s running (cap %d)", who, o.running, tasks, c)
	} else {
		detail = fmt.Sprintf("%s has %d MiB of GPU memory charged (cap %d); this task asks %d MiB",
			who, o.gpuMiB, e.cfg.UserMaxGPUMiB, n.need.MiB)
	}
	return task.WaitReason{Kind: task.WaitUserCap, Detail: detail}
}

// ownerLabel names o for a person: Config.OwnerName's answer, else
// "user <uid>" ("the scheduler's user" for the empty owner).
func (e *Engine) ownerLabel(o *owner) string {
	if o.label == "" {
		if f := e.cfg.OwnerName; f != nil {
			o.label = f(o.id)
		}
		switch {
		case o.label != "":
		case o.id == "":
			o.label = "the scheduler's user"
		default:
			if _, err := strconv.ParseUint(o.id, 10, 32); err == nil {
				o.label = "user " + o.id
			} else {
				o.label = strconv.Quote(o.id)
			}
		}
	}
	return o.label
}

// Usage returns each owner's decayed usage now, as a share of the machine
// in seconds (see readySet.Ascend), for status and tests.
func (e *Engine) Usage() map[string]float64 {
	reply := make(chan map[string]float64, 1)
	if !e.send(usageEvent{reply}) {
		return nil
	}
	m, _ := await(e, reply)
	return m
}

type usageEvent struct{ reply chan map[string]float64 }

func (ev usageEvent) apply(e *Engine) {
	now := e.cfg.Now()
	out := map[string]float64{}
	for _, o := range e.ready.list {
		u := o.use.at(now, float64(o.running), float64(o.gpuMiB), e.ready.halfLife)
		out[o.id] = u.share(e.ready.slots, e.ready.gpuMiB)
	}
	ev.reply <- out
}
