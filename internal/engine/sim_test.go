package engine

// A discrete-event simulation of GPU admission over the pure decide: a
// synthetic trace of GPU tasks on eight 80 GiB cards, replayed with
// gpusched's rule (each ReserveAfter setting) and with a first-come-first-
// served first-fit baseline, against a lower bound on the makespan. See
// docs/benchmarks.md, "GPU admission: simulated makespan".

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// The simulated machine: eight 80 GiB cards, each with the default safety
// margin kept free.
const (
	simCards    = 8
	simTotalMiB = 81920
	simCapMiB   = simTotalMiB - gpu.DefaultSafetyMarginMiB // 81408
	simBigMiB   = 60 << 10                                 // "big" tasks, for the wait figures
	simSeed     = 1                                        // the published trace
	simTasks    = 2000
	simArrGap   = time.Minute // mean gap between arrivals in the arrival trace
	simSlots    = 64          // the slots owners' usage is weighed with (the simulation has no slot limit)
)

// simTask is one task of a trace. It uses exactly what it asks, for dur.
type simTask struct {
	id     string
	mib    int64 // on each of its cards
	dur    time.Duration
	arrive time.Duration // after the start of the trace
	owner  string        // task.Spec.Owner; every task's "" but in the fair-share traces
	gpus   int           // cards, all at once; 0 means 1
	// est is a guess at dur, as history would give it (simEstimated);
	// zero: none. Only the what-ifs that order by it read it.
	est time.Duration
}

// cards is how many cards t takes.
func (t simTask) cards() int { return max(t.gpus, 1) }

// simTrace returns n tasks, deterministic from seed, in submission order.
// Memory: 70% 4-16 GiB, 25% 20-40 GiB, 5% 60-79 GiB (whole GiB, uniform
// within each class). Duration: log-normal, median 20 min, sigma 1,
// clamped to [1 min, 8 h], whole seconds; independent of memory. With
// meanGap 0 every task arrives at time 0; otherwise arrivals are a Poisson
// process with that mean gap.
func simTrace(seed uint64, n int, meanGap time.Duration) []simTask {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	tasks := make([]simTask, n)
	var at time.Duration
	for i := range tasks {
		var gib int64
		switch u := r.Float64(); {
		case u < 0.70:
			gib = 4 + r.Int64N(13)
		case u < 0.95:
			gib = 20 + r.Int64N(21)
		default:
			gib = 60 + r.Int64N(20)
		}
		sec := math.Exp(math.Log(20*60) + r.NormFloat64())
		sec = min(max(sec, 60), 8*3600)
		if meanGap > 0 && i > 0 {
			at += time.Duration(r.ExpFloat64() * float64(meanGap)).Round(time.Second)
		}
		tasks[i] = simTask{id: fmt.Sprintf("t%05d", i), mib: gib << 10, dur: time.Duration(sec) * time.Second, arrive: at}
	}
	return tasks
}

// simBound is a lower bound on any schedule's makespan: no task ends before
// it arrives plus its duration, and the memory x time of the tasks arriving
// at or after t needs at least that over the total capacity after t. With
// every task at time 0 this is max(total memory x time / total capacity,
// longest task).
func simBound(tr []simTask) time.Duration {
	capacity := float64(simCards * simCapMiB)
	var bound, area float64
	for i := len(tr) - 1; i >= 0; i-- {
		t := tr[i]
		area += float64(t.mib) * float64(t.cards()) * t.dur.Seconds()
		bound = max(bound, t.arrive.Seconds()+area/capacity, (t.arrive + t.dur).Seconds())
	}
	return time.Duration(bound * float64(time.Second))
}

// simBigBound: tasks over half a card never share one, so at most one per
// card runs at a time; their durations (times their cards) over the
// number of cards bound the makespan too, arrivals or not. Not part of the
// published bound of the one-card traces; it explains the gap.
func simBigBound(tr []simTask) time.Duration {
	var sum time.Duration
	for _, t := range tr {
		if 2*t.mib > simCapMiB {
			sum += t.dur * time.Duration(t.cards())
		}
	}
	return sum / simCards
}

// simPolicy is an admission policy to replay a trace with.
type simPolicy struct {
	name string
	fcfs bool // the baseline instead of decide
	// ignoreMemory: the baseline also starts what does not fit (only to
	// test that the simulation catches an over-commit).
	ignoreMemory bool
	reserveAfter time.Duration
	placement    gpu.Placement
	// What-ifs, not gpusched's rule, to explain the gap to the bound:
	// oneReservation lets only the first starving task that does not fit
	// reserve a card (later ones are passed over as if not starving);
	// longestFirst orders the queue by duration, longest first, which
	// gpusched cannot know; batchOrder, when set, orders the tasks that
	// arrived at the same instant (submitted together) by it, stably
	// (simBiggest, simWidest: what gpusched could know, but does not do:
	// it keeps the users' order).
	oneReservation bool
	longestFirst   bool
	batchOrder     func(a, b simTask) int
}

