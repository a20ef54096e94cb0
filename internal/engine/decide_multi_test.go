package engine

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// wide is a GPU candidate needing mib on each of n cards, ready since
// `waited` before t0.
func wide(id string, n int, mib int64, waited time.Duration) Candidate {
	c := gpuTask(id, mib, waited)
	c.Need.Count = uint8(n)
	return c
}

// starts renders a plan's starts as "task@card" or "task@a+b" for a task
// on several cards (their indices, in the order chosen).
func starts(v View, p Plan) []string {
	var out []string
	for _, a := range p.Starts {
		s := a.TaskID
		switch set := p.Sets[a.TaskID]; {
		case len(set) > 0:
			s += "@"
			for k, i := range set {
				if k > 0 {
					s += "+"
				}
				s += itoa(v.Cards[i].Index)
			}
		case a.Card >= 0:
			s += "@" + itoa(v.Cards[a.Card].Index)
		}
		out = append(out, s)
	}
	return out
}

func itoa(i int) string { return string(rune('0' + i)) }

// linked is a topology of n cards where the pairs given are NV4 apart and
// every other pair SYS (constructed for the tests).
func linked(n int, pairs ...[2]int) *gpu.Topology {
	t := gpu.NewTopology(n)
	for _, p := range pairs {
		t.Set(p[0], p[1], gpu.NVLink(4))
	}
	return t
}

