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
func BenchmarkBoundOf(b *testing.B) { benchmarkBoundOf(b, 10_000, 10_000) }

// BenchmarkBoundOfResumed: the batch of a resumed run, every task in the
// earlier rows, the first 10,000 complete and intact (bench/scale.sh's
// run directory).
func BenchmarkBoundOfResumed(b *testing.B) { benchmarkBoundOf(b, 100_000, 10_000) }

// BenchmarkBoundOfChanged: the same where every definition changed, so
// that no task is intact.
func BenchmarkBoundOfChanged(b *testing.B) { benchmarkBoundOf(b, 100_000, 0) }

// benchmarkBoundOf: 100,000 tasks, the first stored of them in the
// earlier rows, the first 10,000 of those complete, the first intact of
// them intact.
func benchmarkBoundOf(b *testing.B, stored, intact int) {
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
		if i < stored {
			state := task.Failed
			if i < 10_000 {
				state = task.Complete
			}
			earlier[s.ID] = &store.Row{Record: task.Record{ID: s.ID, State: state}}
		}
		sub.Resume[i].Intact = i < intact
	}
	b.ReportAllocs()
	for b.Loop() {
		if !boundOf(sub, earlier).ok {
			b.Fatal("not ok")
		}
	}
}
