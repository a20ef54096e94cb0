package engine

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// Candidate is a ready task as decide sees it.
type Candidate struct {
	ID       string
	Priority int
	Seq      int64 // submission order
	// GPU tasks: what the task needs, and since when it has been ready.
	GPU bool
	// Remote: its executor runs it elsewhere (Slurm): it takes none of
	// this machine's cores or memory, only custom resources.
	Remote bool
	// Owner is the task's owner's place in View.Owners. (Here, beside
	// GPU, it takes no room: decide copies candidates by the thousand.)
	Owner      int32
	Need       gpu.Need
	ReadySince time.Time
	// Res is the task's request, read for the cores, host memory and
	// custom resources it takes when View.Host counts them; nil: one
	// core and nothing else.
	Res *task.ResourceRequest
	// Waiting is the kind of reason the engine holds for the task now, so
	// that decide reports only the reasons that change.
	Waiting task.WaitKind
}

// Queue yields ready tasks best first: higher priority, then (among
// owners) the owner with less usage, then earlier submission. Ascend stops
// when fn returns false.
type Queue interface {
	Ascend(fn func(Candidate) bool)
}

// View is everything decide may look at: a snapshot, not live state.
type View struct {
	// Free is the number of attempts that may start now (parallel slots
	// left).
	Free int
	// Ready is the queue of tasks whose dependencies are all complete.
	Ready Queue
	// Now is the clock reading the decision is made at.
	Now time.Time

	// GPUKnown is false when the GPU state cannot be read: no GPU task
	// starts then.
	GPUKnown bool
	// Cards are the cards as admission sees them. decide books the tasks
	// it starts on them, so the caller passes a copy.
	Cards []gpu.CardView
	// Placement chooses among cards a task fits on.
	Placement gpu.Placement
	// Topology is how close the cards are, for a task on several cards;
	// nil: no set of cards is preferred to another.
	Topology *gpu.Topology
	// ReserveAfter: a GPU task ready for this long that still does not
	// fit reserves a card (a task on several cards, as many), which then
	// takes only tasks that leave it the room it holds. Negative: never.
	ReserveAfter time.Duration
	// Reserved are the last decision's reservations (card index to
	// task): a task on several cards that still starves keeps the cards it
	// had while they can still be reserved, so that they drain.
	Reserved map[int]string

	// Per-user caps (0: none). A task whose owner is at one is passed
	// over (task.WaitUserCap): UserMaxRunning attempts running, or, for
	// a GPU task, UserMaxGPUMiB that its request would go over (unless
	// its owner has no GPU memory charged). Owners, by Candidate.Owner,
	// is what each owner holds now; read only when a cap is set. decide
	// counts its starts in a copy.
	UserMaxRunning int
	UserMaxGPUMiB  int64
	Owners         []OwnerLoad

	// Host is what is free of the machine's cores, host memory and
	// custom resources; nil: they are not counted, every task fits.
	Host *HostView
}

// HostView is what is free of the machine's cores, host memory budget and
// custom resources, once the running attempts' shares are taken (it may
// be below zero: an adopted attempt took more than was free). decide
// counts the tasks it starts in a copy.
type HostView struct {
	CPUs      int
	MemoryMiB int64
	// Counters are the units free of each custom resource, by name; a
	// resource not there has none.
	Counters map[string]int
	// ReserveAfter: a task ready for this long that does not fit holds
	// back what it needs (see decide). Negative: never.
	ReserveAfter time.Duration
}

// OwnerLoad is what an owner's running attempts hold.
type OwnerLoad struct {
	Running int   // attempts
	GPUMiB  int64 // GPU memory charged
}

// Action is a decision to start a ready task, on a card for a GPU task
// (the first of them for a task on several: Plan.Sets has them all).
type Action struct {
	TaskID string
	Card   int // index into View.Cards; -1 for a CPU task
}

