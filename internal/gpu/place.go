package gpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// holds reports whether card c can take need for task now: it takes work,
// is not held exclusively, is not reserved for another task unless need
// leaves the reservation its room (Leaves), and has room (for an exclusive
// need: no task of ours, no foreign process, and the request within what
// foreign memory leaves).
func holds(c *CardView, need Need, task string) bool {
	if !c.Takes() || c.Exclusive || (c.ReservedFor != "" && c.ReservedFor != task && !Leaves(c, need)) {
		return false
	}
	if need.Exclusive {
		return len(c.Holders) == 0 && c.ForeignProcs == 0 && need.MiB <= c.CapacityMiB-c.ForeignMiB
	}
	return need.MiB <= c.AvailableMiB
}

// Holds reports whether card c can take need for task now (see Fit).
func Holds(c *CardView, need Need, task string) bool { return holds(c, need, task) }

// Leaves reports whether need, started on card c, would leave the task c
// is reserved for the memory it holds there (CardView.ReservedMiB): an
// exclusive need never does, nor does anything on a card reserved whole.
// A reserved task holds memory, not the card: the rest of the card keeps
// taking work.
func Leaves(c *CardView, need Need) bool {
	return !need.Exclusive && c.ReservedMiB > 0 && need.MiB+c.ReservedMiB <= c.AvailableMiB
}

// Reservation is what a reservation for need holds on each of its cards
// (CardView.ReservedMiB): its memory, or 0, the whole card, for an
// exclusive need.
func Reservation(need Need) int64 {
	if need.Exclusive {
		return 0
	}
	return need.MiB
}

// Room reports whether card c has room for need now, whatever its state
// and reservation: it is not held exclusively, and has the memory (for an
// exclusive need: no task of ours, no foreign process, and the request
// within what foreign memory leaves). A card with room that does not take
// the task is one whose state or reservation keeps it off. (holds repeats
// these lines rather than call Room: in Fit's loop, the order of its
// checks as written there is measurably faster.)
func Room(c *CardView, need Need) bool {
	if c.Exclusive {
		return false
	}
	if need.Exclusive {
		return len(c.Holders) == 0 && c.ForeignProcs == 0 && need.MiB <= c.CapacityMiB-c.ForeignMiB
	}
	return need.MiB <= c.AvailableMiB
}

// Fits reports whether need could ever fit card c: on the card emptied of
// our tasks, with today's foreign memory.
func Fits(c *CardView, need Need) bool {
	return c.State != CardHidden && need.MiB <= c.CapacityMiB-c.ForeignMiB
}

// Fit returns the position in cards of the card task should start on, or -1
// if none holds need now. Cards in need.Avoid are used only when no other
// fits. Among the rest, Spread picks the most memory left after the task,
// Pack the least; ties go to the lower index.
func Fit(cards []CardView, need Need, p Placement, task string) int {
	best, bestAvoided := -1, true
	for i := range cards {
		c := &cards[i]
		if !holds(c, need, task) {
			continue
		}
		avoided := slices.Contains(need.Avoid, c.Index)
		switch {
		case best < 0, bestAvoided && !avoided:
		case avoided && !bestAvoided:
			continue
		case p == Spread && c.AvailableMiB > cards[best].AvailableMiB,
			p == Pack && c.AvailableMiB < cards[best].AvailableMiB:
		default:
			continue
		}
		best, bestAvoided = i, avoided
	}
	return best
}

// Charge books need for task on card c, as the Board will once the task
// starts, so that one decision never promises the same memory twice.
func Charge(c *CardView, need Need, task string) {
	charge := need.MiB
	if need.Exclusive {
		charge = max(need.MiB, c.AvailableMiB) // the whole card
		c.Exclusive = true
	}
	c.Holders = append(c.Holders, Holding{Task: task, RequestMiB: charge, Exclusive: need.Exclusive})
	c.ChargedMiB += charge
	c.AvailableMiB -= charge
}

// Reserve picks the card a starving task should have to itself until it
// fits: among cards that could hold it once our tasks there finish, and are
// neither reserved, quarantined, unknown nor hidden (a cooling card is fine:
// it comes back in seconds), the one expected to have its room soonest
// (the least Drain), then the closest to holding it now (most memory
// left), then the lower index. An exclusive need also rules out cards with
// foreign processes, which it could never use. It returns -1 if none.
func Reserve(cards []CardView, need Need, now time.Time) int {
	best, bestDrain := -1, time.Duration(0)
	for i := range cards {
		c := &cards[i]
		if c.ReservedFor != "" || (c.State != CardOK && c.State != CardCooling) || !Fits(c, need) ||
			(need.Exclusive && c.ForeignProcs > 0) {
			continue
		}
		d := Drain(c, need, now)
		if best < 0 || d < bestDrain || d == bestDrain && c.AvailableMiB > cards[best].AvailableMiB {
			best, bestDrain = i, d
		}
	}
	return best
}

