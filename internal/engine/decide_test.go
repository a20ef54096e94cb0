package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/btree"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// sliceQueue is a Queue over candidates already in order.
type sliceQueue []Candidate

func (q sliceQueue) Ascend(fn func(Candidate) bool) {
	for _, c := range q {
		if !fn(c) {
			return
		}
	}
}

// countingQueue counts how many candidates decide looked at.
type countingQueue struct {
	sliceQueue
	seen int
}

func (q *countingQueue) Ascend(fn func(Candidate) bool) {
	q.sliceQueue.Ascend(func(c Candidate) bool { q.seen++; return fn(c) })
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func cpu(id string) Candidate { return Candidate{ID: id} }

// gpuTask is a GPU candidate needing mib, ready since `waited` before t0.
func gpuTask(id string, mib int64, waited time.Duration) Candidate {
	return Candidate{ID: id, GPU: true, Need: gpu.Need{MiB: mib}, ReadySince: t0.Add(-waited)}
}

func exclusive(c Candidate) Candidate { c.Need.Exclusive = true; return c }

func avoiding(c Candidate, cards ...int) Candidate { c.Need.Avoid = cards; return c }

// card is an idle card with capacity cap MiB and avail MiB left.
func card(index int, cap, avail int64) gpu.CardView {
	return gpu.CardView{Index: index, UUID: fmt.Sprint("GPU-", index), TotalMiB: cap + 512, CapacityMiB: cap,
		AvailableMiB: avail, ForeignMiB: cap - avail}
}

func inState(c gpu.CardView, s gpu.CardState) gpu.CardView { c.State = s; return c }

func holding(c gpu.CardView, task string, mib int64) gpu.CardView {
	c.Holders = append(c.Holders, gpu.Holding{Task: task, RequestMiB: mib})
	c.ForeignMiB -= mib
	c.ChargedMiB += mib
	return c
}

func TestDecide(t *testing.T) {
	abc := sliceQueue{{ID: "a", Priority: 5}, {ID: "b", Priority: 1, Seq: 1}, {ID: "c", Seq: 2}}
	two := []gpu.CardView{card(0, 80000, 80000), card(1, 80000, 30000)}
	tests := []struct {
		name     string
		view     View
		want     []string // "task" for CPU, "task@card" for GPU
		reserved map[int]string
	}{
		{"no slot", View{Free: 0, Ready: abc}, nil, nil},
		{"negative slots", View{Free: -1, Ready: abc}, nil, nil},
		{"nothing ready", View{Free: 3, Ready: sliceQueue{}}, nil, nil},
		{"nil queue", View{Free: 3}, nil, nil},
		{"one slot takes the best", View{Free: 1, Ready: abc}, []string{"a"}, nil},
		{"slots in queue order", View{Free: 2, Ready: abc}, []string{"a", "b"}, nil},
		{"more slots than ready", View{Free: 10, Ready: abc}, []string{"a", "b", "c"}, nil},

		{"spread: most room first", View{Free: 4, GPUKnown: true, Cards: two,
			Ready: sliceQueue{gpuTask("g1", 20000, 0), gpuTask("g2", 20000, 0), gpuTask("g3", 20000, 0)}},
			[]string{"g1@0", "g2@0", "g3@0"}, nil},
		{"spread alternates when rooms cross", View{Free: 4, GPUKnown: true, Cards: []gpu.CardView{card(0, 80000, 50000), card(1, 80000, 40000)},
			Ready: sliceQueue{gpuTask("g1", 20000, 0), gpuTask("g2", 20000, 0), gpuTask("g3", 20000, 0)}},
			[]string{"g1@0", "g2@1", "g3@0"}, nil},
		{"pack: least room that fits", View{Free: 4, GPUKnown: true, Cards: two, Placement: gpu.Pack,
			Ready: sliceQueue{gpuTask("g1", 20000, 0), gpuTask("g2", 20000, 0)}},
			[]string{"g1@1", "g2@0"}, nil},
		{"no double booking within one decision", View{Free: 4, GPUKnown: true, Cards: []gpu.CardView{card(0, 80000, 10000)},
			Ready: sliceQueue{gpuTask("g1", 6000, 0), gpuTask("g2", 6000, 0), gpuTask("g3", 4000, 0)}},
			[]string{"g1@0", "g3@0"}, nil},
		{"unknown GPU state: only CPU tasks start", View{Free: 4, GPUKnown: false, Cards: two,
			Ready: sliceQueue{gpuTask("g1", 100, 0), cpu("c1")}},
			[]string{"c1"}, nil},
		{"a big task does not hold back small ones", View{Free: 4, GPUKnown: true, Cards: two, ReserveAfter: time.Hour,
			Ready: sliceQueue{gpuTask("big", 90000, time.Minute), gpuTask("small", 1000, 0), cpu("c")}},
			[]string{"small@0", "c"}, nil},
		{"cards not ok are skipped", View{Free: 4, GPUKnown: true, Cards: []gpu.CardView{
			inState(card(0, 80000, 80000), gpu.CardCooling), inState(card(1, 80000, 80000), gpu.CardQuarantined),
			inState(card(2, 80000, 80000), gpu.CardUnknown), inState(card(3, 80000, 80000), gpu.CardHidden), card(4, 80000, 100)},
			Ready: sliceQueue{gpuTask("g", 100, 0)}},
			[]string{"g@4"}, nil},
		{"exclusive needs an empty card", View{Free: 4, GPUKnown: true,
			Cards: []gpu.CardView{holding(card(0, 80000, 70000), "x", 10000), card(1, 80000, 80000)},
			Ready: sliceQueue{exclusive(gpuTask("ex", 0, 0)), gpuTask("after", 100, 0)}},
			[]string{"ex@1", "after@0"}, nil},
		{"exclusive refuses foreign processes", View{Free: 4, GPUKnown: true,
			Cards: func() []gpu.CardView { c := card(0, 80000, 79000); c.ForeignProcs = 1; return []gpu.CardView{c} }(),
			Ready: sliceQueue{exclusive(gpuTask("ex", 0, 0))}},
			nil, nil},
		{"nothing joins an exclusive task", View{Free: 4, GPUKnown: true, Cards: []gpu.CardView{card(0, 80000, 80000)},
			Ready: sliceQueue{exclusive(gpuTask("ex", 1000, 0)), gpuTask("small", 10, 0)}},
			[]string{"ex@0"}, nil},
		{"a failed card is avoided when another fits", View{Free: 4, GPUKnown: true, Cards: two,
			Ready: sliceQueue{avoiding(gpuTask("retry", 1000, 0), 0)}},
			[]string{"retry@1"}, nil},
		{"a failed card is used when nothing else fits", View{Free: 4, GPUKnown: true, Cards: two,
			Ready: sliceQueue{avoiding(gpuTask("retry", 50000, 0), 0)}},
			[]string{"retry@0"}, nil},
		{"a starving task reserves the closest card", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute, Cards: []gpu.CardView{
			holding(card(0, 80000, 20000), "x", 60000), holding(card(1, 80000, 30000), "y", 50000), card(2, 80000, 5000)},
			Ready: sliceQueue{gpuTask("big", 70000, 2*time.Minute), gpuTask("small", 10000, 0), gpuTask("small2", 10000, 0)}},
			[]string{"small@0", "small2@0"}, map[int]string{1: "big"}},
		{"before ReserveAfter small tasks backfill its card", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: []gpu.CardView{holding(card(1, 80000, 30000), "y", 50000)},
			Ready: sliceQueue{gpuTask("big", 70000, 30*time.Second), gpuTask("small", 10000, 0)}},
			[]string{"small@1"}, nil},
		{"higher-priority work still goes first", View{Free: 4, GPUKnown: true, ReserveAfter: time.Nanosecond,
			Cards: []gpu.CardView{holding(card(1, 80000, 30000), "y", 50000)},
			Ready: sliceQueue{gpuTask("urgent", 10000, 0), gpuTask("big", 70000, time.Hour), gpuTask("small", 10000, 0)}},
			[]string{"urgent@1"}, map[int]string{1: "big"}},
		{"a task larger than every card reserves nothing", View{Free: 4, GPUKnown: true, ReserveAfter: time.Nanosecond,
			Cards: []gpu.CardView{card(0, 80000, 80000)},
			Ready: sliceQueue{gpuTask("huge", 90000, time.Hour), gpuTask("small", 10000, 0)}},
			[]string{"small@0"}, nil},
		{"slots bound GPU starts too", View{Free: 1, GPUKnown: true, Cards: two,
			Ready: sliceQueue{gpuTask("g1", 100, 0), gpuTask("g2", 100, 0)}},
			[]string{"g1@0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.view
			v.Now = t0
			if v.ReserveAfter == 0 {
				v.ReserveAfter = -1 // cases about reservations set it
			}
			v.Cards = slices.Clone(v.Cards)
			p := decide(v)
			var got []string
			for _, a := range p.Starts {
				if a.Card < 0 {
					got = append(got, a.TaskID)
				} else {
					got = append(got, fmt.Sprintf("%s@%d", a.TaskID, v.Cards[a.Card].Index))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("starts = %v, want %v", got, tt.want)
			}
			if !maps.Equal(p.Reserved, tt.reserved) {
				t.Errorf("reserved = %v, want %v", p.Reserved, tt.reserved)
			}
		})
	}
}