// Plan is decide's answer.
type Plan struct {
	Starts []Action
	// Sets are, for each task started on several cards, all of them
	// (indices into View.Cards) in the order chosen, Action.Card first;
	// nil when no such task starts. (Not in Action: a plan of one-card
	// starts stays as small as it was.)
	Sets map[string][]int
	// Reserved maps a card's index (nvidia-smi's) to the starving task that
	// has it reserved.
	Reserved map[int]string
	// Passed are the ready tasks decide looked at and passed over whose
	// reason is not the one their Candidate carries. A ready task decide
	// did not pass over waits for a slot, or keeps the reason the last
	// decision that looked at it gave.
	Passed []Pass
}

// HostHeldFor names the task the machine's cores, memory and custom
// resources are held for: ready for View.Host.ReserveAfter, it still did
// not fit (its Pass says Holds). "" when none is.
func (p *Plan) HostHeldFor() string {
	for i := range p.Passed {
		if p.Passed[i].Holds {
			return p.Passed[i].TaskID
		}
	}
	return ""
}

// Pass is a ready task passed over, and why.
type Pass struct {
	TaskID string
	Why    task.WaitKind
	// Held: a host resource (Why: cpus, host-memory or resource) would
	// have room for it but for what is held for Plan.HostHeldFor.
	Held bool
	// Holds: what it needs of the machine's resources is held for it
	// (Plan.HostHeldFor names it). Such a pass is in every plan that
	// holds them, whether its reason changed or not.
	Holds bool
}