// Drain says how soon card c may have room for need, from how long the
// tasks that must leave first have run: run times are long-tailed, so a
// task that has already run long is the likeliest to run on. Counting the
// room as freed by the youngest tasks first, it returns the run time at now
// of the oldest task that must leave: 0 when the card has the room now
// (or only tasks started at now must leave), more the longer the card is
// likely to take. Every task must leave for an exclusive need. A task whose
// start is not known (Holding.Since zero) counts as just started; with no
// start known at all, every card drains as soon as another, and Reserve
// falls back on the memory left.
func Drain(c *CardView, need Need, now time.Time) time.Duration {
	freed := c.AvailableMiB
	if !need.Exclusive && need.MiB <= freed {
		return 0
	}
	// Take the holders youngest first (ties: the earlier listed), without
	// sorting a copy: a card holds a few tasks, and a decision asks this
	// of a few cards at most.
	last, lastAt := time.Duration(-1), -1
	for need.Exclusive || freed < need.MiB {
		next, nextAge := -1, time.Duration(0)
		for i := range c.Holders {
			a := ranFor(&c.Holders[i], now)
			if a < last || a == last && i <= lastAt {
				continue // taken already
			}
			if next < 0 || a < nextAge {
				next, nextAge = i, a
			}
		}
		if next < 0 {
			break // every task gone: the rest is foreign memory (Fits says whether it will do)
		}
		freed += c.Holders[next].ChargedMiB()
		last, lastAt = nextAge, next
	}
	return max(last, 0)
}

// ranFor is how long holding h has run at now: 0 when its start is not
// known or is after now.
func ranFor(h *Holding, now time.Time) time.Duration {
	if h.Since.IsZero() {
		return 0
	}
	return max(now.Sub(h.Since), 0)
}

// NeverFits says why need can never be met by these cards, or "" if it may
// be: it is larger than every visible card's capacity, or no card is
// visible. A card whose state is unknown may be the one, so with one, it
// says "". filtered tells whether visible_gpus is set, for the message.
func NeverFits(cards []CardView, need Need, filtered bool) string {
	if need.Cards() > 1 {
		return neverFitsSet(cards, need, filtered)
	}
	var largest *CardView
	for i := range cards {
		c := &cards[i]
		switch c.State {
		case CardHidden:
			continue
		case CardUnknown:
			return ""
		case CardOK, CardCooling, CardQuarantined:
			// Busy for now, not for good: its size counts.
		}
		if largest == nil || c.CapacityMiB > largest.CapacityMiB {
			largest = c
		}
	}
	switch {
	case largest == nil && filtered:
		return "no card matches visible_gpus"
	case largest == nil:
		return "the machine has no GPU"
	case need.MiB > largest.CapacityMiB:
		return fmt.Sprintf("needs %d MiB, more than any card can give: the largest, card %d (%s), has %d MiB less the %d MiB safety margin",
			need.MiB, largest.Index, largest.Name, largest.TotalMiB, largest.TotalMiB-largest.CapacityMiB)
	}
	return ""
}

// neverFitsSet is NeverFits for a need of several cards: fewer visible
// cards than it takes could ever hold its memory.
func neverFitsSet(cards []CardView, need Need, filtered bool) string {
	visible, fit := 0, 0
	for i := range cards {
		c := &cards[i]
		switch c.State {
		case CardHidden:
			continue
		case CardUnknown:
			return ""
		case CardOK, CardCooling, CardQuarantined:
		}
		visible++
		if Fits(c, need) {
			fit++
		}
	}
	k := need.Cards()
	switch {
	case visible == 0 && filtered:
		return "no card matches visible_gpus"
	case visible == 0:
		return "the machine has no GPU"
	case visible < k && filtered:
		return fmt.Sprintf("needs %d cards, and visible_gpus leaves %d", k, visible)
	case visible < k:
		return fmt.Sprintf("needs %d cards, and the machine has %d", k, visible)
	case fit < k:
		return fmt.Sprintf("needs %d cards with %d MiB each, and only %d of the %d cards can ever give that (their memory less the safety margin and what is not ours)",
			k, need.MiB, fit, visible)
	}
	return ""
}