// TestDecideNeverOvercommits throws random queues at random cards and checks
// that what decide starts on a card always fits in what the card had left.
func TestDecideNeverOvercommits(t *testing.T) {
	seed := uint64(1)
	rnd := func(n int64) int64 { seed = seed*6364136223846793005 + 1442695040888963407; return int64(seed>>33) % n }
	for round := range 2000 {
		var cards []gpu.CardView
		for i := range 1 + rnd(4) {
			cards = append(cards, card(int(i), 10000+rnd(70000), rnd(80000)))
		}
		var q sliceQueue
		for i := range rnd(30) {
			c := gpuTask(fmt.Sprint("t", i), 1+rnd(40000), time.Duration(rnd(120))*time.Second)
			if rnd(5) == 0 {
				c = exclusive(c)
			}
			q = append(q, c)
		}
		before := slices.Clone(cards)
		v := View{Free: 100, Ready: q, Now: t0, GPUKnown: true, Cards: cards, ReserveAfter: time.Minute, Placement: gpu.Placement(rnd(2))}
		p := decide(v)
		booked := map[int]int64{}
		excl := map[int]int{}
		count := map[int]int{}
		for _, a := range p.Starts {
			c := q[slices.IndexFunc(q, func(c Candidate) bool { return c.ID == a.TaskID })]
			booked[a.Card] += c.Need.MiB
			count[a.Card]++
			if c.Need.Exclusive {
				excl[a.Card]++
			}
		}
		for i, b := range booked {
			if b > before[i].AvailableMiB && excl[i] == 0 {
				t.Fatalf("round %d: card %d had %d MiB left and got %d", round, i, before[i].AvailableMiB, b)
			}
			if excl[i] > 0 && (count[i] > 1 || len(before[i].Holders) > 0) {
				t.Fatalf("round %d: card %d shared by an exclusive task", round, i)
			}
		}
	}
}