// decide returns the tasks to start now, best first, and the cards held
// for starving GPU tasks. It is a pure function of the view: no clock, no
// I/O, no engine state.
//
// Ready tasks are taken in queue order while parallel slots remain. A CPU
// task starts. A GPU task starts on the card Fit picks; one that fits
// nowhere is passed over, so smaller tasks behind it may start (backfill).
// But once it has been ready for ReserveAfter, the first such task in the
// queue reserves the card likely to have its room soonest (gpu.Reserve:
// the card whose tasks that must leave have run least, then the one
// closest to holding it), and no task after it in the queue starts there
// unless it leaves the reserved task its memory (which, on that card, it
// cannot: the task would have fitted); as tasks on that card finish, it
// fits. One task at most has cards reserved at a
// time: reserving a card for every waiting big task would stop
// backfilling everywhere (the simulation in sim_test.go measures this). A
// CPU-only queue is walked only as far as tasks start, so choosing costs
// nothing like the number of ready tasks; and a queue with a GPU index
// (gpuindex.go) lets the walk pass over, a run at a time, the waiting GPU
// tasks it would only pass over again with the reasons they carry, so
// that a decision over thousands of them costs about as much as one over
// the few that start or change.
//
// A task on several cards (Need.Count > 1) starts when that many cards
// hold it now, on the closest set of them (gpu.FitSet, by View.Topology);
// else it is passed over like a task that fits nowhere. When it is the
// first starving task, it reserves that many cards (gpu.ReserveSet: the
// closest, then those likely to have its room soonest, then those with the
// most memory left; the same cards as in the last decision while they can
// still be reserved), but only when that is cheap or overdue
// (reservesNow, reserve.go: the cards lack at most a tenth of its memory,
// or it has waited its width times wideReservePerCard); until then it is
// passed over without reserving, and the first starving task on one card
// behind it may reserve instead (only the first starving task on several
// cards is considered, so that a queue of them costs one choice of cards). Tasks behind a reservation start on its cards only
// if they leave it its memory, so cards that already have its room keep
// working while the others drain, and none is held idle beyond the memory
// it will take.
//
// The queue comes in the fair order (priority, then the owner's usage,
// then submission: readySet). A task whose owner is at a per-user cap
// (View.UserMaxRunning, UserMaxGPUMiB) is passed over with
// task.WaitUserCap, and the walk goes on; decide counts the tasks it starts
// against their owners' caps.
//
// A GPU task passed over is reported in Plan.Passed when its reason
// changed: the GPU state is unknown, a card that would hold it is reserved
// for another task or is cooling down or quarantined, or no card has room.
//
// With View.Host, a task (CPU or GPU) starts only if what it takes of the
// machine fits too: its cores (1 unless it asks more), its host memory
// budget, its units of custom resources. One that does not fit is passed
// over (task.WaitCPU, WaitHostMemory, WaitResource), and tasks behind it
// may start (backfill). Once it has been ready for Host.ReserveAfter, the
// first such task in the queue holds back all it needs: what is free of
// each of those resources is kept for it, so no task after it that takes
// from them starts (every task here takes a core: none does, but the
// tasks of executors that run them elsewhere, which take none, and only
// custom resources they share not). As running tasks end, it fits. One
// task at most holds resources at a time, as for cards.
func decide(v View) Plan {
	if v.Free <= 0 || v.Ready == nil {
		return Plan{}
	}
	d := &decision{free: int32(min(v.Free, math.MaxInt32)), cards: v.Cards, placement: v.Placement, now: v.Now, reserveAfter: v.ReserveAfter, gpuKnown: v.GPUKnown,
		topo: v.Topology, held: v.Reserved}
	if (v.UserMaxRunning > 0 || v.UserMaxGPUMiB > 0) && len(v.Owners) > 0 {
		d.caps = &limits{caps: caps{running: v.UserMaxRunning, gpuMiB: v.UserMaxGPUMiB, owners: slices.Clone(v.Owners)}}
	}
	if h := v.Host; h != nil {
		if d.caps == nil {
			d.caps = &limits{} // no per-user cap: a zero caps holds no one back
		}
		d.caps.host = hostFree{on: true, cpus: h.CPUs, mib: h.MemoryMiB, counters: h.Counters, reserveAfter: h.ReserveAfter}
	}
	d.walk(v.Ready, func(c Candidate) bool {
		p := &d.p
		if d.caps != nil && d.caps.held(c.Owner, c.GPU, c.Need.MiB*int64(c.Need.Cards())) {
			d.pass(&c, task.WaitUserCap)
			return true
		}
		if d.caps != nil && d.caps.host.on && !d.hostFits(&c) {
			return true
		}
		if !c.GPU {
			p.Starts = append(p.Starts, Action{TaskID: c.ID, Card: -1})
			d.took(&c)
			d.free--
			if d.caps != nil {
				d.caps.count(c.Owner, false, 0)
			}
			return d.free > 0
		}
		if !d.gpuKnown {
			d.pass(&c, task.WaitGPUUnknown)
			return true
		}
		if c.Need.Count > 1 {
			return d.several(&c)
		}
		if i := gpu.Fit(d.cards, c.Need, d.placement, c.ID); i >= 0 {
			card := &d.cards[i]
			gpu.Charge(card, c.Need, c.ID)
			if card.ReservedFor == c.ID {
				card.ReservedFor = ""
				delete(p.Reserved, card.Index)
				d.stale = true
			}
			p.Starts = append(p.Starts, Action{TaskID: c.ID, Card: i})
			d.took(&c)
			d.free--
			if d.caps != nil {
				d.caps.count(c.Owner, true, c.Need.MiB)
			}
			return d.free > 0
		}
		if d.kept == nil {
			d.kept, d.stale = keptCards(make([]int, 0), d.cards), true // not nil from now on
		}
		if p.Reserved == nil && d.reserveAfter >= 0 && d.now.Sub(c.ReadySince) >= d.reserveAfter {
			if i := gpu.Reserve(d.cards, c.Need, d.now); i >= 0 {
				d.cards[i].ReservedFor, d.cards[i].ReservedMiB = c.ID, gpu.Reservation(c.Need)
				p.Reserved = map[int]string{d.cards[i].Index: c.ID}
				d.kept, d.stale = append(d.kept, i), true
			}
		}
		// Why it waits, as passedWhy says, in constant time for a task
		// that is not exclusive.
		why := task.WaitGPUMemory
		switch {
		case len(d.kept) == 0:
		case c.Need.Exclusive:
			why = passedWhy(d.cards, d.kept, c.Need)
		default:
			if d.stale {
				d.measureKept()
			}
			why = roomWhy(c.Need.MiB, d.roomReserved, d.roomResting)
		}
		d.pass(&c, why)
		return true
	})
	return d.p
}