// simPolicies are gpusched with each ReserveAfter setting (spread, the
// default placement) and the baseline.
var simPolicies = []simPolicy{
	{name: "gpusched_reserve=1m(default)", reserveAfter: DefaultReserveAfter},
	{name: "gpusched_reserve=0", reserveAfter: 0},
	{name: "gpusched_reserve=never", reserveAfter: -1},
	{name: "fcfs_first_fit", fcfs: true},
}

// simWhatIfs are variants, replayed at cooldown 0 only, that explain the
// gap to the bound: pack placement, one reservation at a time, the queue
// ordered longest first (which needs durations gpusched does not know: a
// reference for how tight the bound is), and the tasks submitted together
// ordered biggest first, or on most cards first (what a higher priority
// for them does), rules gpusched could follow, measured to show why it
// does not.
var simWhatIfs = []simPolicy{
	{name: "gpusched_pack_reserve=1m", reserveAfter: DefaultReserveAfter, placement: gpu.Pack},
	{name: "gpusched_pack_reserve=never", reserveAfter: -1, placement: gpu.Pack},
	{name: "whatif_one_reservation_1m", reserveAfter: DefaultReserveAfter, oneReservation: true},
	{name: "whatif_longest_first_never", reserveAfter: -1, longestFirst: true},
	{name: "whatif_biggest_first_1m", reserveAfter: DefaultReserveAfter, batchOrder: simBiggest},
	{name: "whatif_biggest_first_never", reserveAfter: -1, batchOrder: simBiggest},
	{name: "whatif_widest_first_1m", reserveAfter: DefaultReserveAfter, batchOrder: simWidest},
}

// oneReservationQueue passes the candidates of q on to decide, but once
// one starving candidate fits no card (so decide will have it reserve one),
// the later candidates are shown as just ready, so they do not reserve.
type oneReservationQueue struct {
	q sliceQueue
	v *View // the view decide books its starts on (same Cards)
}

func (o oneReservationQueue) Ascend(fn func(Candidate) bool) {
	reserved := false
	o.q.Ascend(func(c Candidate) bool {
		if reserved {
			c.ReadySince = o.v.Now.Add(time.Nanosecond) // not starving, even with ReserveAfter 0
		} else if o.v.ReserveAfter >= 0 && o.v.Now.Sub(c.ReadySince) >= o.v.ReserveAfter && c.Need.Count <= 1 &&
			gpu.Fit(o.v.Cards, c.Need, o.v.Placement, c.ID) < 0 && gpu.Reserve(o.v.Cards, c.Need, o.v.Now) >= 0 {
			reserved = true
		}
		return fn(c)
	})
}

type simOptions struct {
	cooldown time.Duration
	// recheck calls decide again after applying its starts and requires it
	// to start nothing more: one decision per event is a fixed point, so
	// the engine's extra decisions (at polls) would change nothing.
	recheck bool
	// indexed: the queue is the engine's ready set, with its GPU index,
	// and its tasks carry the reasons the last decision gave them, as in
	// the engine (decide then passes most of them over through the
	// index); every decision is made by the full walk too, and must be
	// the same.
	indexed bool
}

type simResult struct {
	makespan time.Duration
	// maxWaitWide, meanWaitWide: the longest and the mean wait of the
	// tasks that take every card (8-GPU tasks), from arrival to start.
	maxWaitWide, meanWaitWide time.Duration
	decisions                 int
	decideTime                time.Duration // inside decide, all decisions together
	meanWait                  time.Duration // from arrival to start
	maxWaitBig                time.Duration // among tasks of simBigMiB or more
	lastStart                 time.Duration // when the queue emptied for good
	// busyBefore: the share of the capacity x time up to lastStart that
	// running tasks held.
	busyBefore float64
	// idleReserved, idleOther: card-hours of memory left idle while tasks
	// waited, on cards reserved for a starving task and on the others
	// (memory idle over a card's capacity, times how long).
	idleReserved, idleOther float64
	started                 []int           // the tasks, by index in the trace, in start order
	startedAt               []time.Duration // by task: when it started
	// With simOptions.indexed: the tasks the index handed decide, and
	// those waiting, over all decisions; the time the full walk took.
	handed, queued int
	fullTime       time.Duration
}

type simEnd struct {
	at   time.Duration
	task int
}

type simEnds []simEnd