func TestDecideWalksOnlyWhatItStarts(t *testing.T) {
	q := &countingQueue{sliceQueue: make(sliceQueue, 100000)}
	if got := decide(View{Free: 2, Ready: q}); len(got.Starts) != 2 {
		t.Fatalf("started %d, want 2", len(got.Starts))
	}
	if q.seen != 2 {
		t.Errorf("decide looked at %d candidates to start 2", q.seen)
	}
}

func TestExplainNamesTheObstacle(t *testing.T) {
	cards := []gpu.CardView{holding(card(1, 28000, 12000), "train-3", 4096), inState(card(2, 80000, 80000), gpu.CardQuarantined)}
	cards[0].ForeignMiB = 8000
	cards[1].Reason = "3 failed attempts in a row"
	got := gpu.Explain(cards, gpu.Need{MiB: 20000}, "big", "")
	want := "needs 20000 MiB; best card 1 has 12000 MiB left (foreign 8000, train-3 holds 4096); card 2 quarantined: 3 failed attempts in a row"
	if got != want {
		t.Errorf("Explain =\n %q\nwant\n %q", got, want)
	}
	if got := gpu.Explain(cards, gpu.Need{MiB: 1}, "x", "nvidia-smi timed out"); !strings.HasPrefix(got, "GPU state unknown: nvidia-smi timed out") {
		t.Errorf("Explain with unknown state = %q", got)
	}
}