// decision is decide's walk of the queue: its state in one allocation, as
// small as it can be (with 100,000 ready tasks in the heap, the bytes a
// decision allocates are what its cost grows with).
type decision struct {
	p            Plan
	cards        []gpu.CardView
	reserveAfter time.Duration
	now          time.Time
	// kept are the positions of the cards reserved or not taking work,
	// where a task that fits nowhere may have room all the same (few or
	// none); nil until the first such task. roomReserved and roomResting
	// are the most memory left on one of them reserved for a task, and on
	// one cooling or quarantined (-1: none); stale says to find them again.
	kept                      []int
	roomReserved, roomResting int64
	caps                      *limits // nil: no per-user cap and no host view
	// For tasks on several cards: the cards' topology, and the last
	// decision's reservations.
	topo *gpu.Topology
	held map[int]string
	// The small fields together, in one word: with them the struct stays
	// in the 192-byte size class it had before tasks on several cards.
	free      int32 // slots left (View.Free, at most MaxInt32)
	placement gpu.Placement
	gpuKnown  bool
	stale     bool
	// wideAsked: a starving task on several cards was considered for a
	// reservation (reservesNow); no later one is, so that a queue of them
	// costs one choice of cards per decision, not one each.
	wideAsked bool
}

// several decides for GPU candidate c, which needs several cards: it
// starts on the closest set that holds it, or is passed over, reserving
// cards first when it is the first starving task. It returns whether the
// walk goes on.
func (d *decision) several(c *Candidate) bool {
	p := &d.p
	tally := gpu.TallyCards(d.cards, c.Need, c.ID)
	if tally.Take >= c.Need.Cards() {
		set := gpu.FitSet(d.cards, c.Need, d.placement, d.topo, c.ID, nil)
		for _, i := range set {
			card := &d.cards[i]
			gpu.Charge(card, c.Need, c.ID)
			if card.ReservedFor == c.ID {
				card.ReservedFor, card.ReservedMiB = "", 0
				delete(p.Reserved, card.Index)
				d.stale = true
			}
		}
		p.Starts = append(p.Starts, Action{TaskID: c.ID, Card: set[0]})
		if p.Sets == nil {
			p.Sets = map[string][]int{}
		}
		p.Sets[c.ID] = set
		d.took(c)
		d.free--
		if d.caps != nil {
			d.caps.count(c.Owner, true, c.Need.MiB*int64(len(set)))
		}
		return d.free > 0
	}
	if d.kept == nil {
		d.kept, d.stale = keptCards(make([]int, 0), d.cards), true
	}
	if p.Reserved == nil && !d.wideAsked && d.reserveAfter >= 0 && d.now.Sub(c.ReadySince) >= d.reserveAfter {
		d.wideAsked = true
		if set := d.reserveSet(c); set != nil && d.reservesNow(c, set) {
			p.Reserved = make(map[int]string, len(set))
			for _, i := range set {
				d.cards[i].ReservedFor, d.cards[i].ReservedMiB = c.ID, gpu.Reservation(c.Need)
				p.Reserved[d.cards[i].Index] = c.ID
			}
			d.kept, d.stale = append(d.kept, set...), true
			tally = gpu.TallyCards(d.cards, c.Need, c.ID)
		}
	}
	d.pass(c, tallyWhy(tally, c.Need.Cards()))
	return true
}

// reserveSet is the cards starving candidate c reserves: those it had in
// the last decision, while they can all still be reserved for it, else
// gpu.ReserveSet's choice; nil if not enough cards can be.
func (d *decision) reserveSet(c *Candidate) []int {
	var set []int
	for i := range d.cards {
		if d.held[d.cards[i].Index] == c.ID && gpu.Reservable(&d.cards[i], c.Need, c.ID) {
			set = append(set, i)
		}
	}
	if len(set) == c.Need.Cards() {
		return set
	}
	return gpu.ReserveSet(d.cards, c.Need, d.topo, c.ID, d.now, set)
}

// setWhy says why a task on several cards that fits on too few waits:
// the cards reserved for another task would make up the set
// (card-reserved), or those and the cards cooling down or quarantined
// would (card-unavailable), or even they would not (gpu-memory).
func setWhy(cards []gpu.CardView, need gpu.Need, id string) task.WaitKind {
	return tallyWhy(gpu.TallyCards(cards, need, id), need.Cards())
}

