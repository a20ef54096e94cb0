package engine

import (
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
)

// When a starving task on several cards reserves them. A reservation
// holds the task's memory on every card of the set until the last of them
// drains, and with run times unknown that drain is as long as the longest
// task that must leave: on a busy machine an 8-card reservation left
// most of the machine idle for an hour at a time, and reserving at once
// for every starving task on several cards cost a fifth of the makespan
// (docs/benchmarks.md, "GPU admission: tasks on several cards"). So such a
// task reserves at once only when the cards are nearly ready for it, and
// otherwise keeps being passed over (it starts whenever its cards happen
// to have the room) until it has waited in proportion to its width.
const (
	// wideReservePerCard is how long a task on N cards that starves waits
	// for its cards to come nearly free before it reserves them anyway: N
	// times this (and at least View.ReserveAfter).
	wideReservePerCard = 4 * time.Hour
	// wideNearlyFree: the cards are nearly ready when what they lack of
	// the task's memory, all together, is at most 1/wideNearlyFree of it.
	wideNearlyFree = 10
)

// reservesNow reports whether candidate c, on several cards and starving
// (it has waited View.ReserveAfter), reserves set now: it held these cards
// in the last decision (a reservation, once made, stays while the cards
// can be reserved), or they lack at most a tenth of its memory, or it has
// waited its width times wideReservePerCard.
func (d *decision) reservesNow(c *Candidate, set []int) bool {
	kept, lack := true, int64(0)
	for _, i := range set {
		card := &d.cards[i]
		kept = kept && d.held[card.Index] == c.ID
		lack += lacking(card, c.Need)
	}
	k := len(set)
	return kept || lack*wideNearlyFree <= c.Need.MiB*int64(k) ||
		d.now.Sub(c.ReadySince) >= max(d.reserveAfter, time.Duration(k)*wideReservePerCard)
}

// lacking is how much of need card c lacks now: the memory short of its
// request, or, for an exclusive need, all that our tasks hold there (they
// must all leave).
func lacking(c *gpu.CardView, need gpu.Need) int64 {
	if need.Exclusive {
		return max(c.ChargedMiB, 0)
	}
	return max(need.MiB-c.AvailableMiB, 0)
}