// decide says why it passes over each GPU task, and only when that is not
// the reason the task already carries.
func TestDecideSaysWhyItPassesOver(t *testing.T) {
	reserved := card(0, 40000, 30000)
	reserved.ReservedFor = "big"
	cooling := inState(card(1, 40000, 25000), gpu.CardCooling)
	quarantined := inState(card(2, 40000, 25000), gpu.CardQuarantined)
	busy := card(3, 40000, 1000)
	for _, c := range []struct {
		name    string
		cards   []gpu.CardView
		known   bool
		need    int64
		carries task.WaitKind
		want    task.WaitKind // NotWaiting: not reported
	}{
		{"no card has room", []gpu.CardView{busy}, true, 20000, task.WaitSlot, task.WaitGPUMemory},
		{"no card has room, already said", []gpu.CardView{busy}, true, 20000, task.WaitGPUMemory, task.NotWaiting},
		{"room only on a card reserved for another", []gpu.CardView{busy, reserved}, true, 20000, task.WaitSlot, task.WaitCardReserved},
		{"room only on a cooling card", []gpu.CardView{busy, cooling}, true, 20000, task.WaitGPUMemory, task.WaitCardUnavailable},
		{"room only on a quarantined card", []gpu.CardView{quarantined, busy}, true, 20000, task.WaitSlot, task.WaitCardUnavailable},
		{"too big even for the reserved and cooling cards", []gpu.CardView{reserved, cooling}, true, 35000, task.WaitSlot, task.WaitGPUMemory},
		{"GPU state unknown", []gpu.CardView{busy}, false, 1, task.WaitSlot, task.WaitGPUUnknown},
		{"GPU state unknown, already said", nil, false, 1, task.WaitGPUUnknown, task.NotWaiting},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gpuTask("g", c.need, 0)
			g.Waiting = c.carries
			q := sliceQueue{g, cpu("c")}
			p := decide(View{Free: 4, Ready: q, Now: t0, GPUKnown: c.known, Cards: slices.Clone(c.cards), ReserveAfter: -1})
			if len(p.Starts) != 1 || p.Starts[0].TaskID != "c" {
				t.Errorf("starts = %+v, want c only", p.Starts)
			}
			var want []Pass
			if c.want != task.NotWaiting {
				want = []Pass{{TaskID: "g", Why: c.want}}
			}
			if !slices.Equal(p.Passed, want) {
				t.Errorf("passed = %+v, want %+v", p.Passed, want)
			}
		})
	}
}

// A task that fits nowhere but on a card decide reserves, in this very
// decision, for a starving task ahead of it waits for that reservation.
func TestDecidePassesOverForTheReservationItMakes(t *testing.T) {
	cards := []gpu.CardView{holding(card(0, 40000, 20000), "running", 20000)}
	q := sliceQueue{gpuTask("big", 30000, time.Hour), gpuTask("small", 10000, 0)}
	p := decide(View{Free: 4, Ready: q, Now: t0, GPUKnown: true, Cards: cards, ReserveAfter: time.Minute})
	want := []Pass{{TaskID: "big", Why: task.WaitGPUMemory}, {TaskID: "small", Why: task.WaitCardReserved}}
	if len(p.Starts) != 0 || p.Reserved[0] != "big" || !slices.Equal(p.Passed, want) {
		t.Errorf("plan = %+v; want nothing started, card 0 reserved for big, passed %+v", p, want)
	}
}