// tallyWhy is setWhy from the cards counted, for a need of k cards.
func tallyWhy(t gpu.Tally, k int) task.WaitKind {
	switch {
	case t.Take+t.Reserved >= k && t.Reserved > 0:
		return task.WaitCardReserved
	case t.Take+t.Reserved+t.Resting >= k && t.Resting > 0:
		return task.WaitCardUnavailable
	}
	return task.WaitGPUMemory
}

// caps are the per-user caps, and what each owner holds as decide starts
// tasks.
type caps struct {
	running int
	gpuMiB  int64
	owners  []OwnerLoad
}

// limits are what decide counts besides slots and cards, in one
// allocation when there is any (a decision stays in its 192-byte size
// class with one pointer for both): the per-user caps (zero: none), and
// the machine's resources (host.on: with View.Host).
type limits struct {
	caps
	host hostFree
}

// held reports whether owner is at a cap that its task (a GPU task
// asking mib, or not) may not pass.
func (k *caps) held(owner int32, isGPU bool, mib int64) bool {
	if int(owner) >= len(k.owners) {
		return false
	}
	o := &k.owners[owner]
	return k.running > 0 && o.Running >= k.running ||
		isGPU && k.gpuMiB > 0 && o.GPUMiB > 0 && o.GPUMiB+mib > k.gpuMiB
}

// count adds a task started to its owner's load.
func (k *caps) count(owner int32, isGPU bool, mib int64) {
	if int(owner) >= len(k.owners) {
		return
	}
	o := &k.owners[owner]
	o.Running++
	if isGPU {
		o.GPUMiB += mib
	}
}

// roomWhy is card-reserved when mib fits in reserved, else
// card-unavailable when it fits in resting, else gpu-memory; computed
// without a branch: the sizes of a queue come in no order a processor
// could predict, and a mispredicted branch per waiting task costs a
// decision over 10,000 of them a tenth of its time. (Sizes are far from
// overflowing: the differences' sign bits say whether each fits.)
func roomWhy(mib, reserved, resting int64) task.WaitKind {
	r := 1 ^ uint8(uint64(reserved-mib)>>63) // 1: fits in reserved
	u := 1 ^ uint8(uint64(resting-mib)>>63)  // 1: fits in resting
	// gpu-memory + 1 when reserved, + 2 when only resting.
	return task.WaitGPUMemory + task.WaitKind(r|(u&^r)<<1)
}

// roomWhy counts on the kinds' order: these fail to compile otherwise.
var (
	_ = [1]struct{}{}[task.WaitCardReserved-task.WaitGPUMemory-1]
	_ = [1]struct{}{}[task.WaitCardUnavailable-task.WaitGPUMemory-2]
)

// measureKept finds the most memory left on a kept card reserved for a
// task, and on one cooling or quarantined.
func (d *decision) measureKept() {
	d.roomReserved, d.roomResting = keptRoom(d.cards, d.kept)
	d.stale = false
}

// keptRoom is the most memory left on a card of kept reserved for a task,
// and on one cooling or quarantined (-1: none).
func keptRoom(cards []gpu.CardView, kept []int) (reserved, resting int64) {
	reserved, resting = -1, -1
	for _, i := range kept {
		switch c := &cards[i]; {
		case c.Exclusive:
		case c.Takes() && c.ReservedFor != "":
			reserved = max(reserved, c.AvailableMiB)
		case c.State == gpu.CardCooling || c.State == gpu.CardQuarantined:
			resting = max(resting, c.AvailableMiB)
		}
	}
	return reserved, resting
}

// pass reports candidate c passed over for why, unless c carries why.
func (d *decision) pass(c *Candidate, why task.WaitKind) {
	if c.Waiting != why {
		d.p.Passed = append(d.p.Passed, Pass{TaskID: c.ID, Why: why})
	}
}

