package report

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
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

// Runs close together on a long axis keep their lines, and only labels
// that do not run into the one before.
func TestRunLabels(t *testing.T) {
	var atts []task.Attempt
	for i := range 6 { // six short runs a minute apart, then one of two hours
		atts = append(atts, att(i+1, float64(60*i), float64(60*i), float64(60*i+1), 1))
	}
	atts = append(atts, att(7, 400, 400, 7600, 0))
	d := Data{Location: time.UTC, Now: at(8000), Rows: []store.Row{row("a", task.Complete, 0, atts...)}}
	m := Build(d)
	if len(m.Runs) != 7 || len(m.Timeline.Runs) != 7 {
		t.Fatalf("%d runs, %d marks; want 7 (a minute apart with nothing between: gaps)", len(m.Runs), len(m.Timeline.Runs))
	}
	labelled, end := 0, 0.0
	for _, r := range m.Timeline.Runs {
		if r.Label == "" {
			continue
		}
		labelled++
		if r.X < end {
			t.Errorf("label %q at x %.1f runs into the one before, which ends at %.1f", r.Label, r.X, end)
		}
		end = r.X + 3 + float64(len(r.Label))*charW
	}
	if labelled < 2 || labelled == 7 || m.Timeline.Runs[0].Label != "run 1" {
		t.Errorf("labels %+v: want run 1 and some others, not all seven", m.Timeline.Runs)
	}
	p := render(t, d)
	checkPage(t, d, p)
	if n := strings.Count(p.html, `<line class="run"`); n != 7 {
		t.Errorf("%d run lines in the page, want 7", n)
	}
}
