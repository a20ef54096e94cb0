package gpu

import (
	"cmp"
	"math/bits"
	"slices"
	"time"
)

// Choosing several cards for one task (Need.Count > 1): all of them at
// once or none, the closest set of those that hold it now, ties going to
// the cards the one-card rule would pick first.

// maxRanked bounds the cards a set is chosen among: the best this many by
// the one-card rule (a machine has far fewer).
const maxRanked = 64

// exhaustUpTo is the most sets of cards compared one by one: every set of
// 4 of 8 cards (70), of 2 or 3 of 16 (120, 560). Beyond it the set is
// built greedily from each card in turn and improved by swaps.
const exhaustUpTo = 600

// FitSet returns the positions in cards of the need.Cards() cards task
// should start on, best first (the order CUDA_VISIBLE_DEVICES gives them),
// appended to out[:0]; nil if fewer cards than that hold need now.
//
// Among the sets of cards that hold it, the closest by topo wins: the one
// whose farthest pair is closest, then whose links add up to the least.
// Ties go to the set with the cards Fit would pick first (the placement,
// used cards of need.Avoid last, lower index). With a nil topo every set
// is as close as another, so the set is the best cards by that rule. A set
// is chosen among the best maxRanked cards only, and compared with every
// other while there are at most exhaustUpTo sets; beyond that it is built
// greedily from each card, then improved by swapping cards in and out
// while that brings it closer.
func FitSet(cards []CardView, need Need, p Placement, topo *Topology, task string, out []int) []int {
	var cand []int
	for i := range cards {
		if holds(&cards[i], need, task) {
			cand = append(cand, i)
		}
	}
	return chooseSet(cards, cand, need, p, topo, nil, out)
}

// Tally counts the cards for a need of several: those that hold it for
// task now (Take), and of the others, those with room for it that are
// reserved for another task (Reserved) or cooling down or quarantined
// (Resting). It fits when Take reaches need.Cards().
type Tally struct{ Take, Reserved, Resting int }

// TallyCards counts cards for need (see Tally), in one pass.
func TallyCards(cards []CardView, need Need, task string) Tally {
	var t Tally
	for i := range cards {
		switch c := &cards[i]; {
		case holds(c, need, task):
			t.Take++
		case !Room(c, need):
		case c.Takes() && c.ReservedFor != "":
			t.Reserved++
		case c.State == CardCooling || c.State == CardQuarantined:
			t.Resting++
		}
	}
	return t
}

// CountFits returns how many cards hold need for task now, stopping at
// need.Cards(): need fits when it returns that many.
func CountFits(cards []CardView, need Need, task string) int {
	n, want := 0, need.Cards()
	for i := range cards {
		if holds(&cards[i], need, task) {
			if n++; n == want {
				break
			}
		}
	}
	return n
}

// Reservable reports whether card c may be reserved for need: it is not
// reserved for another task, takes work or is only cooling down (it comes
// back in seconds), could hold need once our tasks there finish, and, for
// an exclusive need, has no foreign process. Reserve and ReserveSet choose
// among such cards.
func Reservable(c *CardView, need Need, task string) bool {
	return (c.ReservedFor == "" || c.ReservedFor == task) && (c.State == CardOK || c.State == CardCooling) &&
		Fits(c, need) && !(need.Exclusive && c.ForeignProcs > 0)
}

// ReserveSet returns the positions in cards of the need.Cards() cards a
// starving task should have reserved until it fits, appended to out[:0];
// nil if fewer cards than that are Reservable. It picks as FitSet does,
// among the reservable cards, but ranks them by how soon each may have the
// room (the least Drain at now), then by the memory available (those
// closest to holding it now): of sets as close by topo, the one whose
// cards are likely to be free soonest.
func ReserveSet(cards []CardView, need Need, topo *Topology, task string, now time.Time, out []int) []int {
	var cand []int
	for i := range cards {
		if Reservable(&cards[i], need, task) {
			cand = append(cand, i)
		}
	}
	if len(cand) < need.Cards() {
		return nil
	}
	drain := make([]time.Duration, len(cards))
	for _, i := range cand {
		drain[i] = Drain(&cards[i], need, now)
	}
	return chooseSet(cards, cand, Need{Count: need.Count}, Spread, topo, drain, out)
}