// passedWhy says why a GPU task that fits on no card taking it waits:
// among the cards kept off (reserved for another task, or not taking
// work), one has room for it, or none does and it waits for memory. (A
// card with room reserved for the task itself would have been Fit's
// choice: one with room that takes work is reserved for another.)
func passedWhy(cards []gpu.CardView, kept []int, need gpu.Need) task.WaitKind {
	why := task.WaitGPUMemory
	for _, i := range kept {
		switch c := &cards[i]; {
		case !gpu.Room(c, need):
		case c.Takes() && c.ReservedFor != "":
			return task.WaitCardReserved
		case c.State == gpu.CardCooling || c.State == gpu.CardQuarantined:
			why = task.WaitCardUnavailable
		}
	}
	return why
}

// hostFree is what decide has left of the machine's cores, host memory and
// custom resources as it starts tasks, and what it holds for a starving
// task.
type hostFree struct {
	on           bool // counted: decide has a View.Host
	cpus         int
	mib          int64
	counters     map[string]int // View.Host's until the first change, then decide's copy
	copied       bool
	reserveAfter time.Duration
	// What is held for a task (holding: Plan.HostHeldFor), already taken
	// from the free figures above.
	holding      bool
	heldCPUs     int
	heldMiB      int64
	heldCounters map[string]int
}

// hostNeed is what candidate c takes of the machine.
func hostNeed(c *Candidate) (cpus int, mib int64, counters map[string]int) {
	cpus = 1
	if r := c.Res; r != nil {
		cpus, mib, counters = r.CPUCount(), r.MemoryMiBHost, r.Counters
	}
	if c.Remote {
		cpus, mib = 0, 0
	}
	return cpus, mib, counters
}

// short says which of c's needs is more than is free, NotWaiting when
// none is; with held, counting what is held for another task as free.
func (h *hostFree) short(cpus int, mib int64, counters map[string]int, held bool) task.WaitKind {
	freeCPUs, freeMiB := h.cpus, h.mib
	if held {
		freeCPUs, freeMiB = freeCPUs+h.heldCPUs, freeMiB+h.heldMiB
	}
	// What a task does not take at all it does not wait for, even where
	// less than nothing is free (held for another, or taken beyond the
	// capacity by adopted attempts).
	switch {
	case cpus > 0 && cpus > freeCPUs:
		return task.WaitCPU
	case mib > 0 && mib > freeMiB:
		return task.WaitHostMemory
	}
	for name, n := range counters {
		free := h.counters[name]
		if held {
			free += h.heldCounters[name]
		}
		if n > free {
			return task.WaitResource
		}
	}
	return task.NotWaiting
}

// take counts cpus, mib and counters as taken.
func (h *hostFree) take(cpus int, mib int64, counters map[string]int) {
	h.cpus -= cpus
	h.mib -= mib
	if len(counters) == 0 {
		return
	}
	if !h.copied {
		h.counters, h.copied = maps.Clone(h.counters), true
		if h.counters == nil {
			h.counters = map[string]int{}
		}
	}
	for name, n := range counters {
		h.counters[name] -= n
	}
}

// hostFits reports whether what candidate c takes of the machine fits
// what is free. One that does not is passed over; the first that has
// waited ReserveAfter has what it needs held for it.
func (d *decision) hostFits(c *Candidate) bool {
	h := &d.caps.host
	cpus, mib, counters := hostNeed(c)
	why := h.short(cpus, mib, counters, false)
	if why == task.NotWaiting {
		return true
	}
	held := h.holding && h.short(cpus, mib, counters, true) == task.NotWaiting
	holds := false
	if !h.holding && h.reserveAfter >= 0 && d.now.Sub(c.ReadySince) >= h.reserveAfter {
		h.holding, holds = true, true
		h.heldCPUs, h.heldMiB = cpus, mib
		h.heldCounters = counters
		h.take(cpus, mib, counters)
	}
	if c.Waiting != why || holds {
		d.p.Passed = append(d.p.Passed, Pass{TaskID: c.ID, Why: why, Held: held, Holds: holds})
	}
	return false
}

// took counts a task decide starts against the machine's resources.
func (d *decision) took(c *Candidate) {
	if d.caps != nil && d.caps.host.on {
		d.caps.host.take(hostNeed(c))
	}
}
