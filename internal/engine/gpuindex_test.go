package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// Every decision the engine makes in these tests is checked against the
// full walk.
func init() { verifyIndex = true }

// countVisits wraps a skipQueue and counts the tasks it hands decide.
type countVisits struct {
	q      readyQueue
	visits *int
}

func (c countVisits) Ascend(fn func(Candidate) bool) { c.q.Ascend(fn) }

func (c countVisits) AscendSkip(fn func(Candidate) bool, skip func(int32, needSum) bool) {
	c.q.AscendSkip(func(x Candidate) bool { *c.visits++; return fn(x) }, skip)
}

// randomQueue is a ready set of up to 300 tasks, most on the GPU (1, 2, 4
// or 8 cards, some exclusive, some asking cores, host memory or a custom
// resource), of up to three owners with different usage, in three
// priorities, ready for up to two hours; half the queues with estimated
// run times (the longest_first order).
func randomQueue(rnd *rand.Rand) (*readySet, []*node) {
	r := newReadySet()
	longest := rnd.IntN(2) == 0 // the longest_first order: tasks carry estimates
	r.now, r.slots, r.gpuMiB = t0, 8, 8*80000
	owners := 1 + rnd.IntN(3)
	for i := range owners {
		o := r.owner(fmt.Sprint(1000 + i))
		o.use = usage{SlotSec: rnd.Float64() * 1000, At: t0}
		o.running = rnd.IntN(3)
	}
	sizes := []int64{0, 1000, 4000, 8000, 12000, 20000, 30000, 40000, 60000, 79000, 90000}
	var nodes []*node
	for i := range rnd.IntN(300) {
		s := &task.Spec{ID: fmt.Sprintf("t%03d", i), Owner: fmt.Sprint(1000 + rnd.IntN(owners)), Priority: rnd.IntN(3) / 2}
		n := &node{spec: s, seq: int64(i), card: -1, readySince: t0.Add(-time.Duration(rnd.IntN(7200)) * time.Second)}
		if longest {
			// Estimates as the longest_first order gives them: few
			// distinct values, so that ties fall to submission.
			n.est = []int32{0, 1, 60, 3600, unknownRank}[rnd.IntN(5)]
		}
		if rnd.IntN(8) > 0 {
			s.Resources.Device = task.CUDA
			n.need = gpu.Need{MiB: sizes[rnd.IntN(len(sizes))] + int64(rnd.IntN(3))*500}
			if rnd.IntN(6) == 0 {
				n.need.Count = uint8(2 << rnd.IntN(3))
			}
			n.need.Exclusive = rnd.IntN(20) == 0
			n.placed = rnd.IntN(30) == 0
		}
		switch rnd.IntN(10) {
		case 0:
			s.Resources.CPUs = 1 + rnd.IntN(8)
		case 1:
			s.Resources.MemoryMiBHost = int64(rnd.IntN(4)) << 14
		case 2:
			s.Resources.Counters = map[string]int{"licence": 1 + rnd.IntN(2)}
		}
		n.rec.Waiting.Kind = []task.WaitKind{task.WaitSlot, task.WaitGPUMemory, task.WaitGPUMemory, task.WaitCardReserved,
			task.WaitCardUnavailable, task.WaitUserCap, task.WaitCPU, task.NotWaiting}[rnd.IntN(8)]
		r.ReplaceOrInsert(n)
		n.inReady = true
		nodes = append(nodes, n)
	}
	return r, nodes
}