func TestDecideSeveralCards(t *testing.T) {
	// Cards with avail MiB left by a task of ours ("busy"), which will
	// end: each could hold 80000 once it does.
	four := func(avail ...int64) []gpu.CardView {
		out := make([]gpu.CardView, len(avail))
		for i, a := range avail {
			out[i] = card(i, 80000, a)
			if a < 80000 {
				out[i] = holding(out[i], "busy", 80000-a)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		view     View
		want     []string
		reserved map[int]string
		passed   map[string]task.WaitKind
	}{
		{"all at once", View{Free: 4, GPUKnown: true, Cards: four(50000, 50000, 10000, 50000),
			Ready: sliceQueue{wide("w", 3, 40000, 0)}}, []string{"w@0+1+3"}, nil, nil},
		{"or not at all: a smaller task behind starts", View{Free: 4, GPUKnown: true, Cards: four(50000, 50000, 10000, 10000),
			Ready: sliceQueue{wide("w", 3, 40000, 0), gpuTask("s", 5000, 0)}}, []string{"s@0"}, nil,
			map[string]task.WaitKind{"w": task.WaitGPUMemory}},
		{"each card charged: the next task sees them full", View{Free: 4, GPUKnown: true, Cards: four(50000, 50000, 80000, 80000),
			Ready: sliceQueue{wide("w", 2, 40000, 0), gpuTask("a", 20000, 0), gpuTask("b", 20000, 0), gpuTask("c", 20000, 0)}},
			[]string{"w@2+3", "a@0", "b@1", "c@2"}, nil, nil},
		{"exclusive applies to each card", View{Free: 4, GPUKnown: true,
			Cards: []gpu.CardView{holding(card(0, 80000, 70000), "x", 10000), card(1, 80000, 80000), card(2, 80000, 80000), card(3, 80000, 80000)},
			Ready: sliceQueue{exclusive(wide("ex", 2, 0, 0)), gpuTask("s", 100, 0)}}, []string{"ex@1+2", "s@3"}, nil, nil},
		{"the closest pair", View{Free: 4, GPUKnown: true, Cards: four(80000, 70000, 60000, 50000), Topology: linked(4, [2]int{1, 3}),
			Ready: sliceQueue{wide("w", 2, 40000, 0)}}, []string{"w@1+3"}, nil, nil},
		{"no topology: the most room", View{Free: 4, GPUKnown: true, Cards: four(80000, 70000, 60000, 50000),
			Ready: sliceQueue{wide("w", 2, 40000, 0)}}, []string{"w@0+1"}, nil, nil},
		{"one slot, one start", View{Free: 1, GPUKnown: true, Cards: four(80000, 80000, 80000, 80000),
			Ready: sliceQueue{wide("w", 2, 1000, 0), gpuTask("s", 1000, 0)}}, []string{"w@0+1"}, nil, nil},
		{"unknown GPU state", View{Free: 4, GPUKnown: false, Cards: four(80000, 80000, 80000, 80000),
			Ready: sliceQueue{wide("w", 2, 1000, 0)}}, nil, nil, map[string]task.WaitKind{"w": task.WaitGPUUnknown}},
		{"starving past its width's wait: reserves as many cards as it takes, the closest", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(30000, 20000, 10000, 25000), Topology: linked(4, [2]int{0, 2}),
			Ready: sliceQueue{wide("w", 2, 40000, 2*wideReservePerCard)}}, nil, map[int]string{0: "w", 2: "w"},
			map[string]task.WaitKind{"w": task.WaitGPUMemory}}, // its own cards: it waits for their memory
		{"starving, its cards far from free: no reservation yet", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(30000, 20000, 10000, 25000), Topology: linked(4, [2]int{0, 2}),
			Ready: sliceQueue{wide("w", 2, 40000, 2*wideReservePerCard-time.Second), gpuTask("s", 20000, 0)}}, []string{"s@0"}, nil,
			map[string]task.WaitKind{"w": task.WaitGPUMemory}},
		{"starving, its cards nearly free: it reserves at once", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(38000, 20000, 10000, 39000), // the closest two lack 3000 of its 80000
			Ready: sliceQueue{wide("w", 2, 40000, 2*time.Minute), gpuTask("s", 20000, 0)}}, []string{"s@1"}, map[int]string{0: "w", 3: "w"},
			map[string]task.WaitKind{"w": task.WaitGPUMemory}},
		{"a reserved card with room keeps taking what leaves it", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(60000, 20000, 10000, 5000),
			Ready: sliceQueue{wide("w", 2, 40000, 2*wideReservePerCard), gpuTask("fits", 15000, 0), gpuTask("too-big", 30000, 0)}},
			[]string{"fits@0"}, map[int]string{0: "w", 1: "w"},
			map[string]task.WaitKind{"w": task.WaitGPUMemory, "too-big": task.WaitCardReserved}},
		{"the same cards as last time, while they can be reserved", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(30000, 20000, 10000, 25000), Reserved: map[int]string{2: "w", 3: "w", 1: "other"},
			Ready: sliceQueue{wide("w", 2, 40000, 2*time.Minute)}}, nil, map[int]string{2: "w", 3: "w"}, nil},
		{"a one-card task ahead reserves first, one task at a time", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(30000, 20000, 10000, 25000),
			Ready: sliceQueue{gpuTask("one", 50000, 3*time.Minute), wide("w", 2, 40000, 2*time.Minute)}}, nil, map[int]string{0: "one"}, nil},
		{"not starving yet: no reservation", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: four(30000, 20000, 10000, 25000), Ready: sliceQueue{wide("w", 2, 40000, time.Second)}}, nil, nil,
			map[string]task.WaitKind{"w": task.WaitGPUMemory}},
		{"it starts on its own reserved cards", View{Free: 4, GPUKnown: true, ReserveAfter: time.Minute,
			Cards: func() []gpu.CardView {
				c := four(50000, 50000, 10000, 10000)
				c[0].ReservedFor, c[1].ReservedFor = "w", "w"
				return c
			}(), Ready: sliceQueue{wide("w", 2, 40000, time.Hour)}}, []string{"w@0+1"}, map[int]string{}, nil},
		{"cooling cards would make the set", View{Free: 4, GPUKnown: true,
			Cards: []gpu.CardView{card(0, 80000, 80000), inState(card(1, 80000, 80000), gpu.CardCooling), card(2, 80000, 100)},
			Ready: sliceQueue{wide("w", 2, 40000, 0)}}, nil, nil, map[string]task.WaitKind{"w": task.WaitCardUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.view
			v.Cards, v.Now = slices.Clone(v.Cards), t0
			if v.ReserveAfter == 0 {
				v.ReserveAfter = time.Hour // none starves unless the case says
			}
			p := decide(v)
			if got := starts(v, p); !slices.Equal(got, tt.want) {
				t.Errorf("starts = %v, want %v", got, tt.want)
			}
			if !maps.Equal(p.Reserved, tt.reserved) && (len(p.Reserved) > 0 || len(tt.reserved) > 0) {
				t.Errorf("reserved = %v, want %v", p.Reserved, tt.reserved)
			}
			for id, why := range tt.passed {
				i := slices.IndexFunc(p.Passed, func(ps Pass) bool { return ps.TaskID == id })
				if i < 0 || p.Passed[i].Why != why {
					t.Errorf("passed = %+v, want %s passed over for %s", p.Passed, id, why)
				}
			}
		})
	}
}