func (h simEnds) Len() int { return len(h) }
func (h simEnds) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].task < h[j].task
}
func (h simEnds) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *simEnds) Push(x any)   { *h = append(*h, x.(simEnd)) }
func (h *simEnds) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type simCard struct {
	running   []int // tasks, by index in the trace
	charged   int64 // the sum of their requests
	coolUntil time.Duration
}

// simulate replays tr under pol. At every event (an arrival, a completion,
// the end of a card's cooldown) it decides once, as the engine's loop does,
// and applies the starts. It returns an error when a start over-commits a
// card, lands on a card that does not take work, is not a waiting task, or
// when tasks are left that never ran.
func simulate(tr []simTask, pol simPolicy, opt simOptions) (simResult, error) {
	var res simResult
	cards := make([]simCard, simCards)
	var ends simEnds
	var ready []Candidate // waiting tasks in queue order (one priority: submission order)
	var readyIdx []int    // their indices in tr
	next, done := 0, 0
	var now, waitSum, waitWide time.Duration
	var wide int
	startAt := make([]time.Duration, len(tr))
	onCards := make([][]int, len(tr)) // by task: the cards it started on
	var lastReserved map[int]string   // the last decision's reservations
	var rank []int                    // by task: its position in the queue (when rechecking)
	byID := map[string]int{}          // task id -> index in tr (when rechecking)
	if opt.recheck {
		rank = make([]int, len(tr))
		for i, t := range tr {
			byID[t.id] = i
		}
	}
	// With owners, the queue is the engine's: a ready set ordered by
	// priority, the owners' usage, then submission, charged as tasks
	// start and end.
	var fair *readySet
	var nodes []*node
	if !pol.fcfs && (opt.indexed || slices.ContainsFunc(tr, func(t simTask) bool { return t.owner != "" })) {
		fair = newReadySet()
		fair.slots, fair.gpuMiB = simSlots, simCards*simCapMiB
		nodes = make([]*node, len(tr))
	}

	start := func(ti int, cis []int) error {
		if len(cis) != tr[ti].cards() {
			return fmt.Errorf("at %v: %s started on %d cards, wants %d", now, tr[ti].id, len(cis), tr[ti].cards())
		}
		for k, ci := range cis {
			if ci < 0 || ci >= simCards || slices.Contains(cis[:k], ci) {
				return fmt.Errorf("at %v: %s started on cards %v of %d", now, tr[ti].id, cis, simCards)
			}
			c := &cards[ci]
			if now < c.coolUntil {
				return fmt.Errorf("at %v: %s started on card %d, cooling until %v", now, tr[ti].id, ci, c.coolUntil)
			}
			c.charged += tr[ti].mib
			if c.charged > simCapMiB {
				return fmt.Errorf("at %v: card %d over-committed: %d MiB charged, capacity %d (after starting %s, %d MiB)",
					now, ci, c.charged, simCapMiB, tr[ti].id, tr[ti].mib)
			}
			c.running = append(c.running, ti)
		}
		onCards[ti] = cis
		res.lastStart = max(res.lastStart, now)
		startAt[ti] = now
		res.started = append(res.started, ti)
		if fair != nil {
			n := nodes[ti]
			fair.Delete(n)
			o := fair.ownerOf(n)
			o.advance(t0.Add(now), fair.halfLife)
			o.running++
			o.gpuMiB += tr[ti].mib * int64(tr[ti].cards())
		}
		heap.Push(&ends, simEnd{at: now + tr[ti].dur, task: ti})
		w := now - tr[ti].arrive
		waitSum += w
		if tr[ti].mib >= simBigMiB {
			res.maxWaitBig = max(res.maxWaitBig, w)
		}
		if tr[ti].cards() == simCards {
			res.maxWaitWide = max(res.maxWaitWide, w)
			waitWide += w
			wide++
		}
		return nil
	}
	views := func() []gpu.CardView {
		vs := make([]gpu.CardView, simCards)
		for i, c := range cards {
			v := gpu.CardView{Index: i, UUID: fmt.Sprint("GPU-", i), TotalMiB: simTotalMiB, CapacityMiB: simCapMiB,
				ChargedMiB: c.charged, AvailableMiB: simCapMiB - c.charged, Holders: make([]gpu.Holding, 0, len(c.running))}
			for _, ti := range c.running {
				v.Holders = append(v.Holders, gpu.Holding{Task: tr[ti].id, RequestMiB: tr[ti].mib, Since: t0.Add(startAt[ti])})
			}
			if now < c.coolUntil {
				v.State, v.Reason, v.Until = gpu.CardCooling, "a task just left it", t0.Add(c.coolUntil)
			}
			vs[i] = v
		}
		return vs
	}
	var mismatch error // indexed: the first decision the full walk made otherwise
	taskAt := map[string]int{}
	if opt.indexed {
		for i, t := range tr {
			taskAt[t.id] = i
		}
	}
	decideOnce := func() Plan {
		v := View{Free: math.MaxInt32, Ready: sliceQueue(ready), Now: t0.Add(now), GPUKnown: true,
			Cards: views(), Placement: pol.placement, ReserveAfter: pol.reserveAfter}
		if pol.oneReservation {
			v.Ready = oneReservationQueue{q: ready, v: &v}
		}
		if opt.indexed {
			v.Ready = countVisits{readyQueue{fair}, &res.handed}
			res.queued += fair.Len()
		}
		v.Reserved = lastReserved
		before := time.Now()
		p := decide(v)
		res.decideTime += time.Since(before)
		res.decisions++
		if opt.indexed {
			full := v
			full.Ready, full.Cards = fullWalk{readyQueue{fair}}, views()
			before := time.Now()
			want := decide(full)
			res.fullTime += time.Since(before)
			if !reflect.DeepEqual(p, want) && mismatch == nil {
				mismatch = fmt.Errorf("at %v: through the index %+v, the full walk %+v", now, p, want)
			}
			for _, x := range p.Passed {
				n := nodes[taskAt[x.TaskID]]
				n.rec.Waiting.Kind = x.Why
				fair.refresh(n)
			}
		}
		return p
	}

	for {
		for next < len(tr) && tr[next].arrive <= now {
			t := tr[next]
			need := gpu.Need{MiB: t.mib, Count: uint8(t.gpus)}
			ready = append(ready, Candidate{ID: t.id, Seq: int64(next), GPU: true, Need: need, ReadySince: t0.Add(t.arrive)})
			readyIdx = append(readyIdx, next)
			if fair != nil {
				nodes[next] = &node{spec: &task.Spec{ID: t.id, Owner: t.owner, Resources: task.ResourceRequest{Device: task.CUDA}},
					seq: int64(next), need: need, readySince: t0.Add(t.arrive)}
				fair.ReplaceOrInsert(nodes[next])
			}
			next++
		}
		if fair != nil && len(ready) > 0 {
			// The queue in the order the engine would walk it now.
			fair.now = t0.Add(now)
			ready, readyIdx = ready[:0], readyIdx[:0]
			fair.walk(func(o *owner, n *node) bool {
				ready = append(ready, Candidate{ID: n.spec.ID, Seq: n.seq, Owner: o.idx, GPU: true, Need: n.need, ReadySince: n.readySince})
				readyIdx = append(readyIdx, int(n.seq))
				return true
			})
		}
		if pol.batchOrder != nil {
			order := make([]int, len(ready))
			for i := range order {
				order[i] = i
			}
			slices.SortStableFunc(order, func(a, b int) int {
				ta, tb := tr[readyIdx[a]], tr[readyIdx[b]]
				if ta.arrive != tb.arrive {
					return int(ta.arrive - tb.arrive)
				}
				return pol.batchOrder(ta, tb)
			})
			r2, i2 := make([]Candidate, len(ready)), make([]int, len(ready))
			for k, o := range order {
				r2[k], i2[k] = ready[o], readyIdx[o]
			}
			ready, readyIdx = r2, i2
		}
		if pol.longestFirst {
			order := make([]int, len(ready))
			for i := range order {
				order[i] = i
			}
			slices.SortStableFunc(order, func(a, b int) int { return int(tr[readyIdx[b]].dur - tr[readyIdx[a]].dur) })
			r2, i2 := make([]Candidate, len(ready)), make([]int, len(ready))
			for k, o := range order {
				r2[k], i2[k] = ready[o], readyIdx[o]
			}
			ready, readyIdx = r2, i2
		}

		if pol.fcfs {
			n := 0
			for n < len(ready) {
				ti := readyIdx[n]
				var cis []int
				for i := range cards {
					if len(cis) < tr[ti].cards() && now >= cards[i].coolUntil && (pol.ignoreMemory || cards[i].charged+tr[ti].mib <= simCapMiB) {
						cis = append(cis, i)
					}
				}
				if len(cis) < tr[ti].cards() {
					break
				}
				if err := start(ti, cis); err != nil {
					return res, err
				}
				n++
			}
			ready, readyIdx = ready[n:], readyIdx[n:]
		} else if len(ready) > 0 {
			p := decideOnce()
			lastReserved = p.Reserved
			for card, id := range p.Reserved {
				if card < 0 || card >= simCards || !slices.ContainsFunc(ready, func(c Candidate) bool { return c.ID == id }) {
					return res, fmt.Errorf("at %v: card %d reserved for %q, which is not waiting", now, card, id)
				}
			}
			if opt.recheck && len(p.Reserved) > 0 {
				for k, ti := range readyIdx {
					rank[ti] = k
				}
			}
			// Starts come best first, so in queue order: take them out of
			// the queue in one pass.
			j, keep := 0, 0
			for k, c := range ready {
				if j < len(p.Starts) && p.Starts[j].TaskID == c.ID {
					a := p.Starts[j]
					cis := p.Sets[a.TaskID]
					if cis == nil {
						cis = []int{a.Card}
					}
					if err := start(readyIdx[k], cis); err != nil {
						return res, err
					}
					j++
					continue
				}
				ready[keep], readyIdx[keep] = c, readyIdx[k]
				keep++
			}
			if j < len(p.Starts) {
				return res, fmt.Errorf("at %v: decide started %s, not waiting or out of queue order", now, p.Starts[j].TaskID)
			}
			// A task behind a reserving task in the queue starts on its
			// card only if it leaves the reserved task its memory there
			// (checked when rechecking: it costs a pass).
			if opt.recheck && len(p.Reserved) > 0 {
				for _, a := range p.Starts {
					for _, ci := range onCards[byID[a.TaskID]] {
						id, ok := p.Reserved[ci]
						if ok && rank[byID[id]] < rank[byID[a.TaskID]] && simCapMiB-cards[ci].charged < tr[byID[id]].mib {
							return res, fmt.Errorf("at %v: %s started on card %d, reserved for %s ahead of it, and left it %d MiB of the %d it holds",
								now, a.TaskID, ci, id, simCapMiB-cards[ci].charged, tr[byID[id]].mib)
						}
					}
				}
			}
			ready, readyIdx = ready[:keep], readyIdx[:keep]
			if opt.recheck && len(p.Starts) > 0 && len(ready) > 0 {
				if again := decideOnce(); len(again.Starts) > 0 {
					return res, fmt.Errorf("at %v: a second decision with nothing changed started %s", now, again.Starts[0].TaskID)
				}
			}
		}

		// The next event.
		at := time.Duration(math.MaxInt64)
		if len(ends) > 0 {
			at = ends[0].at
		}
		if next < len(tr) {
			at = min(at, tr[next].arrive)
		}
		if len(ready) > 0 {
			for _, c := range cards {
				if c.coolUntil > now {
					at = min(at, c.coolUntil)
				}
			}
		}
		if at == math.MaxInt64 {
			break
		}
		if len(ready) > 0 {
			for ci, c := range cards {
				idle := float64(simCapMiB-c.charged) / simCapMiB * (at - now).Hours()
				if _, ok := lastReserved[ci]; ok {
					res.idleReserved += idle
				} else {
					res.idleOther += idle
				}
			}
		}
		now = at
		for len(ends) > 0 && ends[0].at <= now {
			e := heap.Pop(&ends).(simEnd)
			for _, ci := range onCards[e.task] {
				c := &cards[ci]
				c.running = slices.DeleteFunc(c.running, func(ti int) bool { return ti == e.task })
				c.charged -= tr[e.task].mib
				c.coolUntil = max(c.coolUntil, e.at+opt.cooldown)
			}
			if fair != nil {
				o := fair.ownerOf(nodes[e.task])
				o.advance(t0.Add(e.at), fair.halfLife)
				o.running--
				o.gpuMiB -= tr[e.task].mib * int64(tr[e.task].cards())
			}
			res.makespan = max(res.makespan, e.at)
			done++
		}
	}
	if mismatch != nil {
		return res, mismatch
	}
	if done != len(tr) {
		first := "none"
		if len(ready) > 0 {
			first = fmt.Sprintf("%s (%d MiB)", ready[0].ID, ready[0].Need.MiB)
		}
		return res, fmt.Errorf("%d of %d tasks never ran; first waiting: %s", len(tr)-done, len(tr), first)
	}
	res.meanWait = waitSum / time.Duration(len(tr))
	if wide > 0 {
		res.meanWaitWide = waitWide / time.Duration(wide)
	}
	res.startedAt = startAt
	var held float64
	for i, t := range tr {
		held += float64(t.mib) * float64(t.cards()) * (min(startAt[i]+t.dur, res.lastStart) - min(startAt[i], res.lastStart)).Seconds()
	}
	if res.lastStart > 0 {
		res.busyBefore = held / (float64(simCards*simCapMiB) * res.lastStart.Seconds())
	}
	return res, nil
}