// randomView is a view of up to 8 cards (some busy, cooling, quarantined,
// unknown, held exclusively, or reserved before the decision), with or
// without caps, host resources and reservations. cards makes the same
// cards afresh for each decision.
func randomView(rnd *rand.Rand, r *readySet) (View, func() []gpu.CardView) {
	n := 1 + rnd.IntN(8)
	cards := make([]gpu.CardView, n)
	for i := range cards {
		c := card(i, 80000, int64(rnd.IntN(17))*5000)
		switch rnd.IntN(12) {
		case 0:
			c.State = gpu.CardCooling
		case 1:
			c.State = gpu.CardQuarantined
		case 2:
			c.State = gpu.CardUnknown
		case 3:
			c.Exclusive = true
		case 4:
			c.ReservedFor, c.ReservedMiB = fmt.Sprintf("t%03d", rnd.IntN(300)), int64(rnd.IntN(3))*20000
		}
		if rnd.IntN(3) == 0 {
			c = holding(c, "busy", 1000)
			if rnd.IntN(2) == 0 { // a known start: the reservation's drain rule weighs it
				c.Holders[len(c.Holders)-1].Since = t0.Add(-time.Duration(rnd.IntN(36000)) * time.Second)
			}
		}
		cards[i] = c
	}
	fresh := func() []gpu.CardView {
		out := slices.Clone(cards)
		for i := range out {
			out[i].Holders = slices.Clone(out[i].Holders)
		}
		return out
	}
	v := View{Free: 1 + rnd.IntN(12), Now: t0, GPUKnown: rnd.IntN(10) > 0,
		Placement: gpu.Placement(rnd.IntN(2)), ReserveAfter: []time.Duration{-1, 0, time.Minute, time.Hour}[rnd.IntN(4)]}
	if rnd.IntN(3) == 0 {
		v.Free = 1000
	}
	if rnd.IntN(3) == 0 {
		v.UserMaxRunning = rnd.IntN(4)
		v.UserMaxGPUMiB = int64(rnd.IntN(3)) * 40000
		v.Owners = r.loads()
		for i := range v.Owners {
			v.Owners[i].GPUMiB = int64(rnd.IntN(3)) * 20000
		}
	}
	if rnd.IntN(2) == 0 {
		v.Host = &HostView{CPUs: rnd.IntN(10) - 1, MemoryMiB: int64(rnd.IntN(4)) << 14,
			Counters: map[string]int{"licence": rnd.IntN(3)}, ReserveAfter: []time.Duration{-1, 0, time.Hour}[rnd.IntN(3)]}
	}
	if rnd.IntN(4) == 0 {
		v.Reserved = map[int]string{rnd.IntN(n): fmt.Sprintf("t%03d", rnd.IntN(300))}
	}
	return v, fresh
}

// Through the index, decide makes exactly the decisions of the full walk:
// the same starts, cards, reservations and reasons, on random queues and
// cards, first with the reasons tasks carry at random, then, as in the
// engine, with the reasons the last decision gave them (where the index
// passes most of the queue over).
func TestIndexedDecideMatchesFullWalk(t *testing.T) {
	var visited, walked, skipping int
	for seed := range uint64(4000) {
		rnd := rand.New(rand.NewPCG(seed, 14))
		r, nodes := randomQueue(rnd)
		v, cards := randomView(rnd, r)
		for round := range 3 {
			full, indexed := v, v
			full.Ready, full.Cards = fullWalk{readyQueue{r}}, cards()
			n := 0
			indexed.Ready, indexed.Cards = countVisits{readyQueue{r}, &n}, cards()
			want, got := decide(full), decide(indexed)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, round %d: through the index\n%+v\nthe full walk\n%+v", seed, round, got, want)
			}
			if !reflect.DeepEqual(indexed.Cards, full.Cards) {
				t.Fatalf("seed %d, round %d: the cards differ after the decision", seed, round)
			}
			if round > 0 {
				m := 0
				countVisits{readyQueue{r}, &m}.Ascend(func(Candidate) bool { m++; return true })
				visited, walked = visited+n, walked+m
				if n < m {
					skipping++
				}
			}
			// The reasons given, as the engine keeps them.
			for _, p := range want.Passed {
				i := slices.IndexFunc(nodes, func(n *node) bool { return n.spec.ID == p.TaskID })
				nodes[i].rec.Waiting.Kind = p.Why
				r.refresh(nodes[i])
			}
		}
		checkIndex(t, r)
	}
	t.Logf("decisions that passed tasks over: %d of %d; tasks handed to decide: %d of %d", skipping, 2*4000, visited, walked)
	if skipping < 1000 {
		t.Errorf("the index passed tasks over in only %d decisions of 8000", skipping)
	}
}

