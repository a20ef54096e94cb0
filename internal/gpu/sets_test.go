package gpu

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// view is an idle card at index i with capacity 80000 MiB and avail left
// (the rest foreign).
func view(i int, avail int64) CardView {
	return CardView{Index: i, UUID: fmt.Sprint("GPU-", i), TotalMiB: 80512, CapacityMiB: 80000, AvailableMiB: avail, ForeignMiB: 80000 - avail}
}

func views(avail ...int64) []CardView {
	out := make([]CardView, len(avail))
	for i, a := range avail {
		out[i] = view(i, a)
	}
	return out
}

// indices maps positions to card indices.
func indices(cards []CardView, pos []int) []int {
	if pos == nil {
		return nil
	}
	out := make([]int, len(pos))
	for i, p := range pos {
		out[i] = cards[p].Index
	}
	return out
}

// topoOf builds a topology from rows of link names, "X" on the diagonal.
func topoOf(t *testing.T, rows ...string) *Topology {
	t.Helper()
	topo := NewTopology(len(rows))
	for a, row := range rows {
		cells := strings.Fields(row)
		if len(cells) != len(rows) {
			t.Fatalf("row %d has %d cells, want %d", a, len(cells), len(rows))
		}
		for b, cell := range cells {
			l, err := ParseLink(cell)
			if err != nil {
				t.Fatal(err)
			}
			if a != b {
				topo.Set(a, b, l)
			}
		}
	}
	return topo
}

// dgx1 is a DGX-1-like hybrid cube mesh (constructed, not captured): two
// quads of four cards, each quad fully NVLinked (NV1 or NV2), card i
// linked to card i+4 across, every other pair crossing the sockets.
func dgx1(t *testing.T) *Topology {
	return topoOf(t,
		"X   NV1 NV1 NV2 NV2 SYS SYS SYS",
		"NV1 X   NV2 NV1 SYS NV2 SYS SYS",
		"NV1 NV2 X   NV2 SYS SYS NV1 SYS",
		"NV2 NV1 NV2 X   SYS SYS SYS NV1",
		"NV2 SYS SYS SYS X   NV1 NV1 NV2",
		"SYS NV2 SYS SYS NV1 X   NV2 NV1",
		"SYS SYS NV1 SYS NV1 NV2 X   NV2",
		"SYS SYS SYS NV1 NV2 NV1 NV2 X  ")
}

// pcieTree is a constructed PCIe machine of 4n cards: two NUMA nodes, each
// with two PCIe switches of n cards.
func pcieTree(n int) *Topology {
	topo := NewTopology(4 * n)
	for a := range 4 * n {
		for b := range 4 * n {
			switch {
			case a == b:
			case a/n == b/n:
				topo.Set(a, b, LinkPIX)
			case a/(2*n) == b/(2*n):
				topo.Set(a, b, LinkNode)
			default:
				topo.Set(a, b, LinkSys)
			}
		}
	}
	return topo
}

func TestFitSet(t *testing.T) {
	full := int64(80000)
	tests := []struct {
		name  string
		cards []CardView
		need  Need
		p     Placement
		topo  func(t *testing.T) *Topology
		want  []int // card indices, in order; nil: no fit
	}{
		{"all or nothing: one card short", views(30000, 10000, 30000), Need{MiB: 20000, Count: 3}, Spread, nil, nil},
		{"two of three, spread: most room first", views(30000, 50000, 40000), Need{MiB: 20000, Count: 2}, Spread, nil, []int{1, 2}},
		{"pack: least room that holds it first", views(30000, 50000, 40000, 10000), Need{MiB: 20000, Count: 2}, Pack, nil, []int{0, 2}},
		{"a card that failed it goes last", views(50000, 40000, 30000), Need{MiB: 20000, Count: 2, Avoid: []int{0}}, Spread, nil, []int{1, 2}},
		{"every card then", views(50000, 40000), Need{MiB: 20000, Count: 2, Avoid: []int{0}}, Spread, nil, []int{1, 0}},
		{"exclusive: each card to itself", func() []CardView {
			c := views(full, full, full, full)
			c[1].Holders = []Holding{{Task: "x", RequestMiB: 1}}
			c[2].ForeignProcs = 1
			return c
		}(), Need{Count: 2, Exclusive: true}, Spread, nil, []int{0, 3}},
		{"exclusive: three free cards are not four", func() []CardView {
			c := views(full, full, full, full)
			c[1].Holders = []Holding{{Task: "x", RequestMiB: 1}}
			return c
		}(), Need{Count: 4, Exclusive: true}, Spread, nil, nil},
		{"a card held exclusively takes nothing", func() []CardView {
			c := views(full, full, full)
			c[0].Exclusive = true
			return c
		}(), Need{MiB: 10, Count: 2}, Spread, nil, []int{1, 2}},
		{"closest pair wins over most room", views(70000, 60000, 60000, 70000, 70000, 70000, 70000, 70000), Need{MiB: 50000, Count: 2}, Spread,
			func(t *testing.T) *Topology { return pcieTree(2) }, []int{0, 1}},
		{"the closest pair is the one with room", views(70000, 10000, 70000, 70000, 10000, 70000, 70000, 70000), Need{MiB: 50000, Count: 2}, Spread,
			func(t *testing.T) *Topology { return pcieTree(2) }, []int{2, 3}},
		{"four in one quad of the cube mesh", views(80000, 80000, 80000, 80000, 80000, 80000, 80000, 80000), Need{MiB: 1, Count: 4}, Spread,
			dgx1, []int{0, 1, 2, 3}},
		{"a busy card breaks the quad: the other quad", views(80000, 80000, 100, 80000, 70000, 70000, 70000, 70000), Need{MiB: 50000, Count: 4}, Spread,
			dgx1, []int{4, 5, 6, 7}},
		{"two: linked by NV2 beats NV1", views(80000, 80000, 80000, 80000, 80000, 80000, 80000, 80000), Need{MiB: 1, Count: 2}, Spread,
			dgx1, []int{0, 3}},
		{"no topology: the best cards", views(1000, 70000, 60000, 70000), Need{MiB: 50000, Count: 2}, Spread, nil, []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var topo *Topology
			if tt.topo != nil {
				topo = tt.topo(t)
			}
			got := indices(tt.cards, FitSet(tt.cards, tt.need, tt.p, topo, "t", nil))
			if !slices.Equal(got, tt.want) {
				t.Errorf("FitSet = %v, want %v", got, tt.want)
			}
			if fits := CountFits(tt.cards, tt.need, "t") == tt.need.Cards(); fits != (tt.want != nil) {
				t.Errorf("CountFits says fits=%v, FitSet found %v", fits, tt.want)
			}
		})
	}
}