// TestSimulationNeverOvercommits replays several traces, all at once and
// arriving over time, under every policy, with and without a cooldown:
// every start must fit the card it lands on, and every task must run.
func TestSimulationNeverOvercommits(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 200
	}
	for seed := uint64(1); seed <= 4; seed++ {
		for _, gap := range []time.Duration{0, simArrGap} {
			tr := simTrace(seed, n, gap)
			bound := simBound(tr)
			for _, cooldown := range []time.Duration{0, gpu.DefaultCooldown} {
				pols := simPolicies
				if cooldown == 0 {
					pols = slices.Concat(simPolicies, simWhatIfs)
				}
				for _, pol := range pols {
					res, err := simulate(tr, pol, simOptions{cooldown: cooldown, recheck: true})
					if err != nil {
						t.Fatalf("seed %d, gap %v, cooldown %v, %s: %v", seed, gap, cooldown, pol.name, err)
					}
					if res.makespan < bound {
						t.Fatalf("seed %d, gap %v, cooldown %v, %s: makespan %v under the lower bound %v",
							seed, gap, cooldown, pol.name, res.makespan, bound)
					}
				}
			}
		}
	}
	if testing.Short() {
		return
	}
	// The published traces, as the benchmark replays them.
	for _, gap := range []time.Duration{0, simArrGap} {
		tr := simTrace(simSeed, simTasks, gap)
		for _, pol := range simPolicies {
			if _, err := simulate(tr, pol, simOptions{}); err != nil {
				t.Fatalf("published trace, gap %v, %s: %v", gap, pol.name, err)
			}
		}
	}
}

