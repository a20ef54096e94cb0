package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/btree"

	"github.com/gpusched/gpusched/internal/task"
)

// sliceQueue is a Queue over candidates already in order.
type sliceQueue []Candidate

func (q sliceQueue) Ascend(fn func(Candidate) bool) {
	for _, c := range q {
		if !fn(c) {
			return
		}
	}
}

// countingQueue counts how many candidates decide looked at.
type countingQueue struct {
	sliceQueue
	seen int
}

func (q *countingQueue) Ascend(fn func(Candidate) bool) {
	q.sliceQueue.Ascend(func(c Candidate) bool { q.seen++; return fn(c) })
}

func TestDecide(t *testing.T) {
	abc := sliceQueue{{ID: "a", Priority: 5}, {ID: "b", Priority: 1, Seq: 1}, {ID: "c", Seq: 2}}
	tests := []struct {
		name string
		view View
		want []string
	}{
		{"no slot", View{Free: 0, Ready: abc}, nil},
		{"negative slots", View{Free: -1, Ready: abc}, nil},
		{"nothing ready", View{Free: 3, Ready: sliceQueue{}}, nil},
		{"nil queue", View{Free: 3}, nil},
		{"one slot takes the best", View{Free: 1, Ready: abc}, []string{"a"}},
		{"slots in queue order", View{Free: 2, Ready: abc}, []string{"a", "b"}},
		{"more slots than ready", View{Free: 10, Ready: abc}, []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, a := range decide(tt.view) {
				got = append(got, a.TaskID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("decide = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecideWalksOnlyWhatItStarts(t *testing.T) {
	q := &countingQueue{sliceQueue: make(sliceQueue, 100000)}
	if got := decide(View{Free: 2, Ready: q}); len(got) != 2 {
		t.Fatalf("started %d, want 2", len(got))
	}
	if q.seen != 2 {
		t.Errorf("decide looked at %d candidates to start 2", q.seen)
	}
}

// BenchmarkDecide100kReady: choosing what to start with 100,000 ready tasks
// in the engine's real ready queue (a B-tree by priority and submission).
func BenchmarkDecide100kReady(b *testing.B) {
	e := &Engine{ready: btree.NewG(32, lessNode)}
	for i := range 100_000 {
		n := &node{spec: &task.Spec{ID: fmt.Sprint("t", i), Priority: i % 7}, seq: int64(i)}
		e.ready.ReplaceOrInsert(n)
	}
	q := readyQueue{e.ready}
	for _, free := range []int{1, 8} {
		b.Run(fmt.Sprint("free=", free), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := decide(View{Free: free, Ready: q}); len(got) != free {
					b.Fatalf("started %d", len(got))
				}
			}
		})
	}
}

// BenchmarkReadyQueueChurn: taking the best ready task out and putting a
// new one in, as the loop does once per start, with 100,000 ready.
func BenchmarkReadyQueueChurn(b *testing.B) {
	t := btree.NewG(32, lessNode)
	for i := range 100_000 {
		t.ReplaceOrInsert(&node{spec: &task.Spec{Priority: i % 7}, seq: int64(i)})
	}
	seq := int64(100_000)
	b.ReportAllocs()
	for b.Loop() {
		n, _ := t.DeleteMin()
		n.seq = seq
		seq++
		t.ReplaceOrInsert(n)
	}
}