// A reservation holds memory, not the card: a task behind may start on a
// reserved card when it leaves the reserved task its room; an exclusive
// one never does, and nothing starts on a card reserved whole.
func TestReservedCardKeepsTakingWhatLeavesItsRoom(t *testing.T) {
	reserved := func(room int64) []CardView {
		c := views(50000)
		c[0].ReservedFor, c[0].ReservedMiB = "big", room
		return c
	}
	for _, tt := range []struct {
		name  string
		cards []CardView
		need  Need
		task  string
		fits  bool
	}{
		{"leaves the room", reserved(30000), Need{MiB: 20000}, "small", true},
		{"eats into it", reserved(30000), Need{MiB: 20001}, "small", false},
		{"exclusive never", reserved(30000), Need{Exclusive: true}, "small", false},
		{"card reserved whole", reserved(0), Need{MiB: 1}, "small", false},
		{"the task it is reserved for", reserved(30000), Need{MiB: 30000}, "big", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fit(tt.cards, tt.need, Spread, tt.task) >= 0; got != tt.fits {
				t.Errorf("Fit: fits = %v, want %v", got, tt.fits)
			}
		})
	}
}

func TestReserveSet(t *testing.T) {
	cards := views(70000, 10000, 30000, 20000, 80000, 5000, 40000, 60000)
	for i := range cards { // the memory not available is our tasks', not foreign
		c := &cards[i]
		c.ChargedMiB, c.ForeignMiB = c.ForeignMiB, 0
	}
	cards[4].State = CardQuarantined
	cards[7].ReservedFor = "other"
	need := Need{MiB: 60000, Count: 2}
	// PCIe tree: pairs {0,1} {2,3} {4,5} {6,7}. Reservable: 0, 1, 2, 3, 5,
	// 6 (4 is quarantined, 7 reserved for another); the closest pairs are
	// {0,1} and {2,3}, and {0,1} has more memory.
	if got := indices(cards, ReserveSet(cards, need, pcieTree(2), "big", time.Time{}, nil)); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("ReserveSet = %v, want [0 1]", got)
	}
	// Without a topology: the most memory available.
	if got := indices(cards, ReserveSet(cards, need, nil, "big", time.Time{}, nil)); !slices.Equal(got, []int{0, 6}) {
		t.Errorf("ReserveSet without topology = %v, want [0 6]", got)
	}
	// A card too small to ever hold it is no candidate; too few left.
	small := views(70000, 70000, 70000)
	small[1].CapacityMiB = 50000
	small[2].ForeignMiB = 30000
	if got := ReserveSet(small, Need{MiB: 60000, Count: 2}, nil, "big", time.Time{}, nil); got != nil {
		t.Errorf("ReserveSet = %v, want nil: only one card can ever hold 60000", got)
	}
}

// bruteForce is the closest set by comparing every set, however many.
func bruteForce(cards []CardView, cand []int, k int, topo *Topology) setCost {
	s := setSearch{cards: cards, cand: cand, topo: topo, k: k}
	return s.cost(s.exhaustive())
}