// TestSimulationCatchesOvercommit checks the simulation's own checks: a
// policy that ignores memory is caught, and so is a task that never runs.
func TestSimulationCatchesOvercommit(t *testing.T) {
	var tr []simTask // nine 50 GiB tasks of a minute: two rounds on eight cards
	for i := range simCards + 1 {
		tr = append(tr, simTask{id: fmt.Sprint("t", i), mib: 50 << 10, dur: time.Minute})
	}
	if _, err := simulate(tr, simPolicy{name: "broken", fcfs: true, ignoreMemory: true}, simOptions{}); err == nil {
		t.Error("two 50 GiB tasks on one card went unnoticed")
	}
	for _, pol := range simPolicies {
		res, err := simulate(tr, pol, simOptions{})
		if err != nil || res.makespan != 2*time.Minute {
			t.Errorf("%s: makespan %v, err %v; want 2m0s, nil", pol.name, res.makespan, err)
		}
	}
	tr = append(tr, simTask{id: "huge", mib: simCapMiB + 1, dur: time.Minute})
	if _, err := simulate(tr, simPolicies[0], simOptions{}); err == nil {
		t.Error("a task larger than every card ran")
	}
}

// BenchmarkAdmissionSimulation replays the published trace (seed 1, 2,000
// tasks) under each policy. ns/op is the cost of one whole simulation; the
// metrics are the simulated schedule's.
func BenchmarkAdmissionSimulation(b *testing.B) {
	traces := []struct {
		name string
		gap  time.Duration
	}{{"batch", 0}, {"arrivals", simArrGap}}
	for _, trc := range traces {
		tr := simTrace(simSeed, simTasks, trc.gap)
		bound := simBound(tr)
		for _, cooldown := range []time.Duration{0, gpu.DefaultCooldown} {
			pols := simPolicies
			if cooldown == 0 {
				pols = slices.Concat(simPolicies, simWhatIfs)
			}
			for _, pol := range pols {
				name := fmt.Sprintf("trace=%s/cooldown=%v/%s", trc.name, cooldown, pol.name)
				b.Run(name, func(b *testing.B) {
					var res simResult
					for b.Loop() {
						var err error
						if res, err = simulate(tr, pol, simOptions{cooldown: cooldown}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(res.makespan.Hours(), "makespan-h")
					b.ReportMetric(bound.Hours(), "bound-h")
					b.ReportMetric(res.makespan.Seconds()/bound.Seconds(), "x-bound")
					b.ReportMetric(res.meanWait.Hours(), "meanwait-h")
					b.ReportMetric(res.maxWaitBig.Hours(), "maxwait-big-h")
					b.ReportMetric(res.lastStart.Hours(), "laststart-h")
					b.ReportMetric(100*res.busyBefore, "%busy-before")
					if res.decisions > 0 {
						b.ReportMetric(float64(res.decideTime.Nanoseconds())/float64(res.decisions)/1e3, "us/decision")
					}
				})
			}
		}
	}
}

// BenchmarkSimulationTrace describes the published trace and its bounds on
// makespan, for docs/benchmarks.md: it logs the mix of task sizes and
// durations and reports the lower bound in hours as a metric. Run it with
// go test ./internal/engine -run '^$' -bench SimulationTrace -benchtime 1x -v.
func BenchmarkSimulationTrace(b *testing.B) {
	for _, gap := range []time.Duration{0, simArrGap} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) {
			var tr []simTask
			for b.Loop() {
				tr = simTrace(simSeed, simTasks, gap)
			}
			var small, mid, big int
			var area float64
			var durs []time.Duration
			for _, x := range tr {
				switch {
				case x.mib <= 16<<10:
					small++
				case x.mib <= 40<<10:
					mid++
				default:
					big++
				}
				area += float64(x.mib) * x.dur.Seconds()
				durs = append(durs, x.dur)
			}
			slices.Sort(durs)
			var sum time.Duration
			for _, d := range durs {
				sum += d
			}
			b.Logf("%d tasks: %d of 4-16 GiB, %d of 20-40 GiB, %d of 60-79 GiB; duration median %v mean %v max %v; "+
				"area/capacity %.2f h; bound %.2f h; big-task bound %.2f h; last arrival %.2f h",
				len(tr), small, mid, big, durs[len(durs)/2], (sum / time.Duration(len(durs))).Round(time.Second),
				durs[len(durs)-1], area/float64(simCards*simCapMiB)/3600, simBound(tr).Hours(), simBigBound(tr).Hours(),
				tr[len(tr)-1].arrive.Hours())
			b.ReportMetric(simBound(tr).Hours(), "bound-h")
			b.ReportMetric(area/float64(simCards*simCapMiB)/3600, "area-h")
		})
	}
}