// However many tasks on several cards start in one decision, no card is
// promised more than it has, and each task gets distinct cards.
func TestDecideSeveralCardsNeverOvercommits(t *testing.T) {
	cards := make([]gpu.CardView, 8)
	for i := range cards {
		cards[i] = card(i, 80000, int64(10000*(i+1)))
	}
	var q sliceQueue
	for i := range 40 {
		q = append(q, wide("w"+itoa(i%10)+itoa(i/10), 1+i%8, int64(3000+i*700), 0))
	}
	v := View{Free: 100, GPUKnown: true, Cards: slices.Clone(cards), Ready: q}
	p := decide(v)
	charged := make([]int64, len(cards))
	for _, a := range p.Starts {
		need := q[slices.IndexFunc(q, func(c Candidate) bool { return c.ID == a.TaskID })].Need
		set := p.Sets[a.TaskID]
		if set == nil {
			set = []int{a.Card}
		}
		if len(set) != need.Cards() || len(slices.Compact(slices.Sorted(slices.Values(set)))) != len(set) {
			t.Fatalf("%s started on %v, needs %d distinct cards", a.TaskID, set, need.Cards())
		}
		for _, i := range set {
			charged[i] += need.MiB
		}
	}
	for i, c := range cards {
		if charged[i] > c.AvailableMiB {
			t.Errorf("card %d: %d MiB promised, %d available", i, charged[i], c.AvailableMiB)
		}
	}
	if len(p.Starts) == 0 {
		t.Error("nothing started")
	}
}

// BenchmarkDecide10kWaitingSeveral: one decision with 10,000 waiting tasks
// on 2, 4 or 8 cards, none of which fits (8 cards with 4-11 GiB left, the
// tasks want 20 GiB on each): each is looked at (how many cards hold it)
// and passed over; the first, starving, reserves its cards.
func BenchmarkDecide10kWaitingSeveral(b *testing.B) {
	var q sliceQueue
	for i := range 10_000 {
		c := wide(fmt.Sprintf("w%05d", i), 2<<(i%3), 20<<10, time.Duration(10_000-i)*time.Second)
		c.Seq = int64(i)
		q = append(q, c)
	}
	cards := make([]gpu.CardView, simCards)
	for i := range cards {
		left := int64(4+i) << 10
		cards[i] = holding(card(i, simCapMiB, left), "busy", simCapMiB-left)
	}
	settled := decide(View{Free: 64, Ready: q, Now: t0, GPUKnown: true, Cards: slices.Clone(cards), ReserveAfter: DefaultReserveAfter})
	for _, p := range settled.Passed {
		i := slices.IndexFunc(q, func(c Candidate) bool { return c.ID == p.TaskID })
		q[i].Waiting = p.Why
	}
	b.ReportAllocs()
	for b.Loop() {
		decide(View{Free: 64, Ready: q, Now: t0, GPUKnown: true, Cards: slices.Clone(cards), ReserveAfter: DefaultReserveAfter})
	}
}