// checkIndex checks that every owner's index holds its ready tasks in
// queue order, each read as it is now, with every subtree summed up
// right.
func checkIndex(tb testing.TB, r *readySet) {
	tb.Helper()
	if !r.indexed {
		return
	}
	for _, o := range r.list {
		var want, got []*node
		o.ready.Ascend(func(n *node) bool { want = append(want, n); return true })
		var walk func(x *inode) needSum
		walk = func(x *inode) needSum {
			if x == nil {
				return emptySum
			}
			if x.l != nil && x.l.own.pri > x.own.pri || x.r != nil && x.r.own.pri > x.own.pri {
				tb.Fatalf("owner %q: treap priorities out of order at %s", o.id, x.n.spec.ID)
			}
			s := walk(x.l)
			got = append(got, x.n)
			was, is := x.own, ownOf(x.n)
			if was.pri = 0; was != is {
				tb.Fatalf("owner %q: %s kept as %+v, is %+v", o.id, x.n.spec.ID, was, is)
			}
			own := x.ownSum()
			s.add(&own)
			r := walk(x.r)
			s.add(&r)
			same := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
			if !same(s.oldest, x.sum.oldest) {
				tb.Fatalf("owner %q: subtree at %s: oldest %v, is %v", o.id, x.n.spec.ID, x.sum.oldest, s.oldest)
			}
			s.oldest = x.sum.oldest
			if s != x.sum {
				tb.Fatalf("owner %q: subtree at %s summed up as %+v, is %+v", o.id, x.n.spec.ID, x.sum, s)
			}
			return s
		}
		walk(o.index.root)
		if !slices.Equal(got, want) {
			tb.Fatalf("owner %q: index holds %d tasks, queue %d, or in another order", o.id, len(got), len(want))
		}
	}
}

// The index follows the ready set through inserts, deletes and changed
// reasons, and is built when the first GPU task becomes ready.
func TestGPUIndexFollowsTheReadySet(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	r := newReadySet()
	var in, out []*node
	for i := range 500 {
		n := ownedNode(fmt.Sprint("c", i), fmt.Sprint(rnd.IntN(3)), rnd.IntN(3), int64(i))
		n.est = []int32{0, 1, 60, 3600, unknownRank}[rnd.IntN(5)]
		out = append(out, n)
	}
	for i := range 20 {
		r.ReplaceOrInsert(out[i])
		in = append(in, out[i])
	}
	if r.indexed {
		t.Fatal("indexed with only CPU tasks ready")
	}
	out = out[20:]
	for step := range 5000 {
		switch k := rnd.IntN(10); {
		case k < 4 && len(out) > 0:
			i := rnd.IntN(len(out))
			n := out[i]
			if step > 100 && rnd.IntN(2) == 0 {
				n.spec.Resources.Device, n.need.MiB = task.CUDA, int64(rnd.IntN(80000))
			}
			r.ReplaceOrInsert(n)
			in, out = append(in, n), slices.Delete(out, i, i+1)
		case k < 7 && len(in) > 0:
			i := rnd.IntN(len(in))
			n := in[i]
			r.Delete(n)
			out, in = append(out, n), slices.Delete(in, i, i+1)
		case len(in) > 0:
			n := in[rnd.IntN(len(in))]
			n.rec.Waiting.Kind = task.WaitKind(rnd.IntN(8))
			r.refresh(n)
		}
		if step%250 == 0 {
			checkIndex(t, r)
		}
	}
	if !r.indexed {
		t.Fatal("not indexed once GPU tasks were ready")
	}
	checkIndex(t, r)
}

