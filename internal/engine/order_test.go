package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

func TestRankOf(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int32
	}{
		{0, 1}, // known, however short: after unknown, before no estimate
		{time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{time.Hour, 3600},
		{time.Duration(math.MaxInt64), math.MaxInt32 - 1},
		{EstimateUnknown, math.MaxInt32},
		{-time.Hour, math.MaxInt32},
	} {
		if got := rankOf(c.d); got != c.want {
			t.Errorf("rankOf(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// The ready set's order: priority first, then the longer estimate, then
// submission; tasks without estimates (rank 0) keep submission order.
func TestReadySetLongestEstimateFirst(t *testing.T) {
	r := newReadySet()
	for _, x := range []struct {
		id   string
		prio int
		est  time.Duration
	}{
		{"short", 0, time.Minute},
		{"long", 0, time.Hour},
		{"unknown", 0, EstimateUnknown},
		{"urgent-short", 1, time.Second},
		{"long-too", 0, time.Hour},
		{"low-long", -1, 8 * time.Hour},
		{"mid", 0, 10 * time.Minute},
	} {
		n := ownedNode(x.id, "", x.prio, int64(r.Len()))
		n.est = rankOf(x.est)
		r.ReplaceOrInsert(n)
	}
	var got []string
	r.Ascend(func(n *node) bool { got = append(got, n.spec.ID); return true })
	want := []string{"urgent-short", "unknown", "long", "long-too", "mid", "short", "low-long"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// Two owners of equal usage: the one whose next task comes first by
// lessNode (the longer estimate) goes first, not the earlier submitted.
func TestReadySetOwnersTieByEstimate(t *testing.T) {
	r := newReadySet()
	r.now = t0
	a := ownedNode("a-short", "1", 0, 0)
	a.est = rankOf(time.Minute)
	b := ownedNode("b-long", "2", 0, 1)
	b.est = rankOf(time.Hour)
	r.ReplaceOrInsert(a)
	r.ReplaceOrInsert(b)
	var got []string
	r.Ascend(func(n *node) bool { got = append(got, n.spec.ID); return true })
	if want := []string{"b-long", "a-short"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// submitEstimated submits specs with the estimates given, as the root
// package does with the longest_first order.
func (h *harness) submitEstimated(t *testing.T, specs []*task.Spec, est []time.Duration) error {
	t.Helper()
	blobs := make([][]byte, len(specs))
	for i, s := range specs {
		s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid spec in test: %v", err)
		}
		blobs[i], _ = json.Marshal(s)
	}
	return h.Submit(Submission{Specs: specs, JSON: blobs, Estimate: est})
}

// Through the loop, one slot: priority first; among equals, unknown
// estimates, then the longest, then submission.
func TestEngineStartsLongestEstimateFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		specs := []*task.Spec{spec("short"), spec("long"), withPriority(spec("urgent"), 3), spec("unknown"), spec("mid"), spec("long2")}
		est := []time.Duration{time.Minute, time.Hour, time.Second, EstimateUnknown, 10 * time.Minute, time.Hour}
		if err := h.submitEstimated(t, specs, est); err != nil {
			t.Fatal(err)
		}
		h.run(t)
		want := []string{"urgent#1", "unknown#1", "long#1", "long2#1", "mid#1", "short#1"}
		if got := h.runner.startOrder(); !slices.Equal(got, want) {
			t.Errorf("start order = %v, want %v", got, want)
		}
	})
}

// Without estimates the order is submission's, as before; with a number
// of estimates other than the tasks', Submit refuses the batch.
func TestEngineWithoutEstimatesKeepsSubmissionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 1}, nil)
		defer h.Close()
		err := h.submitEstimated(t, []*task.Spec{spec("x"), spec("y")}, []time.Duration{time.Hour})
		if err == nil || !strings.Contains(err.Error(), "1 estimates for 2 tasks") {
			t.Fatalf("submit with 1 estimate for 2 tasks: %v", err)
		}
		var specs []*task.Spec
		for i := range 5 {
			specs = append(specs, spec(fmt.Sprint("t", i)))
		}
		if err := h.submitEstimated(t, specs, nil); err != nil {
			t.Fatal(err)
		}
		h.run(t)
		want := []string{"t0#1", "t1#1", "t2#1", "t3#1", "t4#1"}
		if got := h.runner.startOrder(); !slices.Equal(got, want) {
			t.Errorf("start order = %v, want %v", got, want)
		}
	})
}
