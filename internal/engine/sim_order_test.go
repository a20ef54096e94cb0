package engine

// How much of the batch trace's gap to the bound is the order of the
// queue, and how much the cards: the same decide fed other orders, and a
// reference schedule on one pool of memory with no cards at all. See
// docs/benchmarks.md, "GPU admission: simulated makespan".

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// simPooled is the makespan of a batch (every task of tr at time 0) on one
// pool of memory, the eight cards' capacity together, with no cards: at
// every end, the waiting tasks are taken in order and each one the pool
// holds starts (backfill, as decide does), so no memory is ever lost to a
// card too full for the next task. No card-level rule can do better with
// the same order of the queue; it shows how much of the gap to the bound
// the order itself costs. order lists tr's indices in queue order.
func simPooled(tr []simTask, order []int) time.Duration {
	type run struct {
		end time.Duration
		mib int64
	}
	var running []run
	var now, makespan time.Duration
	free := int64(simCards * simCapMiB)
	queue := slices.Clone(order)
	for len(queue) > 0 {
		waiting := queue[:0]
		for _, i := range queue {
			if m := tr[i].mib * int64(tr[i].cards()); m <= free {
				free -= m
				running = append(running, run{now + tr[i].dur, m})
				makespan = max(makespan, now+tr[i].dur)
			} else {
				waiting = append(waiting, i)
			}
		}
		queue = waiting
		if len(queue) == 0 || len(running) == 0 {
			break // done, or a task larger than the pool: it never runs
		}
		first := 0
		for j := range running {
			if running[j].end < running[first].end {
				first = j
			}
		}
		now, free = running[first].end, free+running[first].mib
		running = slices.Delete(running, first, first+1)
	}
	if len(queue) > 0 {
		return -1
	}
	return makespan
}

// simOrder is tr's indices in submission order, or sorted stably by less.
func simOrder(tr []simTask, less func(a, b simTask) int) []int {
	order := make([]int, len(tr))
	for i := range order {
		order[i] = i
	}
	if less != nil {
		slices.SortStableFunc(order, func(a, b int) int { return less(tr[a], tr[b]) })
	}
	return order
}

// Orders of a batch's queue: the memory each task takes on all its cards,
// most first; its cards, most first; its duration, longest first.
func simBiggest(a, b simTask) int {
	return int(b.mib*int64(b.cards()) - a.mib*int64(a.cards()))
}
func simWidest(a, b simTask) int  { return b.cards() - a.cards() }
func simLongest(a, b simTask) int { return int(b.dur - a.dur) }

// simLongestGuess orders by the guess at each task's run time, longest
// first (simEstimated).
func simLongestGuess(a, b simTask) int { return int(b.est - a.est) }

// simEstimated returns tr with a guess at each task's run time, as the run
// times of its earlier attempts would give it: its duration times a
// log-normal error of spread sigma (0: exact), deterministic from seed.
func simEstimated(tr []simTask, sigma float64, seed uint64) []simTask {
	r := rand.New(rand.NewPCG(seed, 0xbb67ae8584caa73b))
	out := slices.Clone(tr)
	for i := range out {
		out[i].est = time.Duration(float64(out[i].dur) * math.Exp(sigma*r.NormFloat64()))
	}
	return out
}

// TestSimPooled checks the pooled reference: it shares memory across
// cards (nine 50 GiB tasks of a minute all run at once, where eight cards
// need two rounds), follows the order it is given, never beats the lower
// bound, and reports a task larger than the pool.
func TestSimPooled(t *testing.T) {
	var tr []simTask
	for i := range simCards + 1 {
		tr = append(tr, simTask{id: fmt.Sprint("t", i), mib: 50 << 10, dur: time.Minute})
	}
	if got := simPooled(tr, simOrder(tr, nil)); got != time.Minute {
		t.Errorf("nine 50 GiB tasks of 1m on the pool: makespan %v, want 1m0s", got)
	}
	// A pool-sized task of an hour and two half-pool tasks of a minute:
	// in this order the big one runs first, alone, then the two; the
	// other way round, the two run together first.
	pool := int64(simCards * simCapMiB)
	tr = []simTask{{id: "big", mib: pool / simCards, gpus: simCards, dur: time.Hour},
		{id: "a", mib: pool / 2, dur: time.Minute}, {id: "b", mib: pool / 2, dur: time.Minute}}
	if got := simPooled(tr, []int{0, 1, 2}); got != time.Hour+time.Minute {
		t.Errorf("big task first: makespan %v, want 1h1m0s", got)
	}
	if got := simPooled(tr, []int{1, 2, 0}); got != time.Hour+time.Minute {
		t.Errorf("big task last: makespan %v, want 1h1m0s", got)
	}
	tr[1].dur = 2 * time.Hour
	if got := simPooled(tr, []int{1, 2, 0}); got != 3*time.Hour {
		t.Errorf("big task after a 2h one: makespan %v, want 3h0m0s", got)
	}
	for seed := uint64(1); seed <= 2; seed++ {
		tr := simTrace(seed, 300, 0)
		for _, less := range []func(a, b simTask) int{nil, simBiggest, simLongest} {
			if got, bound := simPooled(tr, simOrder(tr, less)), simBound(tr); got < bound {
				t.Errorf("seed %d: pooled makespan %v under the lower bound %v", seed, got, bound)
			}
		}
	}
	tr = append(tr, simTask{id: "huge", mib: pool + 1, dur: time.Minute})
	if got := simPooled(tr, simOrder(tr, nil)); got >= 0 {
		t.Errorf("a task larger than the pool ran: makespan %v", got)
	}
}

