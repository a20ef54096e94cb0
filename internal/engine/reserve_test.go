package engine

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
)

// ranFor is c with a task of ours holding mib that started d before t0.
func ranFor(c gpu.CardView, task string, mib int64, d time.Duration) gpu.CardView {
	c = holding(c, task, mib)
	c.Holders[len(c.Holders)-1].Since = t0.Add(-d)
	return c
}

// A starving task reserves the card whose tasks that must leave have run
// least (run times are long-tailed), not the one with the most memory
// left; with no start known, the one with the most memory left.
func TestDecideReservesTheCardDrainingSoonest(t *testing.T) {
	cards := []gpu.CardView{
		ranFor(card(0, 80000, 40000), "old", 40000, 5*time.Hour),
		ranFor(ranFor(card(1, 80000, 30000), "a", 25000, 10*time.Minute), "b", 25000, 2*time.Minute),
	}
	big := gpuTask("big", 60000, 2*time.Minute)
	v := View{Free: 4, GPUKnown: true, Now: t0, ReserveAfter: time.Minute, Cards: slices.Clone(cards), Ready: sliceQueue{big}}
	if p := decide(v); !maps.Equal(p.Reserved, map[int]string{1: "big"}) {
		t.Errorf("reserved = %v, want card 1 (its tasks have run minutes, card 0's for hours)", p.Reserved)
	}
	for i := range cards {
		cards[i].Holders = slices.Clone(cards[i].Holders)
		for j := range cards[i].Holders {
			cards[i].Holders[j].Since = time.Time{}
		}
	}
	v.Cards = cards
	if p := decide(v); !maps.Equal(p.Reserved, map[int]string{0: "big"}) {
		t.Errorf("reserved without starts = %v, want card 0 (most memory left)", p.Reserved)
	}
}

// A starving task on several cards reserves them at once when they lack at
// most a tenth of its memory, after its width times wideReservePerCard
// otherwise, and keeps a reservation it made; tasks behind it take the
// cards in the meantime.
func TestDecideWideReservesWhenNearlyFreeOrLate(t *testing.T) {
	// Four cards, each with avail left by a task of ours.
	four := func(avail ...int64) []gpu.CardView {
		out := make([]gpu.CardView, len(avail))
		for i, a := range avail {
			out[i] = holding(card(i, 80000, a), "busy", 80000-a)
		}
		return out
	}
	const per = wideReservePerCard
	tests := []struct {
		name     string
		cards    []gpu.CardView
		waited   time.Duration
		held     map[int]string
		want     []string
		reserved map[int]string
	}{
		{"far from free, not waited long enough: the small task takes a card", four(30000, 30000, 30000, 30000),
			4*per - time.Second, nil, []string{"s@0"}, nil},
		{"far from free, waited 4 x per card: all four reserved", four(30000, 30000, 30000, 30000),
			4 * per, nil, nil, map[int]string{0: "w", 1: "w", 2: "w", 3: "w"}},
		{"lacking exactly a tenth: reserved at once, and the small task would not leave the room", four(40000, 40000, 39200, 39200),
			2 * time.Minute, nil, nil, map[int]string{0: "w", 1: "w", 2: "w", 3: "w"}},
		{"lacking more than a tenth: not yet", four(40000, 40000, 39200, 39199),
			2 * time.Minute, nil, []string{"s@0"}, nil},
		{"held last time: kept though far from free", four(30000, 30000, 30000, 30000),
			2 * time.Minute, map[int]string{0: "w", 1: "w", 2: "w", 3: "w"}, nil, map[int]string{0: "w", 1: "w", 2: "w", 3: "w"}},
		{"not starving: never", four(40000, 40000, 40000, 39000), 30 * time.Second, nil, []string{"s@0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// w needs 44000 on each of 4 cards (a tenth: 17600 in all); s
			// needs 4000, which leaves w's room only on a card with 48000.
			w := wide("w", 4, 44000, tt.waited)
			v := View{Free: 4, GPUKnown: true, Now: t0, ReserveAfter: time.Minute, Cards: slices.Clone(tt.cards), Reserved: tt.held,
				Ready: sliceQueue{w, gpuTask("s", 4000, 0)}}
			p := decide(v)
			if got := starts(v, p); !slices.Equal(got, tt.want) {
				t.Errorf("starts = %v, want %v", got, tt.want)
			}
			if !maps.Equal(p.Reserved, tt.reserved) && (len(p.Reserved) > 0 || len(tt.reserved) > 0) {
				t.Errorf("reserved = %v, want %v", p.Reserved, tt.reserved)
			}
		})
	}
}

func TestLacking(t *testing.T) {
	c := holding(card(0, 80000, 30000), "busy", 50000)
	for _, tt := range []struct {
		need gpu.Need
		want int64
	}{
		{gpu.Need{MiB: 20000}, 0},
		{gpu.Need{MiB: 45000}, 15000},
		{gpu.Need{MiB: 1000, Exclusive: true}, 50000}, // all of ours must leave
	} {
		if got := lacking(&c, tt.need); got != tt.want {
			t.Errorf("lacking(%+v) = %d, want %d", tt.need, got, tt.want)
		}
	}
}