// BenchmarkDecide10kWaitingMixed: one admission decision with 10,000 GPU
// tasks of the trace's mix waiting, on 8 cards each left with 4-11 GiB by
// what runs there, so the small tasks near the head of the queue fit and
// start and the rest are looked at and passed over. The first tasks have
// waited past ReserveAfter (1m, the default) and reserve cards.
func BenchmarkDecide10kWaitingMixed(b *testing.B) {
	tr := simTrace(simSeed, 10_000, 0)
	e := &Engine{ready: newReadySet()}
	for i, x := range tr {
		n := &node{spec: &task.Spec{ID: x.id, Resources: task.ResourceRequest{Device: task.CUDA, MemoryMiB: x.mib}},
			seq: int64(i), need: gpu.Need{MiB: x.mib}, readySince: t0.Add(-time.Duration(10_000-i) * time.Second / 100)}
		e.ready.ReplaceOrInsert(n)
	}
	cards := make([]gpu.CardView, simCards)
	for i := range cards {
		left := int64(4+i) << 10
		cards[i] = holding(card(i, simCapMiB, left), "busy", simCapMiB-left)
	}
	q := readyQueue{e.ready}
	for _, reserve := range []time.Duration{DefaultReserveAfter, -1} {
		name := "reserve=1m"
		if reserve < 0 {
			name = "reserve=never"
		}
		b.Run(name, func(b *testing.B) {
			// The reasons of the tasks passed over, as the engine keeps them.
			settle(b, e.ready, decide(View{Free: 64, Ready: q, Now: t0, GPUKnown: true, Cards: slices.Clone(cards), ReserveAfter: reserve}))
			b.ReportAllocs()
			var starts int
			for b.Loop() {
				v := View{Free: 64, Ready: q, Now: t0, GPUKnown: true, Cards: slices.Clone(cards), ReserveAfter: reserve}
				starts = len(decide(v).Starts)
			}
			b.ReportMetric(float64(starts), "starts")
		})
	}
}