// On machines of 16 cards, where most sizes of set are built greedily,
// the set FitSet picks is as close as the closest of all (found by
// comparing every set) on machine-like topologies: a PCIe tree, and two
// cube meshes side by side; for every size of set, with random memory.
func TestGreedySetMatchesExhaustiveOnMachineTopologies(t *testing.T) {
	mesh := dgx1(t)
	twoMeshes := NewTopology(16)
	for a := range 16 {
		for b := range 16 {
			if a != b && a/8 == b/8 {
				twoMeshes.Set(a, b, mesh.Link(a%8, b%8))
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for name, topo := range map[string]*Topology{"pcie tree": pcieTree(4), "two cube meshes": twoMeshes} {
		for k := 2; k <= 14; k++ {
			for trial := range 20 {
				cards := make([]CardView, 16)
				for i := range cards {
					cards[i] = view(i, 20000+r.Int64N(60000))
				}
				need := Need{MiB: 20000, Count: uint8(k)}
				cand := make([]int, 16)
				for i := range cand {
					cand[i] = i
				}
				got := FitSet(cards, need, Spread, topo, "t", nil)
				if len(got) != k {
					t.Fatalf("%s, k=%d: FitSet = %v", name, k, got)
				}
				var mask uint64
				ranked := slices.Clone(cand)
				slices.SortStableFunc(ranked, func(a, b int) int { return int(cards[b].AvailableMiB - cards[a].AvailableMiB) })
				s := setSearch{cards: cards, cand: ranked, topo: topo, k: k}
				for _, p := range got {
					mask |= 1 << slices.Index(ranked, p)
				}
				if gc, bc := s.cost(mask), bruteForce(cards, ranked, k, topo); gc != bc {
					t.Errorf("%s, k=%d, trial %d: set %v costs %+v, the closest %+v", name, k, trial, got, gc, bc)
				}
				if bits.OnesCount64(mask) != k {
					t.Errorf("%s, k=%d: %d distinct cards", name, k, bits.OnesCount64(mask))
				}
			}
		}
	}
}

func TestBinomialAtMost(t *testing.T) {
	for _, tt := range []struct {
		n, k, limit int
		want        bool
	}{
		{8, 4, 70, true}, {8, 4, 69, false}, {16, 3, 560, true}, {16, 4, 1000, false}, {64, 63, 64, true}, {64, 32, 1 << 20, false},
	} {
		if got := binomialAtMost(tt.n, tt.k, tt.limit); got != tt.want {
			t.Errorf("C(%d,%d) <= %d: %v, want %v", tt.n, tt.k, tt.limit, got, tt.want)
		}
	}
}

func TestNeverFitsSet(t *testing.T) {
	cards := views(80000, 80000, 80000)
	cards[2].ForeignMiB = 60000
	for _, tt := range []struct {
		name string
		need Need
		want string // a part of the message; "" for none
	}{
		{"fits on two", Need{MiB: 30000, Count: 2}, ""},
		{"only two cards could", Need{MiB: 30000, Count: 3}, "only 2 of the 3 cards"},
		{"more cards than the machine", Need{MiB: 1, Count: 4}, "needs 4 cards, and the machine has 3"},
	} {
		got := NeverFits(cards, tt.need, false)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: NeverFits = %q, want %q", tt.name, got, tt.want)
		}
	}
	unknown := append(views(80000), CardView{Index: 1, State: CardUnknown})
	if got := NeverFits(unknown, Need{MiB: 1, Count: 2}, false); got != "" {
		t.Errorf("with a card unknown: %q, want nothing (it may be the one)", got)
	}
}

func TestExplainSet(t *testing.T) {
	cards := views(50000, 10000, 60000)
	cards[1].Holders = []Holding{{Task: "a", RequestMiB: 30000}}
	got := Explain(cards, Need{MiB: 20000, Count: 3}, "t", "")
	for _, want := range []string{"needs 3 cards with 20000 MiB each", "2 have room now (cards 0, 2)", "card 1 has 10000 MiB left", "a holds 30000"} {
		if !strings.Contains(got, want) {
			t.Errorf("Explain = %q, want it to say %q", got, want)
		}
	}
}

// BenchmarkFitSet: choosing the cards of a task on several, on empty
// cards (every set holds it, so the choice is all topology): 4 of 8 on
// the cube mesh (every set compared, 70), 8 of 16 on a PCIe tree
// (greedy, then swaps), and 2 of 8 without a topology (the best cards).
func BenchmarkFitSet(b *testing.B) {
	mesh := func() *Topology {
		t := NewTopology(8)
		quads := [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}
		for _, q := range quads {
			for _, a := range q {
				for _, c := range q {
					if a != c {
						t.Set(a, c, NVLink(1+(a+c)%2))
					}
				}
			}
		}
		for a := range 4 {
			t.Set(a, a+4, NVLink(2))
		}
		return t
	}()
	for _, bc := range []struct {
		name  string
		cards int
		count uint8
		topo  *Topology
	}{
		{"4of8-mesh", 8, 4, mesh},
		{"8of16-pcie-tree", 16, 8, pcieTree(4)},
		{"2of8-no-topology", 8, 2, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cards := make([]CardView, bc.cards)
			for i := range cards {
				cards[i] = view(i, 80000-int64(i)*1000)
			}
			need := Need{MiB: 10000, Count: bc.count}
			out := make([]int, 0, bc.count)
			b.ReportAllocs()
			for b.Loop() {
				out = FitSet(cards, need, Spread, bc.topo, "t", out)
			}
			if len(out) != int(bc.count) {
				b.Fatalf("FitSet = %v", out)
			}
		})
	}
}