// BenchmarkSimulationOrders replays seeds 1-8 of the batch traces (the
// one-card trace and the mixed one) under gpusched's rule and the orders
// it does not follow, and the one-card batch on the pooled reference, and
// reports the means over the seeds, for docs/benchmarks.md:
// go test ./internal/engine -run '^$' -bench SimulationOrders -benchtime 1x.
// Metrics: makespan over the bound (mean, and the smallest and largest of
// a seed); when the queue emptied, over the bound; the hours from then to
// the end; the memory held until then, and the card-hours of memory idle
// meanwhile on cards reserved for a starving task and on the others; the
// mean wait; the longest wait of a task on all eight cards.
func BenchmarkSimulationOrders(b *testing.B) {
	const seeds = 8
	type figures struct{ ratio, lo, hi, last, tail, busy, idleRes, idleOther, wait, wide float64 }
	report := func(b *testing.B, f figures) {
		b.ReportMetric(f.ratio, "x-bound")
		b.ReportMetric(f.lo, "x-bound-min")
		b.ReportMetric(f.hi, "x-bound-max")
		b.ReportMetric(f.last, "laststart-x-bound")
		b.ReportMetric(f.tail, "tail-h")
		b.ReportMetric(100*f.busy, "%busy-before")
		b.ReportMetric(f.idleRes, "idle-reserved-card-h")
		b.ReportMetric(f.idleOther, "idle-other-card-h")
		b.ReportMetric(f.wait, "meanwait-h")
		b.ReportMetric(f.wide, "maxwait-8gpu-h")
	}
	add := func(f *figures, ratio float64) {
		f.ratio += ratio / seeds
		if f.lo == 0 || ratio < f.lo {
			f.lo = ratio
		}
		f.hi = max(f.hi, ratio)
	}
	traces := []struct {
		name  string
		trace func(seed uint64) []simTask
		bound func([]simTask) time.Duration
	}{
		{"onecard-batch", func(s uint64) []simTask { return simTrace(s, simTasks, 0) }, simBound},
		{"mixed-batch", func(s uint64) []simTask { return simMixedTrace(s, simMixedTasks, 0) }, simMixedBound},
	}
	pols := []simPolicy{simPolicies[0], simPolicies[2], simWhatIfs[4], simWhatIfs[5], simWhatIfs[3], simWhatIfs[6]}
	for _, trc := range traces {
		for _, pol := range pols {
			if pol.name == simWhatIfs[6].name && trc.name != "mixed-batch" {
				continue // every task of the one-card batch takes one card
			}
			b.Run(fmt.Sprintf("trace=%s/%s", trc.name, pol.name), func(b *testing.B) {
				var f figures
				for b.Loop() {
					f = figures{}
					for seed := uint64(1); seed <= seeds; seed++ {
						tr := trc.trace(seed)
						res, err := simulate(tr, pol, simOptions{})
						if err != nil {
							b.Fatal(err)
						}
						bound := trc.bound(tr)
						add(&f, res.makespan.Seconds()/bound.Seconds())
						f.last += res.lastStart.Seconds() / bound.Seconds() / seeds
						f.tail += (res.makespan - res.lastStart).Hours() / seeds
						f.busy += res.busyBefore / seeds
						f.idleRes += res.idleReserved / seeds
						f.idleOther += res.idleOther / seeds
						f.wait += res.meanWait.Hours() / seeds
						f.wide += res.maxWaitWide.Hours() / seeds
					}
				}
				report(b, f)
			})
		}
	}
	// Longest first by a guess, as history could give it: the default rule
	// with the tasks submitted together ordered by it.
	for _, trc := range traces {
		for _, sigma := range []float64{0, 0.25, 0.5, 1} {
			pol := simPolicy{name: fmt.Sprintf("whatif_guessed_longest_first_sigma=%.2f_1m", sigma), reserveAfter: DefaultReserveAfter,
				batchOrder: simLongestGuess}
			b.Run("trace="+trc.name+"/"+pol.name, func(b *testing.B) {
				var f figures
				for b.Loop() {
					f = figures{}
					for seed := uint64(1); seed <= seeds; seed++ {
						tr := simEstimated(trc.trace(seed), sigma, seed)
						res, err := simulate(tr, pol, simOptions{})
						if err != nil {
							b.Fatal(err)
						}
						add(&f, res.makespan.Seconds()/trc.bound(tr).Seconds())
						f.wait += res.meanWait.Hours() / seeds
						f.wide += res.maxWaitWide.Hours() / seeds
					}
				}
				b.ReportMetric(f.ratio, "x-bound")
				b.ReportMetric(f.lo, "x-bound-min")
				b.ReportMetric(f.hi, "x-bound-max")
				b.ReportMetric(f.wait, "meanwait-h")
				b.ReportMetric(f.wide, "maxwait-8gpu-h")
			})
		}
	}
	for _, o := range []struct {
		name string
		less func(a, b simTask) int
	}{{"submission", nil}, {"biggest_first", simBiggest}, {"longest_first", simLongest}} {
		b.Run("trace=onecard-batch/pooled_memory_"+o.name, func(b *testing.B) {
			var f figures
			for b.Loop() {
				f = figures{}
				for seed := uint64(1); seed <= seeds; seed++ {
					tr := simTrace(seed, simTasks, 0)
					add(&f, simPooled(tr, simOrder(tr, o.less)).Seconds()/simBound(tr).Seconds())
				}
			}
			b.ReportMetric(f.ratio, "x-bound")
			b.ReportMetric(f.lo, "x-bound-min")
			b.ReportMetric(f.hi, "x-bound-max")
		})
	}
}
