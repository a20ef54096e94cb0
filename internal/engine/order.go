package engine

// The order of the ready queue among tasks of one priority: submission,
// or, when the caller hands the engine estimated run times
// (Submission.Estimate), longest estimate first, then submission. A
// task's estimate is fixed when it is submitted, so its place in the
// queue's trees (lessNode, the GPU index's key) never changes while it is
// there. See docs/gpu.md, "Order within a batch".

import (
	"math"
	"time"
)

// EstimateUnknown is an estimate that says the task's run time is not
// known (it has no history and no timeout): such a task goes before
// every task with a known estimate of its priority (unknownRank).
const EstimateUnknown time.Duration = -1

// unknownRank is the rank of a task whose run time is not known: first,
// as if it were the longest. The simulation (BenchmarkSimulationLongestFirst,
// docs/benchmarks.md) measured a batch with some tasks unknown: started
// last, an unknown long task ends the batch late; started first, an
// unknown short one costs little.
const unknownRank = math.MaxInt32

// rankOf is a node's est for an estimated run time d: its whole seconds,
// rounded up, at least 1 (so that a known estimate never ranks with the
// tasks that carry none), and below unknownRank; EstimateUnknown (any
// negative d) ranks unknownRank. A task submitted without estimates
// ranks 0, so that a queue of them keeps submission order.
func rankOf(d time.Duration) int32 {
	if d < 0 {
		return unknownRank
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int32(min(max(s, 1), unknownRank-1))
}
