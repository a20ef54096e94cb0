package daemon

import (
	"slices"
	"testing"
)

func TestInsertRunKeepsIDOrder(t *testing.T) {
	var rs []*run
	for _, id := range []int64{5, 7, 1, 6, 9, 2} {
		rs = insertRun(rs, &run{id: id})
	}
	got := make([]int64, len(rs))
	for i, r := range rs {
		got[i] = r.id
	}
	if want := []int64{1, 2, 5, 6, 7, 9}; !slices.Equal(got, want) {
		t.Fatalf("runs in order %v, want %v", got, want)
	}
}