// Explain says, for a person, why a task that needs need does not start
// now, from the cards as admission sees them. unknown, when not empty, is
// why the GPU state cannot be read.
func Explain(cards []CardView, need Need, task, unknown string) string {
	if unknown != "" {
		return "GPU state unknown: " + unknown
	}
	var visible []*CardView
	for i := range cards {
		if cards[i].State != CardHidden {
			visible = append(visible, &cards[i])
		}
	}
	if len(visible) == 0 {
		return "no GPU visible"
	}
	if need.Cards() > 1 {
		return explainSet(cards, visible, need, task)
	}
	want := fmt.Sprintf("needs %d MiB", need.MiB)
	if need.Exclusive {
		want = "needs a card to itself"
		if need.MiB > 0 {
			want += fmt.Sprintf(" with %d MiB", need.MiB)
		}
	}
	// The best card that takes work, by what stops the task there.
	var best *CardView
	for _, c := range visible {
		if c.Takes() && (best == nil || c.AvailableMiB > best.AvailableMiB) {
			best = c
		}
	}
	var parts []string
	if best != nil {
		parts = append(parts, describe(best, need, task))
	}
	for _, c := range visible {
		if c != best && !c.Takes() {
			parts = append(parts, fmt.Sprintf("card %d %s", c.Index, stateText(c)))
		}
	}
	return want + "; " + strings.Join(parts, "; ")
}

// explainSet is Explain for a need of several cards: how many have room
// now, which, and why the best of the others does not take it.
func explainSet(cards []CardView, visible []*CardView, need Need, task string) string {
	k := need.Cards()
	want := fmt.Sprintf("needs %d cards with %d MiB each", k, need.MiB)
	if need.Exclusive {
		want = fmt.Sprintf("needs %d cards to itself", k)
		if need.MiB > 0 {
			want += fmt.Sprintf(" with %d MiB each", need.MiB)
		}
	}
	var room []string
	var best *CardView // the card taking work, without room for it, with the most memory left
	for _, c := range visible {
		switch {
		case holds(c, need, task):
			room = append(room, strconv.Itoa(c.Index))
		case c.Takes() && (best == nil || c.AvailableMiB > best.AvailableMiB):
			best = c
		}
	}
	var parts []string
	switch len(room) {
	case 0:
		parts = append(parts, "no card has room now")
	case 1:
		parts = append(parts, "only card "+room[0]+" has room now")
	default:
		parts = append(parts, fmt.Sprintf("%d have room now (cards %s)", len(room), strings.Join(room, ", ")))
	}
	if best != nil {
		parts = append(parts, describe(best, need, task))
	}
	for _, c := range visible {
		if !c.Takes() {
			parts = append(parts, fmt.Sprintf("card %d %s", c.Index, stateText(c)))
		}
	}
	return want + "; " + strings.Join(parts, "; ")
}

// describe says why card c does not take the task now.
func describe(c *CardView, need Need, task string) string {
	switch {
	case c.ReservedFor != "" && c.ReservedFor != task:
		return fmt.Sprintf("card %d is reserved for %s, which has waited longest", c.Index, c.ReservedFor)
	case c.Exclusive:
		return fmt.Sprintf("card %d is held exclusively by %s", c.Index, holderNames(c))
	case need.Exclusive && len(c.Holders) > 0:
		return fmt.Sprintf("best card %d runs %s", c.Index, holderNames(c))
	case need.Exclusive && c.ForeignProcs > 0:
		return fmt.Sprintf("best card %d has %d process(es) that are not ours", c.Index, c.ForeignProcs)
	}
	s := fmt.Sprintf("best card %d has %d MiB left (foreign %d", c.Index, max(c.AvailableMiB, 0), c.ForeignMiB)
	for _, h := range c.Holders {
		s += fmt.Sprintf(", %s holds %d", h.Task, h.ChargedMiB())
	}
	s += ")"
	if need.MiB > c.CapacityMiB-c.ForeignMiB {
		s += fmt.Sprintf(", and even empty of our tasks it would have %d", c.CapacityMiB-c.ForeignMiB)
	}
	return s
}

func holderNames(c *CardView) string {
	names := make([]string, len(c.Holders))
	for i, h := range c.Holders {
		names[i] = h.Task
	}
	return strings.Join(names, ", ")
}

func stateText(c *CardView) string {
	s := c.State.String()
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	if !c.Until.IsZero() {
		s += " (until " + c.Until.Format(time.TimeOnly) + ")"
	}
	return s
}
