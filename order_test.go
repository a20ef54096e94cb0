package gpusched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/task"
)

// ran is an attempt that ran for d and ended as end says.
func ran(n int, d time.Duration, end func(a *task.Attempt)) task.Attempt {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Hour)
	a := task.Attempt{Number: n, Start: start, End: start.Add(d)}
	if end != nil {
		end(&a)
	}
	return a
}

func TestEstimate(t *testing.T) {
	timedOut := func(a *task.Attempt) { a.TimedOut = true }
	cancelled := func(a *task.Attempt) { a.Cancelled = true }
	interrupted := func(a *task.Attempt) { a.Interrupted = true }
	notCharged := func(a *task.Attempt) { a.NotCharged = true }
	running := func(a *task.Attempt) { a.End = time.Time{} }
	failed := func(a *task.Attempt) { code := 1; a.ExitCode = &code }
	for _, c := range []struct {
		name     string
		attempts []task.Attempt
		timeout  time.Duration
		want     time.Duration
	}{
		{"nothing known", nil, 0, engine.EstimateUnknown},
		{"its timeout", nil, time.Hour, time.Hour},
		{"history over the timeout", []task.Attempt{ran(1, time.Minute, nil)}, time.Hour, time.Minute},
		{"the longest of the window", []task.Attempt{ran(1, 3*time.Minute, nil), ran(2, 7*time.Minute, failed), ran(3, 5*time.Minute, nil)}, 0, 7 * time.Minute},
		{"only the last five that ended by themselves", []task.Attempt{ran(1, time.Hour, nil), ran(2, time.Minute, nil), ran(3, time.Minute, nil),
			ran(4, time.Minute, nil), ran(5, time.Minute, nil), ran(6, time.Minute, nil), ran(7, 9*time.Hour, cancelled)}, 0, time.Minute},
		{"none ended by itself", []task.Attempt{ran(1, time.Hour, timedOut), ran(2, time.Hour, cancelled), ran(3, time.Hour, interrupted),
			ran(4, time.Hour, notCharged), ran(5, time.Hour, running)}, 2 * time.Hour, 2 * time.Hour},
	} {
		if got := estimate(c.attempts, c.timeout); got != c.want {
			t.Errorf("%s: estimate %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSchedulingOrderValid(t *testing.T) {
	for _, o := range []string{"", OrderSubmitted, OrderLongestFirst} {
		if err := (Scheduling{Order: o}).Validate(); err != nil {
			t.Errorf("order %q: %v", o, err)
		}
	}
	err := Scheduling{Order: "longest"}.Validate()
	var se *SchedulingError
	if !errors.As(err, &se) || se.Field != "order" || !errors.Is(err, ErrInvalidScheduling) {
		t.Fatalf("order \"longest\": %v; want a *SchedulingError for order", err)
	}
	if want := `scheduling.order: must be "submitted" or "longest_first", not "longest"`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if got := (Scheduling{}).withDefaults().Order; got != OrderSubmitted {
		t.Errorf("default order %q, want %q", got, OrderSubmitted)
	}
}

// startOrder runs tasks one at a time under order, with history from a
// WithBudgetHistory function (as a daemon's), and returns their ids in
// the order they started.
func startOrder(t *testing.T, order string, tasks []TaskSpec, history map[string][]Attempt) []string {
	t.Helper()
	var started []string
	s, err := New(t.TempDir(), Scheduling{MaxParallelTasks: 1, Order: order},
		WithBudgetHistory(func(ts TaskSpec) []Attempt { return history[ts.ID] }),
		WithObserver(func(ev Event) {
			if ev.Kind == EventStarted {
				started = append(started, ev.TaskID)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SubmitMany(tasks); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return started
}

// longest_first takes a history function's attempts, then a task's
// timeout; a task with neither goes first; the submitted order ignores
// them all.
func TestLongestFirstFromHistoryFunction(t *testing.T) {
	t.Parallel()
	tasks := []TaskSpec{
		{ID: "a", Payload: []string{"true"}},
		{ID: "b", Payload: []string{"true"}},
		{ID: "c", Payload: []string{"true"}, Timeout: 5 * time.Minute},
		{ID: "d", Payload: []string{"true"}},
		{ID: "e", Payload: []string{"true"}, Timeout: time.Hour},
	}
	history := map[string][]Attempt{
		"a": {Attempt(ran(1, 10*time.Second, nil))},
		"b": {Attempt(ran(1, 2*time.Hour, nil)), Attempt(ran(2, time.Hour, nil))},
		"e": {Attempt(ran(1, time.Second, nil))}, // history wins over the timeout
	}
	if got, want := startOrder(t, OrderLongestFirst, tasks, history), []string{"d", "b", "c", "a", "e"}; !slices.Equal(got, want) {
		t.Errorf("longest_first: started %v, want %v", got, want)
	}
	if got, want := startOrder(t, OrderSubmitted, tasks, history), []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("submitted: started %v, want %v", got, want)
	}
}

func TestThroughDependents(t *testing.T) {
	const u = engine.EstimateUnknown
	m := time.Minute
	spec := func(id string, deps ...string) *task.Spec { return &task.Spec{ID: id, Dependencies: deps} }
	for _, c := range []struct {
		name  string
		specs []*task.Spec
		est   []time.Duration
		want  []time.Duration
	}{
		{"a chain beside a task alone",
			[]*task.Spec{spec("a"), spec("b", "a"), spec("c")},
			[]time.Duration{m, 10 * m, 5 * m}, []time.Duration{11 * m, 10 * m, 5 * m}},
		{"a diamond takes its longest branch",
			[]*task.Spec{spec("a"), spec("b", "a"), spec("c", "a"), spec("d", "b", "c")},
			[]time.Duration{m, 2 * m, 5 * m, m}, []time.Duration{7 * m, 3 * m, 6 * m, m}},
		{"an unknown summary adds nothing and stays unknown",
			[]*task.Spec{spec("x"), spec("y"), spec("sum", "x", "y")},
			[]time.Duration{2 * m, 3 * m, u}, []time.Duration{2 * m, 3 * m, u}},
		{"an unknown task passes on what waits for it",
			[]*task.Spec{spec("a"), spec("mid", "a"), spec("z", "mid")},
			[]time.Duration{m, u, 4 * m}, []time.Duration{5 * m, u, 4 * m}},
		{"the batch's order does not matter, nor a dependency listed twice",
			[]*task.Spec{spec("z", "mid", "mid"), spec("mid", "a"), spec("a")},
			[]time.Duration{4 * m, 2 * m, m}, []time.Duration{4 * m, 6 * m, 7 * m}},
		{"dependencies outside the batch are left out",
			[]*task.Spec{spec("a", "earlier"), spec("b")},
			[]time.Duration{m, 2 * m}, []time.Duration{m, 2 * m}},
		{"a cycle keeps its own estimates",
			[]*task.Spec{spec("p", "q"), spec("q", "p"), spec("r", "p")},
			[]time.Duration{m, 2 * m, 3 * m}, []time.Duration{m, 2 * m, 3 * m}},
		{"nothing known, nothing changes",
			[]*task.Spec{spec("a"), spec("b", "a")},
			[]time.Duration{u, u}, []time.Duration{u, u}},
		{"a sum past the longest duration is capped",
			[]*task.Spec{spec("a"), spec("b", "a")},
			[]time.Duration{math.MaxInt64 - 5, 10}, []time.Duration{math.MaxInt64, 10}},
	} {
		got := slices.Clone(c.est)
		throughDependents(c.specs, got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// longest_first counts what waits for a task: a short task that gates a
// long one goes before a task longer than it alone.
func TestLongestFirstCountsWhatWaits(t *testing.T) {
	t.Parallel()
	tasks := []TaskSpec{
		{ID: "long", Payload: []string{"true"}, Timeout: time.Hour},
		{ID: "gate", Payload: []string{"true"}, Timeout: time.Minute},
		{ID: "after", Payload: []string{"true"}, Timeout: 2 * time.Hour, Dependencies: []string{"gate"}},
		{ID: "short", Payload: []string{"true"}, Timeout: 2 * time.Minute},
	}
	if got, want := startOrder(t, OrderLongestFirst, tasks, nil), []string{"gate", "after", "long", "short"}; !slices.Equal(got, want) {
		t.Errorf("longest_first: started %v, want %v", got, want)
	}
	if got, want := startOrder(t, OrderSubmitted, tasks, nil), []string{"long", "gate", "after", "short"}; !slices.Equal(got, want) {
		t.Errorf("submitted: started %v, want %v", got, want)
	}
}

// The chains of 100,000 tasks shaped as bench/scale.sh's (each waits for
// up to two random earlier ones), which a resumed run of that size
// computes before its first start.
func BenchmarkThroughDependents100k(b *testing.B) {
	const n = 100_000
	r := rand.New(rand.NewPCG(1, 2))
	specs := make([]*task.Spec, n)
	for i := range specs {
		sp := &task.Spec{ID: fmt.Sprintf("task-%06d", i)}
		for k := 0; k < 2 && i > 0; k++ {
			sp.Dependencies = append(sp.Dependencies, fmt.Sprintf("task-%06d", r.IntN(i)))
		}
		specs[i] = sp
	}
	est := make([]time.Duration, n)
	for b.Loop() {
		for i := range est {
			est[i] = time.Duration(i%7) * time.Second
		}
		throughDependents(specs, est)
	}
}