// The two-user trace: user A submits simFairA GPU tasks at time 0, user B
// simFairB more simFairBAt later, on the same cards; sizes and durations
// as in simTrace (seed simSeed). oneOwner gives every task the same owner:
// the queue is then submission order, as without fair share.
const (
	simFairA   = 200
	simFairB   = 50
	simFairBAt = 10 * time.Minute
)

func simFairTrace(seed uint64, oneOwner bool) []simTask {
	tr := simTrace(seed, simFairA+simFairB, 0)
	for i := range tr {
		tr[i].owner = "1000" // A
		if i >= simFairA {
			tr[i].arrive = simFairBAt
			if !oneOwner {
				tr[i].owner = "1001" // B
			}
		}
	}
	return tr
}

// simFairFigures are what the fair-share simulation reports of a run of
// the two-user trace: B's mean wait, and where B's first start came among
// the starts after B's tasks arrived (1: the first).
func simFairFigures(tr []simTask, res simResult) (meanWaitB time.Duration, firstB int) {
	after := 0 // starts at or after B's arrival, in start order
	for _, ti := range res.started {
		if res.startedAt[ti] < simFairBAt {
			continue
		}
		after++
		if ti >= simFairA {
			firstB = after
			break
		}
	}
	var sum time.Duration
	for i := simFairA; i < len(tr); i++ {
		sum += res.startedAt[i] - tr[i].arrive
	}
	return sum / simFairB, firstB
}

