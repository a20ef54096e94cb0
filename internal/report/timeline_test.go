package report

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// First fit by start time uses as many lanes as the most intervals that
// overlap, and never puts two overlapping ones in a lane.
func TestAssignLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		n := 1 + rng.IntN(60)
		its := make([]item, n)
		for i := range its {
			s := at(float64(rng.IntN(100)))
			its[i] = item{start: s, end: s.Add(time.Duration(rng.IntN(30)) * time.Second)}
		}
		slices.SortFunc(its, func(a, b item) int { return a.start.Compare(b.start) })
		lane, k := assignLanes(its)
		// Intervals are half-open: [start, end).
		most := 0
		for i, p := range its {
			open := 1
			for j, q := range its {
				if j != i && !q.start.After(p.start) && q.end.After(p.start) {
					open++
				}
			}
			most = max(most, open)
		}
		if k > most {
			t.Errorf("round %d: %d lanes for at most %d overlapping intervals", round, k, most)
		}
		for i := range its {
			for j := i + 1; j < len(its); j++ {
				if lane[i] == lane[j] && its[j].start.Before(its[i].end) && its[i].start.Before(its[j].end) {
					t.Errorf("round %d: overlapping intervals %d and %d share lane %d", round, i, j, lane[i])
				}
			}
		}
	}
}