// The engine keeps the index: tasks whose reasons the decisions changed
// are read again.
func TestEngineKeepsTheGPUIndex(t *testing.T) {
	e := &Engine{ready: newReadySet()}
	n := &node{spec: &task.Spec{ID: "g", Resources: task.ResourceRequest{Device: task.CUDA, MemoryMiB: 1000}}, need: gpu.Need{MiB: 1000}, card: -1}
	e.ready.ReplaceOrInsert(n)
	n.inReady = true
	e.setWait(n, task.WaitReason{Kind: task.WaitGPUMemory})
	checkIndex(t, e.ready)
	if s := e.ready.owner("").index.root.sum; s.other || s.memLo != 1000 {
		t.Errorf("summed up as %+v after its reason changed", s)
	}
	n.rec.State = task.Running
	e.forgetWait(n)
	checkIndex(t, e.ready)
}

// The simulations through the engine's ready set and its GPU index, the
// tasks carrying the reasons the last decision gave them: every decision
// is the full walk's (simulate checks each), so the schedules, and the
// figures in docs/benchmarks.md, are the same as without the index.
func TestSimulationThroughTheIndex(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 400
	}
	traces := map[string][]simTask{
		"batch":        simTrace(simSeed, n, 0),
		"arrivals":     simTrace(simSeed, n, simArrGap),
		"mixed/batch":  simMixedTrace(simSeed, n/4, 0),
		"mixed/arrive": simMixedTrace(simSeed, n/4, simArrGap),
	}
	for name, tr := range traces {
		for _, cooldown := range []time.Duration{0, gpu.DefaultCooldown} {
			for _, pol := range []simPolicy{simPolicies[0], simPolicies[2]} {
				want, err := simulate(tr, pol, simOptions{cooldown: cooldown})
				if err != nil {
					t.Fatal(err)
				}
				got, err := simulate(tr, pol, simOptions{cooldown: cooldown, indexed: true})
				if err != nil {
					t.Fatalf("%s, cooldown %v, %s: %v", name, cooldown, pol.name, err)
				}
				if got.makespan != want.makespan || got.meanWait != want.meanWait || !slices.Equal(got.started, want.started) ||
					!slices.Equal(got.startedAt, want.startedAt) {
					t.Errorf("%s, cooldown %v, %s: through the index makespan %v, mean wait %v; without %v, %v",
						name, cooldown, pol.name, got.makespan, got.meanWait, want.makespan, want.meanWait)
				}
				t.Logf("%s, cooldown %v, %s: %d decisions, %d tasks waiting, %d handed to decide",
					name, cooldown, pol.name, got.decisions, got.queued, got.handed)
				if name == "batch" && got.handed > got.queued/2 {
					t.Errorf("%s, %s: the index handed decide %d of %d waiting tasks", name, pol.name, got.handed, got.queued)
				}
			}
		}
	}
}

// An index node is 144 bytes, a size class of the allocator: a field more
// puts it in the 160-byte class, 11% more heap per ready GPU task.
func TestIndexNodeFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(inode{}); n > 144 {
		t.Errorf("inode is %d bytes, over 144", n)
	}
}

// gpuNodes are n ready GPU tasks of one owner, in 7 priorities, asking
// 20-26 GB each, waiting for memory.
func gpuNodes(n int) []*node {
	out := make([]*node, n)
	for i := range out {
		x := ownedNode(fmt.Sprint("t", i), "1000", i%7, int64(i))
		x.spec.Resources.Device = task.CUDA
		x.need.MiB = 20000 + int64(i%7)*1000
		x.readySince = t0
		x.rec.Waiting.Kind = task.WaitGPUMemory
		out[i] = x
	}
	return out
}

// BenchmarkReadySetChurnGPU is BenchmarkReadySetChurn with GPU tasks: the
// ready set keeps their GPU index too.
func BenchmarkReadySetChurnGPU(b *testing.B) {
	r := newReadySet()
	for _, n := range gpuNodes(100_000) {
		r.ReplaceOrInsert(n)
	}
	seq := int64(100_000)
	b.ReportAllocs()
	for b.Loop() {
		var n *node
		r.Ascend(func(m *node) bool { n = m; return false })
		r.Delete(n)
		n.seq = seq
		seq++
		r.ReplaceOrInsert(n)
	}
}