// TestSimulationFairShare replays the two-user trace with its two owners
// and with one, over eight seeds: with fair share B's tasks start among the
// first admissions after they arrive, rather than after A's, and wait less
// than half as long; nothing over-commits and every task runs (no
// starvation); the machine is as busy (memory held until the queue
// empties, on average within 2 points) and the makespan the same on average (within
// 5%: on a trace this short one run's makespan hangs on where its few
// longest tasks fall, and reordering A's own queue moves it by -14% to
// +26%, see docs/benchmarks.md).
func TestSimulationFairShare(t *testing.T) {
	const seeds = 8
	var logRatio, busyTwo, busyOne, noiseLo, noiseHi float64
	for seed := uint64(1); seed <= seeds; seed++ {
		for k, pol := range simPolicies[:3] {
			two, err := simulate(simFairTrace(seed, false), pol, simOptions{recheck: true})
			if err != nil {
				t.Fatalf("seed %d, %s, two owners: %v", seed, pol.name, err)
			}
			if k > 0 {
				continue // the other settings: no over-commit, nothing starves
			}
			one, err := simulate(simFairTrace(seed, true), pol, simOptions{recheck: true})
			if err != nil {
				t.Fatalf("seed %d, %s, one owner: %v", seed, pol.name, err)
			}
			tr := simFairTrace(seed, false)
			waitTwo, firstTwo := simFairFigures(tr, two)
			waitOne, firstOne := simFairFigures(tr, one)
			if firstTwo > simCards {
				t.Errorf("seed %d: B's first task was start %d after B arrived, want within %d (one owner: %d)",
					seed, firstTwo, simCards, firstOne)
			}
			if 2*waitTwo > waitOne {
				t.Errorf("seed %d: B's mean wait %v with fair share, %v without; want under half", seed, waitTwo, waitOne)
			}
			busyTwo += two.busyBefore / seeds
			busyOne += one.busyBefore / seeds
			logRatio += math.Log(two.makespan.Seconds() / one.makespan.Seconds())
			// The order's own noise: one owner, A's queue reversed.
			rev := simFairTrace(seed, true)
			slices.Reverse(rev[:simFairA])
			r, err := simulate(rev, pol, simOptions{})
			if err != nil {
				t.Fatalf("seed %d, A reversed: %v", seed, err)
			}
			noise := r.makespan.Seconds()/one.makespan.Seconds() - 1
			noiseLo, noiseHi = min(noiseLo, noise), max(noiseHi, noise)
		}
	}
	if r := math.Exp(logRatio / seeds); math.Abs(r-1) > 0.05 {
		t.Errorf("makespan with two owners over one, geometric mean over %d seeds: %.3f; want within 5%% of 1", seeds, r)
	}
	if busyTwo < busyOne-0.02 {
		t.Errorf("memory held until the queue empties, mean over %d seeds: %.1f%% with two owners, %.1f%% with one",
			seeds, 100*busyTwo, 100*busyOne)
	}
	t.Logf("two owners over one: makespan x%.3f (geometric mean), memory held %.1f%% and %.1f%%; "+
		"one owner with A's queue reversed: makespan %+.1f%% to %+.1f%%",
		math.Exp(logRatio/seeds), 100*busyTwo, 100*busyOne, 100*noiseLo, 100*noiseHi)
}

// BenchmarkFairShareSimulation replays the two-user trace (seed 1) with two
// owners and with one, under the default rule, for docs/benchmarks.md:
// go test ./internal/engine -run '^$' -bench FairShareSimulation -benchtime 1x.
func BenchmarkFairShareSimulation(b *testing.B) {
	for _, owners := range []string{"two", "one"} {
		tr := simFairTrace(simSeed, owners == "one")
		for _, cooldown := range []time.Duration{0, gpu.DefaultCooldown} {
			b.Run(fmt.Sprintf("owners=%s/cooldown=%v", owners, cooldown), func(b *testing.B) {
				var res simResult
				for b.Loop() {
					var err error
					if res, err = simulate(tr, simPolicies[0], simOptions{cooldown: cooldown}); err != nil {
						b.Fatal(err)
					}
				}
				waitB, firstB := simFairFigures(simFairTrace(simSeed, false), res)
				var waitA time.Duration
				for i := range simFairA {
					waitA += res.startedAt[i] - tr[i].arrive
				}
				b.ReportMetric(res.makespan.Hours(), "makespan-h")
				b.ReportMetric(simBound(tr).Hours(), "bound-h")
				b.ReportMetric(waitB.Hours(), "B-meanwait-h")
				b.ReportMetric((waitA / simFairA).Hours(), "A-meanwait-h")
				b.ReportMetric(float64(firstB), "B-first-start#")
				b.ReportMetric(res.maxWaitBig.Hours(), "maxwait-big-h")
				b.ReportMetric(100*res.busyBefore, "%busy-before")
			})
		}
	}
}
