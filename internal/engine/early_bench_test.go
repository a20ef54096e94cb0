package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// BenchmarkBoundOf finds the early start's bound of a resumed batch of
// 100,000 tasks shaped as bench/scale.sh's (up to two random earlier
// dependencies each), the first 10,000 complete before.
func BenchmarkBoundOf(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n = 100_000
	sub := Submission{Specs: make([]*task.Spec, n), Resume: make([]Resume, n)}
	earlier := map[string]*store.Row{}
	for i := range n {
		s := &task.Spec{ID: fmt.Sprintf("task-%06d", i), Priority: r.IntN(10)}
		if i > 0 {
			s.Dependencies = []string{fmt.Sprintf("task-%06d", r.IntN(i))}
		}
		sub.Specs[i] = s
		if i < 10_000 {
			earlier[s.ID] = &store.Row{Record: task.Record{ID: s.ID, State: task.Complete}}
			sub.Resume[i].Intact = true
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if !boundOf(sub, earlier).ok {
			b.Fatal("not ok")
		}
	}
}