// chooseSet picks need.Cards() of the positions cand (see FitSet). With
// drain (by position in cards), the least drain ranks first, before the
// one-card rule.
func chooseSet(cards []CardView, cand []int, need Need, p Placement, topo *Topology, drain []time.Duration, out []int) []int {
	k := need.Cards()
	if len(cand) < k {
		return nil
	}
	// Rank the candidates by the one-card rule: rank 0 is Fit's choice.
	slices.SortStableFunc(cand, func(a, b int) int {
		ca, cb := &cards[a], &cards[b]
		if av, bv := slices.Contains(need.Avoid, ca.Index), slices.Contains(need.Avoid, cb.Index); av != bv {
			if av {
				return 1
			}
			return -1
		}
		if drain != nil && drain[a] != drain[b] {
			return cmp.Compare(drain[a], drain[b])
		}
		switch {
		case ca.AvailableMiB == cb.AvailableMiB:
			return a - b
		case (p == Spread) == (ca.AvailableMiB > cb.AvailableMiB):
			return -1
		}
		return 1
	})
	cand = cand[:min(len(cand), maxRanked)]
	out = out[:0]
	if len(cand) == k || topo == nil {
		return append(out, cand[:k]...)
	}
	s := setSearch{cards: cards, cand: cand, topo: topo, k: k}
	var best uint64
	if binomialAtMost(len(cand), k, exhaustUpTo) {
		best = s.exhaustive()
	} else {
		best = s.greedy()
	}
	for best != 0 {
		r := bits.TrailingZeros64(best)
		out = append(out, cand[r])
		best &^= 1 << r
	}
	return out
}

// setSearch finds the closest set of k of the ranked candidates. Sets are
// bit masks over ranks: bit r is the candidate of rank r.
type setSearch struct {
	cards []CardView
	cand  []int
	topo  *Topology
	k     int
}

// setCost is how close a set's cards are: its farthest pair, then the sum
// of its pairs' links. Lower is closer.
type setCost struct {
	far Link
	sum int
}

func (s *setSearch) link(r1, r2 int) Link {
	return s.topo.Link(s.cards[s.cand[r1]].Index, s.cards[s.cand[r2]].Index)
}

func (s *setSearch) cost(set uint64) setCost {
	var c setCost
	for a := set; a != 0; a &= a - 1 {
		r1 := bits.TrailingZeros64(a)
		for b := a & (a - 1); b != 0; b &= b - 1 {
			l := s.link(r1, bits.TrailingZeros64(b))
			c.far, c.sum = max(c.far, l), c.sum+int(l)
		}
	}
	return c
}

// better reports whether set a (cost ca) is closer than set b (cost cb),
// or as close with better-ranked cards: of the ranks in one set and not
// the other, the best is a's.
func better(a uint64, ca setCost, b uint64, cb setCost) bool {
	switch {
	case b == 0:
		return true
	case ca.far != cb.far:
		return ca.far < cb.far
	case ca.sum != cb.sum:
		return ca.sum < cb.sum
	}
	d := a ^ b
	return d != 0 && a&(d&-d) != 0
}

// exhaustive compares every set of k candidates.
func (s *setSearch) exhaustive() uint64 {
	var best uint64
	var bestCost setCost
	idx := make([]int, s.k)
	for i := range idx {
		idx[i] = i
	}
	m := len(s.cand)
	for {
		var set uint64
		for _, r := range idx {
			set |= 1 << r
		}
		if c := s.cost(set); better(set, c, best, bestCost) {
			best, bestCost = set, c
		}
		// The next combination in lexicographic order.
		i := s.k - 1
		for i >= 0 && idx[i] == m-s.k+i {
			i--
		}
		if i < 0 {
			return best
		}
		idx[i]++
		for j := i + 1; j < s.k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

// greedy builds a set from each candidate in turn, adding the candidate
// that keeps the set closest (ties: the better rank), keeps the best of
// those sets, then swaps a card of it for one outside while that makes it
// better, a bounded number of times.
func (s *setSearch) greedy() uint64 {
	m := len(s.cand)
	var best uint64
	var bestCost setCost
	for seed := range m {
		set := uint64(1) << seed
		var c setCost
		for range s.k - 1 {
			pick, pickCost := -1, setCost{}
			for r := range m {
				if set&(1<<r) != 0 {
					continue
				}
				nc := c
				for a := set; a != 0; a &= a - 1 {
					l := s.link(r, bits.TrailingZeros64(a))
					nc.far, nc.sum = max(nc.far, l), nc.sum+int(l)
				}
				if pick < 0 || nc.far < pickCost.far || nc.far == pickCost.far && nc.sum < pickCost.sum {
					pick, pickCost = r, nc
				}
			}
			set, c = set|1<<pick, pickCost
		}
		if better(set, c, best, bestCost) {
			best, bestCost = set, c
		}
	}
	for range s.k * m {
		improved := false
		for in := best; in != 0 && !improved; in &= in - 1 {
			for r := range m {
				if best&(1<<r) != 0 {
					continue
				}
				try := best&^(in&-in) | 1<<r
				if c := s.cost(try); better(try, c, best, bestCost) {
					best, bestCost, improved = try, c, true
					break
				}
			}
		}
		if !improved {
			break
		}
	}
	return best
}

// binomialAtMost reports whether n choose k is at most limit.
func binomialAtMost(n, k, limit int) bool {
	k = min(k, n-k)
	c := 1
	for i := range k {
		c = c * (n - i) / (i + 1)
		if c > limit {
			return false
		}
	}
	return true
}
