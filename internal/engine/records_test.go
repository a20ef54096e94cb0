package engine

import (
	"fmt"
	"slices"
	"testing"
)

// bySeq hands back every node in memory, tasks and adopted ones, in
// submission order: by placing them when their numbers are dense, by
// sorting them otherwise, and never loses one that shares a number with
// another.
func TestBySeqOrdersEveryNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tasks   []int64
		adopted []int64
	}{
		{"none", nil, nil},
		{"dense", []int64{4, 2, 0, 3, 1}, nil},
		{"dense with adopted", []int64{7, 5, 9}, []int64{6, 8}},
		{"gaps placed", []int64{10, 13, 11, 15}, nil},
		{"sparse sorted", []int64{1000, 3, 999999, 42}, []int64{7}},
		{"shared number", []int64{3, 1, 2}, []int64{2}},
		{"one", []int64{5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{tasks: map[string]*node{}, adopted: map[string]*node{}}
			var want []int64
			for i, s := range tc.tasks {
				e.tasks[fmt.Sprint("t", i)] = &node{seq: s}
				want = append(want, s)
			}
			for i, s := range tc.adopted {
				e.adopted[fmt.Sprint("a", i)] = &node{seq: s}
				want = append(want, s)
			}
			slices.Sort(want)
			var got []int64
			seen := map[*node]bool{}
			for _, n := range e.bySeq() {
				if seen[n] {
					t.Fatalf("node %d handed back twice", n.seq)
				}
				seen[n] = true
				got = append(got, n.seq)
			}
			if !slices.Equal(got, want) {
				t.Errorf("bySeq gives %v; want %v", got, want)
			}
		})
	}
}
