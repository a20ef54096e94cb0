package gpusched

// The run-time estimates of the OrderLongestFirst order: what each task of
// a batch is expected to keep the machine busy for, itself and the tasks
// of the batch that wait for it (docs/gpu.md, "Order within a batch").

import (
	"math"
	"time"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/task"
)

// estimates returns each task's estimated run time for the
// OrderLongestFirst order (see it for the rule), from the same history
// its auto budgets are learned from, with the longest chain of the
// batch's tasks that wait for it added (throughDependents); nil for the
// submitted order.
func (s *Scheduler) estimates(specs []*task.Spec, h *histories) []time.Duration {
	if s.settings.Order != OrderLongestFirst {
		return nil
	}
	out := make([]time.Duration, len(specs))
	for i, sp := range specs {
		var attempts []task.Attempt
		if s.history != nil {
			attempts = h.of(i, sp)
		} else if row, ok := s.engine.Earlier(sp.ID); ok {
			attempts = row.Attempts
		}
		out[i] = estimate(attempts, sp.Timeout)
	}
	throughDependents(specs, out)
	return out
}

// histories are the attempts the history function (WithBudgetHistory)
// gives for the tasks of one batch, asked once per task however many of
// the batch's choices (budgets, the run-time estimate) read them.
type histories struct {
	f   func(TaskSpec) []Attempt
	got map[int][]task.Attempt // by the task's index in the batch
}

// of returns the history of sp, the batch's i-th task.
func (h *histories) of(i int, sp *task.Spec) []task.Attempt {
	if a, ok := h.got[i]; ok {
		return a
	}
	a := internalAttempts(h.f(*publicSpec(sp)))
	if h.got == nil {
		h.got = map[int][]task.Attempt{}
	}
	h.got[i] = a
	return a
}

// estimate is the run time estimated from attempts (oldest first) and the
// task's own timeout: the longest of the last BudgetWindow attempts that
// ended by themselves; else the timeout, if set; else unknown.
func estimate(attempts []task.Attempt, timeout time.Duration) time.Duration {
	var longest time.Duration
	seen := 0
	for i := len(attempts) - 1; i >= 0 && seen < BudgetWindow; i-- {
		a := &attempts[i]
		if !a.Ended() || a.TimedOut || a.Cancelled || a.Interrupted || a.NotCharged {
			continue
		}
		seen++
		longest = max(longest, a.End.Sub(a.Start))
	}
	switch {
	case seen > 0:
		return longest
	case timeout > 0:
		return timeout
	}
	return engine.EstimateUnknown
}

// throughDependents adds to each estimate of est (the batch's tasks' own,
// by index; negative: unknown) the longest chain of estimates of the
// batch's tasks that wait for it, directly or not: the time from its
// start to the end of the last of them if each started as soon as it
// could. A task that gates long work then goes before a long task that
// gates nothing, as the longest run first does for tasks that do not
// wait for each other. A task whose own run time is unknown stays
// unknown (it goes first); in a chain it adds nothing, so that one
// unknown task (a summary no run has reached yet) does not hide the
// estimates of all the tasks it waits for. Dependencies on tasks of
// earlier batches are left out: their places in the queue are fixed.
// Tasks on a cycle keep their own estimates (the batch is refused).
func throughDependents(specs []*task.Spec, est []time.Duration) {
	known, waits := false, false
	for i, sp := range specs {
		known = known || est[i] >= 0
		waits = waits || len(sp.Dependencies) > 0
	}
	if !known || !waits {
		return
	}
	// The batch's dependencies as indexes, each task's from first[i] to
	// first[i+1] in on: looked up once, in the batch's order.
	index := make(map[string]int32, len(specs))
	for i, sp := range specs {
		index[sp.ID] = int32(i)
	}
	first := make([]int32, len(specs)+1)
	on := make([]int32, 0, len(specs))
	for i, sp := range specs {
		first[i] = int32(len(on))
		for _, d := range sp.Dependencies {
			if j, ok := index[d]; ok {
				on = append(on, j)
			}
		}
	}
	first[len(specs)] = int32(len(on))
	// Kahn's order on the graph reversed: a task is taken once every task
	// of the batch that waits for it has been.
	waiting := make([]int32, len(specs)) // by task: its waiters not yet taken
	for _, j := range on {
		waiting[j]++
	}
	next := make([]int32, 0, len(specs))
	for i := range specs {
		if waiting[i] == 0 {
			next = append(next, int32(i))
		}
	}
	tail := make([]time.Duration, len(specs)) // by task: its waiters' longest chain
	for len(next) > 0 {
		i := next[len(next)-1]
		next = next[:len(next)-1]
		chain := tail[i] // what i adds to the chains of the tasks it waits for
		if est[i] >= 0 {
			chain = addCapped(est[i], tail[i])
			est[i] = chain
		}
		for _, j := range on[first[i]:first[i+1]] {
			tail[j] = max(tail[j], chain)
			if waiting[j]--; waiting[j] == 0 {
				next = append(next, j)
			}
		}
	}
}

// addCapped is a+b for non-negative durations, at most the longest
// duration there is.
func addCapped(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