// decide's constant-time reason for a task that is not exclusive is the
// one passedWhy finds card by card, on random cards: reserved, cooling,
// quarantined, held exclusively, with room or not.
func TestDecideWhyAgreesWithPassedWhy(t *testing.T) {
	seed := uint64(7)
	rnd := func(n int64) int64 { seed = seed*6364136223846793005 + 1442695040888963407; return int64(seed>>33) % n }
	states := []gpu.CardState{gpu.CardOK, gpu.CardOK, gpu.CardCooling, gpu.CardQuarantined, gpu.CardUnknown}
	for round := range 5000 {
		var cards []gpu.CardView
		for i := range 1 + rnd(5) {
			c := inState(card(int(i), 80000, rnd(80000)), states[rnd(int64(len(states)))])
			if rnd(3) == 0 {
				c.ReservedFor = "other"
			}
			c.Exclusive = rnd(6) == 0
			cards = append(cards, c)
		}
		d := &decision{cards: cards, kept: keptCards(nil, cards), stale: true}
		d.measureKept()
		for range 10 {
			need := gpu.Need{MiB: rnd(90000)}
			want := passedWhy(cards, d.kept, need)
			if got := roomWhy(need.MiB, d.roomReserved, d.roomResting); len(d.kept) > 0 && got != want {
				t.Fatalf("round %d: %d MiB on %+v: roomWhy %s, passedWhy %s", round, need.MiB, cards, got, want)
			}
		}
	}
	for _, c := range []struct {
		mib, reserved, resting int64
		want                   task.WaitKind
	}{
		{10, -1, -1, task.WaitGPUMemory}, {10, 10, -1, task.WaitCardReserved}, {10, 9, 10, task.WaitCardUnavailable},
		{10, 20, 20, task.WaitCardReserved}, {0, -1, 0, task.WaitCardUnavailable}, {1 << 40, 1<<40 - 1, 1 << 41, task.WaitCardUnavailable},
	} {
		if got := roomWhy(c.mib, c.reserved, c.resting); got != c.want {
			t.Errorf("roomWhy(%d, %d, %d) = %s, want %s", c.mib, c.reserved, c.resting, got, c.want)
		}
	}
}

// settle gives every ready task the reason decide gives it, as the engine
// does after a decision: the steady state of a queue that waits.
func settle(tb testing.TB, t *readySet, p Plan) {
	tb.Helper()
	why := map[string]task.WaitKind{}
	for _, x := range p.Passed {
		why[x.TaskID] = x.Why
	}
	t.Ascend(func(n *node) bool {
		if k, ok := why[n.spec.ID]; ok {
			n.rec.Waiting.Kind = k
			t.refresh(n) // as Engine.setWait does
		}
		return true
	})
}

// BenchmarkDecide100kReady: choosing what to start with 100,000 ready tasks
// in the engine's real ready queue (a B-tree by priority and submission).
func BenchmarkDecide100kReady(b *testing.B) {
	e := &Engine{ready: newReadySet()}
	for i := range 100_000 {
		n := &node{spec: &task.Spec{ID: fmt.Sprint("t", i), Priority: i % 7}, seq: int64(i)}
		e.ready.ReplaceOrInsert(n)
	}
	q := readyQueue{e.ready}
	for _, free := range []int{1, 8} {
		b.Run(fmt.Sprint("free=", free), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := decide(View{Free: free, Ready: q}); len(got.Starts) != free {
					b.Fatalf("started %d", len(got.Starts))
				}
			}
		})
	}
	// As the engine decides: the machine's cores and memory counted
	// (View.Host), the tasks asking nothing of them but their one core.
	host := &HostView{CPUs: 64, MemoryMiB: 1 << 20, Counters: map[string]int{}, ReserveAfter: time.Minute}
	b.Run("free=8/host", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got := decide(View{Free: 8, Ready: q, Host: host}); len(got.Starts) != 8 {
				b.Fatalf("started %d", len(got.Starts))
			}
		}
	})
}