// BenchmarkGPUIndexRefresh: a ready GPU task's reason changes, with 100,000
// ready: the index reads it again (once per task whose reason a decision
// changes).
func BenchmarkGPUIndexRefresh(b *testing.B) {
	r := newReadySet()
	nodes := gpuNodes(100_000)
	for _, n := range nodes {
		r.ReplaceOrInsert(n)
	}
	kinds := [2]task.WaitKind{task.WaitGPUMemory, task.WaitCardUnavailable}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		n := nodes[i*7919%len(nodes)]
		n.rec.Waiting.Kind = kinds[i&1]
		r.refresh(n)
		i++
	}
}

// BenchmarkGPUIndexHeap reports the heap the index takes per ready task
// (B/task), with 100,000 ready: what the ready set holds with it, less
// what it holds without.
func BenchmarkGPUIndexHeap(b *testing.B) {
	var perTask float64
	for b.Loop() {
		nodes := gpuNodes(100_000)
		r := newReadySet()
		for _, n := range nodes {
			n.spec.Resources.Device = "" // CPU tasks: no index
			r.ReplaceOrInsert(n)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, n := range nodes {
			n.spec.Resources.Device = task.CUDA
		}
		r.enableIndex()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTask = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(nodes))
		runtime.KeepAlive(r)
	}
	b.ReportMetric(perTask, "B/task")
}

// BenchmarkSimulationThroughTheIndex: the mean cost of a decision over
// the published traces (default policy, no cooldown), the queue in the
// engine's ready set with the reasons the last decision gave, as in the
// engine: through the index (us/decision) and by the full walk
// (full-us/decision); and the tasks the index handed decide per decision
// (handed/decision) of those waiting (waiting/decision).
func BenchmarkSimulationThroughTheIndex(b *testing.B) {
	for _, gap := range []time.Duration{0, simArrGap} {
		name := "trace=batch"
		if gap > 0 {
			name = "trace=arrivals"
		}
		tr := simTrace(simSeed, simTasks, gap)
		b.Run(name, func(b *testing.B) {
			var res simResult
			for b.Loop() {
				var err error
				if res, err = simulate(tr, simPolicies[0], simOptions{indexed: true}); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(res.decisions)
			b.ReportMetric(res.decideTime.Seconds()*1e6/n, "us/decision")
			b.ReportMetric(res.fullTime.Seconds()*1e6/n, "full-us/decision")
			b.ReportMetric(float64(res.handed)/n, "handed/decision")
			b.ReportMetric(float64(res.queued)/n, "waiting/decision")
		})
	}
}

// Walking the ready set allocates nothing, indexed or not, with one owner
// or several: the walk through the index keeps its state on the stack
// (a function kept in a field escaped, and with it every caller's
// closure: one allocation per start in the loop).
func TestReadySetWalkAllocatesNothing(t *testing.T) {
	for _, owners := range []int{1, 3} {
		for _, gpus := range []bool{false, true} {
			r := newReadySet()
			for i, n := range gpuNodes(1000) {
				n.spec.Owner = fmt.Sprint(i % owners)
				if !gpus {
					n.spec.Resources.Device = ""
				}
				r.ReplaceOrInsert(n)
			}
			first := func(*owner, *node) bool { return false }
			never := func(int32, needSum) bool { return false }
			if a := testing.AllocsPerRun(100, func() { r.walk(first) }); a != 0 {
				t.Errorf("%d owners, indexed %v: walk allocates %.0f times", owners, r.indexed, a)
			}
			if a := testing.AllocsPerRun(100, func() { r.walkSkip(first, never) }); gpus && a != 0 {
				t.Errorf("%d owners: the walk through the index allocates %.0f times", owners, a)
			}
		}
	}
}
