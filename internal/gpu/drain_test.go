package gpu

import (
	"slices"
	"testing"
	"time"
)

var drainNow = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// ran is a holding of mib by task that started d before drainNow (0: start
// not known).
func ran(task string, mib int64, d time.Duration) Holding {
	h := Holding{Task: task, RequestMiB: mib}
	if d > 0 {
		h.Since = drainNow.Add(-d)
	}
	return h
}

// busyCard is card i with capacity 80000, nothing foreign, and holders.
func busyCard(i int, holders ...Holding) CardView {
	c := CardView{Index: i, TotalMiB: 80512, CapacityMiB: 80000, AvailableMiB: 80000, Holders: holders}
	for _, h := range holders {
		c.ChargedMiB += h.ChargedMiB()
		c.AvailableMiB -= h.ChargedMiB()
	}
	return c
}

func TestDrain(t *testing.T) {
	mixed := busyCard(0, ran("old", 20000, 3*time.Hour), ran("mid", 20000, 10*time.Minute), ran("new", 20000, 5*time.Minute))
	tests := []struct {
		name string
		card CardView
		need Need
		want time.Duration
	}{
		{"room now", mixed, Need{MiB: 20000}, 0},
		{"the youngest free enough", mixed, Need{MiB: 40000}, 5 * time.Minute},
		{"two of three must leave", mixed, Need{MiB: 50000}, 10 * time.Minute},
		{"all must leave", mixed, Need{MiB: 70000}, 3 * time.Hour},
		{"exclusive: every task leaves, however much is free", mixed, Need{MiB: 1000, Exclusive: true}, 3 * time.Hour},
		{"exclusive on an idle card", busyCard(1), Need{Exclusive: true}, 0},
		{"start not known: counted as just started", busyCard(2, ran("a", 30000, 0), ran("b", 30000, 0)), Need{MiB: 60000}, 0},
		{"ties taken in order", busyCard(3, ran("a", 10000, time.Hour), ran("b", 40000, time.Hour), ran("c", 10000, 2*time.Hour)),
			Need{MiB: 65000}, time.Hour},
		{"foreign memory: all ours leave, still short", func() CardView {
			c := busyCard(4, ran("a", 30000, 20*time.Minute))
			c.ForeignMiB, c.AvailableMiB = 40000, 10000
			return c
		}(), Need{MiB: 50000}, 20 * time.Minute},
		{"a start after now counts as 0", busyCard(5, ran("a", 70000, -time.Minute)), Need{MiB: 50000}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Drain(&tt.card, tt.need, drainNow); got != tt.want {
				t.Errorf("Drain = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReserveDrainsSoonest(t *testing.T) {
	need := Need{MiB: 60000}
	// Card 0 has the most memory left, but one task there has run for 4
	// hours and must leave; card 1's two must leave too, but have run
	// minutes; card 2's have run longest of all.
	cards := []CardView{
		busyCard(0, ran("long", 40000, 4*time.Hour)),
		busyCard(1, ran("a", 25000, 5*time.Minute), ran("b", 25000, 8*time.Minute)),
		busyCard(2, ran("c", 70000, 6*time.Hour)),
	}
	if got := Reserve(cards, need, drainNow); got != 1 {
		t.Errorf("Reserve = %d, want 1 (its tasks have run minutes)", got)
	}
	// With no start known, the card closest to holding it, as before.
	blind := slices.Clone(cards)
	for i := range blind {
		blind[i].Holders = slices.Clone(blind[i].Holders)
		for j := range blind[i].Holders {
			blind[i].Holders[j].Since = time.Time{}
		}
	}
	if got := Reserve(blind, need, drainNow); got != 0 {
		t.Errorf("Reserve without starts = %d, want 0 (most memory left)", got)
	}
	// Equal drains: the most memory left. A card reserved for another task,
	// or quarantined, is never chosen.
	cards[1].ReservedFor = "other"
	if got := Reserve(cards, need, drainNow); got != 0 {
		t.Errorf("Reserve with card 1 reserved = %d, want 0", got)
	}
	cards[0].State = CardQuarantined
	if got := Reserve(cards, need, drainNow); got != 2 {
		t.Errorf("Reserve with card 0 quarantined = %d, want 2", got)
	}
}

func TestReserveSetDrainsSoonest(t *testing.T) {
	need := Need{MiB: 60000, Count: 2}
	cards := []CardView{
		busyCard(0, ran("long", 40000, 4*time.Hour)), // most memory left, slowest
		busyCard(1, ran("a", 30000, 20*time.Minute)),
		busyCard(2, ran("b", 50000, 3*time.Minute)),
		busyCard(3, ran("c", 50000, 2*time.Hour)),
	}
	if got := indices(cards, ReserveSet(cards, need, nil, "big", drainNow, nil)); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("ReserveSet = %v, want [2 1]: the cards whose tasks have run least", got)
	}
	// The topology still comes first: 0 and 3 share a bridge, the others
	// are apart.
	topo := NewTopology(4)
	for a := range 4 {
		for b := a + 1; b < 4; b++ {
			topo.Set(a, b, LinkSys)
		}
	}
	topo.Set(0, 3, LinkPIX)
	if got := indices(cards, ReserveSet(cards, need, topo, "big", drainNow, nil)); !slices.Equal(got, []int{3, 0}) {
		t.Errorf("ReserveSet with topology = %v, want [3 0]", got)
	}
}

// The start an attempt is held from reaches the views, and through a
// reading of the cards (which rebuilds what each task uses), so that
// Reserve can read it.
func TestBoardHoldSince(t *testing.T) {
	b := NewBoard(settings())
	b.Apply(twoCards(), t0)
	started := t0.Add(-time.Hour)
	b.HoldSince("old", 1, Need{MiB: 1000}, started)
	b.Hold("unknown", 1, Need{MiB: 1000})
	b.Apply(twoCards(), t0.Add(time.Second))
	since := map[string]time.Time{}
	for _, h := range b.Views(t0.Add(time.Second))[1].Holders {
		since[h.Task] = h.Since
	}
	if !since["old"].Equal(started) || !since["unknown"].IsZero() {
		t.Errorf("since = %v, want old's start and unknown's zero", since)
	}
}