// BenchmarkDecide10kWaitingCPU: 10,000 ready tasks of 4 cores each, with
// 2 cores free and slots to spare: none fits, and decide looks at every
// one, as it does at GPU tasks that fit no card. They carry the reason an
// earlier decision gave them, so none is reported.
func BenchmarkDecide10kWaitingCPU(b *testing.B) {
	e := &Engine{ready: newReadySet()}
	for i := range 10_000 {
		n := &node{spec: &task.Spec{ID: fmt.Sprint("t", i), Resources: task.ResourceRequest{CPUs: 4}}, seq: int64(i), readySince: t0}
		e.ready.ReplaceOrInsert(n)
	}
	q := readyQueue{e.ready}
	host := &HostView{CPUs: 2, MemoryMiB: 1 << 20, ReserveAfter: -1}
	settle(b, e.ready, decide(View{Free: 4, Ready: q, Now: t0, Host: host}))
	b.ReportAllocs()
	for b.Loop() {
		if p := decide(View{Free: 4, Ready: q, Now: t0, Host: host}); len(p.Starts) != 0 || len(p.Passed) != 0 {
			b.Fatalf("started %d, reported %d reasons", len(p.Starts), len(p.Passed))
		}
	}
}

// BenchmarkDecide10kWaitingGPU: one admission decision with 10,000 GPU
// tasks waiting on 8 busy 80 GiB cards, none of which fits now: the worst
// case, where decide looks at every waiting task. The tasks carry the
// reason an earlier decision gave them, as in the engine, so decide
// reports none (BenchmarkDecide10kNewGPU: the first decision, which
// reports all).
func BenchmarkDecide10kWaitingGPU(b *testing.B) { benchDecide10kGPU(b, true) }

// BenchmarkDecide10kNewGPU: the decision in which 10,000 GPU tasks that
// fit nowhere are first looked at: every one's reason is reported.
func BenchmarkDecide10kNewGPU(b *testing.B) { benchDecide10kGPU(b, false) }

func benchDecide10kGPU(b *testing.B, settled bool) {
	e := &Engine{ready: newReadySet()}
	for i := range 10_000 {
		n := &node{spec: &task.Spec{ID: fmt.Sprint("t", i), Resources: task.ResourceRequest{Device: task.CUDA, MemoryMiB: 20000}},
			seq: int64(i), need: gpu.Need{MiB: 20000 + int64(i%7)*1000}, readySince: t0}
		e.ready.ReplaceOrInsert(n)
	}
	cards := make([]gpu.CardView, 8)
	for i := range cards {
		cards[i] = holding(card(i, 81408, 10000), "busy", 71408)
	}
	q := readyQueue{e.ready}
	if settled {
		settle(b, e.ready, decide(View{Free: 4, Ready: q, Now: t0, GPUKnown: true, Cards: slices.Clone(cards), ReserveAfter: time.Hour}))
	}
	b.ReportAllocs()
	for b.Loop() {
		v := View{Free: 4, Ready: q, Now: t0, GPUKnown: true, Cards: slices.Clone(cards), ReserveAfter: time.Hour}
		if p := decide(v); len(p.Starts) != 0 || settled != (len(p.Passed) == 0) {
			b.Fatalf("started %d, reported %d reasons", len(p.Starts), len(p.Passed))
		}
	}
}

// BenchmarkReadyQueueChurn: taking the best ready task out and putting a
// new one in, as the loop does once per start, with 100,000 ready.
func BenchmarkReadyQueueChurn(b *testing.B) {
	t := btree.NewG(32, lessNode)
	for i := range 100_000 {
		t.ReplaceOrInsert(&node{spec: &task.Spec{Priority: i % 7}, seq: int64(i)})
	}
	seq := int64(100_000)
	b.ReportAllocs()
	for b.Loop() {
		n, _ := t.DeleteMin()
		n.seq = seq
		seq++
		t.ReplaceOrInsert(n)
	}
}
