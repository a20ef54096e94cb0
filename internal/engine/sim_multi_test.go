package engine

// The mixed trace: tasks on 1, 2, 4 and 8 of the eight simulated cards,
// replayed like the one-card traces (sim_test.go). See docs/benchmarks.md,
// "GPU admission: tasks on several cards".

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
)

// The published mixed trace: its size, and the mean gap between arrivals
// of its arrivals patterns: a busy machine (3 min, about 90% of the
// memory offered) and a calmer one (5 min, about 55%).
const (
	simMixedTasks   = 1000
	simMixedBusyGap = 3 * time.Minute
	simMixedCalmGap = 5 * time.Minute
)

// simMixedTrace returns n tasks, deterministic from seed, in submission
// order. Cards: 80% one, 10% two, 7% four, 3% eight. A one-card task's
// memory is simTrace's mix (70% 4-16 GiB, 25% 20-40, 5% 60-79); a task on
// several cards takes 30-75 GiB on each (whole GiB, uniform), as a job
// that splits a model over cards does. Durations and arrivals as in
// simTrace (log-normal, median 20 min, sigma 1, clamped to [1 min, 8 h];
// Poisson arrivals with meanGap, or all at 0).
func simMixedTrace(seed uint64, n int, meanGap time.Duration) []simTask {
	r := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc909))
	tasks := make([]simTask, n)
	var at time.Duration
	for i := range tasks {
		t := simTask{id: fmt.Sprintf("m%05d", i), gpus: 1}
		switch u := r.Float64(); {
		case u < 0.80:
		case u < 0.90:
			t.gpus = 2
		case u < 0.97:
			t.gpus = 4
		default:
			t.gpus = 8
		}
		var gib int64
		switch u := r.Float64(); {
		case t.gpus > 1:
			gib = 30 + r.Int64N(46)
		case u < 0.70:
			gib = 4 + r.Int64N(13)
		case u < 0.95:
			gib = 20 + r.Int64N(21)
		default:
			gib = 60 + r.Int64N(20)
		}
		t.mib = gib << 10
		sec := math.Exp(math.Log(20*60) + r.NormFloat64())
		t.dur = time.Duration(min(max(sec, 60), 8*3600)) * time.Second
		if meanGap > 0 && i > 0 {
			at += time.Duration(r.ExpFloat64() * float64(meanGap)).Round(time.Second)
		}
		t.arrive = at
		tasks[i] = t
	}
	return tasks
}

// simMixedBound is the lower bound the mixed trace's makespans are read
// against: the larger of simBound (memory x time over capacity, arrivals,
// the longest task) and simBigBound (tasks over half a card never share
// one: their card x time over the eight cards).
func simMixedBound(tr []simTask) time.Duration { return max(simBound(tr), simBigBound(tr)) }

// TestSimulationMixedGPUs replays mixed traces (several seeds, all at once
// and arriving over time, with and without a cooldown) under gpusched's
// rule with each ReserveAfter setting and the first-come-first-served
// baseline: no card is ever over-committed, every task of every size
// runs, a task on several cards starts on that many distinct cards at
// once, and a task behind a reservation takes none of the reserved
// memory. Then, over eight seeds of the published size, reservations
// keep the 8-card tasks from starving at a bounded cost: arriving at the
// calmer pace, their longest wait with the default rule is under half of
// what it is without reservations, at a makespan within 10% of the bound;
// at the busy pace, under 75% of it, at a makespan within 0.05 of the
// bound's multiple without.
func TestSimulationMixedGPUs(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 120
	}
	for seed := uint64(1); seed <= 3; seed++ {
		for _, gap := range []time.Duration{0, simArrGap, simMixedCalmGap} {
			tr := simMixedTrace(seed, n, gap)
			bound := simMixedBound(tr)
			for _, cooldown := range []time.Duration{0, gpu.DefaultCooldown} {
				for _, pol := range simPolicies {
					res, err := simulate(tr, pol, simOptions{cooldown: cooldown, recheck: true})
					if err != nil {
						t.Fatalf("seed %d, gap %v, cooldown %v, %s: %v", seed, gap, cooldown, pol.name, err)
					}
					if res.makespan < bound {
						t.Fatalf("seed %d, gap %v, %s: makespan %v under the lower bound %v", seed, gap, pol.name, res.makespan, bound)
					}
				}
			}
		}
	}
	if testing.Short() {
		return
	}
	const seeds = 8
	type figures struct{ wait, ratio float64 } // means over the seeds: 8-card tasks' longest wait (h), makespan over the bound
	mean := func(gap time.Duration, pol simPolicy) figures {
		var f figures
		for seed := uint64(1); seed <= seeds; seed++ {
			tr := simMixedTrace(seed, simMixedTasks, gap)
			res, err := simulate(tr, pol, simOptions{})
			if err != nil {
				t.Fatalf("seed %d, gap %v, %s: %v", seed, gap, pol.name, err)
			}
			f.wait += res.maxWaitWide.Hours() / seeds
			f.ratio += res.makespan.Seconds() / simMixedBound(tr).Seconds() / seeds
		}
		return f
	}
	calm, calmNever := mean(simMixedCalmGap, simPolicies[0]), mean(simMixedCalmGap, simPolicies[2])
	if calm.wait > calmNever.wait/2 {
		t.Errorf("calm: longest wait of an 8-card task, mean over %d seeds: %.2f h with reservations, %.2f h without; want under half",
			seeds, calm.wait, calmNever.wait)
	}
	if calm.ratio > 1.10 {
		t.Errorf("calm: makespan over the bound, mean over %d seeds: %.3f; want at most 1.10", seeds, calm.ratio)
	}
	// On a busy machine reserving costs makespan (memory held while the
	// last card drains); the rule keeps the cost to what bounds the wait:
	// the 8-card tasks' longest wait well under what it is without
	// reservations, at a makespan within 0.05 of the bound's multiple
	// without (reserving for every starving task on several cards at once
	// cost 0.30).
	busy, busyNever := mean(simMixedBusyGap, simPolicies[0]), mean(simMixedBusyGap, simPolicies[2])
	if busy.wait > 0.75*busyNever.wait {
		t.Errorf("busy: longest wait of an 8-card task, mean over %d seeds: %.2f h with reservations, %.2f h without; want under 75%%",
			seeds, busy.wait, busyNever.wait)
	}
	if busy.ratio > busyNever.ratio+0.05 {
		t.Errorf("busy: makespan over the bound, mean over %d seeds: %.3f with reservations, %.3f without; want within 0.05",
			seeds, busy.ratio, busyNever.ratio)
	}
	t.Logf("mean over %d seeds, with reservations (1m) and without: calm: 8-card tasks' longest wait %.2f h and %.2f h, makespan %.3fx and %.3fx the bound; "+
		"busy: %.2f h and %.2f h, %.3fx and %.3fx", seeds, calm.wait, calmNever.wait, calm.ratio, calmNever.ratio,
		busy.wait, busyNever.wait, busy.ratio, busyNever.ratio)
}

// BenchmarkMixedGPUSimulation replays the published mixed trace (seed 1,
// 1,000 tasks) under each policy, for docs/benchmarks.md:
// go test ./internal/engine -run '^$' -bench MixedGPUSimulation -benchtime 1x.
func BenchmarkMixedGPUSimulation(b *testing.B) {
	for _, trc := range []struct {
		name string
		gap  time.Duration
	}{{"batch", 0}, {"busy", simMixedBusyGap}, {"calm", simMixedCalmGap}} {
		tr := simMixedTrace(simSeed, simMixedTasks, trc.gap)
		bound := simMixedBound(tr)
		for _, cooldown := range []time.Duration{0, gpu.DefaultCooldown} {
			for _, pol := range simPolicies {
				b.Run(fmt.Sprintf("trace=%s/cooldown=%v/%s", trc.name, cooldown, pol.name), func(b *testing.B) {
					var res simResult
					for b.Loop() {
						var err error
						if res, err = simulate(tr, pol, simOptions{cooldown: cooldown}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(res.makespan.Hours(), "makespan-h")
					b.ReportMetric(bound.Hours(), "bound-h")
					b.ReportMetric(res.makespan.Seconds()/bound.Seconds(), "x-bound")
					b.ReportMetric(res.meanWait.Hours(), "meanwait-h")
					b.ReportMetric(res.maxWaitWide.Hours(), "maxwait-8gpu-h")
					b.ReportMetric(res.meanWaitWide.Hours(), "meanwait-8gpu-h")
					b.ReportMetric(100*res.busyBefore, "%busy-before")
					if res.decisions > 0 {
						b.ReportMetric(float64(res.decideTime.Nanoseconds())/float64(res.decisions)/1e3, "us/decision")
					}
				})
			}
		}
	}
}

// BenchmarkMixedGPUTrace describes the published mixed trace, for
// docs/benchmarks.md: go test ./internal/engine -run '^$' -bench
// MixedGPUTrace -benchtime 1x -v.
func BenchmarkMixedGPUTrace(b *testing.B) {
	for _, gap := range []time.Duration{0, simMixedBusyGap, simMixedCalmGap} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) {
			var tr []simTask
			for b.Loop() {
				tr = simMixedTrace(simSeed, simMixedTasks, gap)
			}
			count := map[int]int{}
			cardHours := map[int]float64{}
			for _, t := range tr {
				count[t.cards()]++
				cardHours[t.cards()] += t.dur.Hours() * float64(t.cards())
			}
			var area float64
			for _, t := range tr {
				area += float64(t.mib) * float64(t.cards()) * t.dur.Hours()
			}
			area /= simCards * simCapMiB
			load := 0.0
			if last := tr[len(tr)-1].arrive.Hours(); last > 0 {
				load = area / last
			}
			b.Logf("%d tasks: by cards 1/2/4/8: %d/%d/%d/%d, card-hours %.0f/%.0f/%.0f/%.0f; bound %.2f h (memory %.2f h, big tasks' card-time %.2f h); memory x time over capacity %.2f h; last arrival %.2f h (offered load %.0f%% of the memory)",
				len(tr), count[1], count[2], count[4], count[8], cardHours[1], cardHours[2], cardHours[4], cardHours[8],
				simMixedBound(tr).Hours(), simBound(tr).Hours(), simBigBound(tr).Hours(), area, tr[len(tr)-1].arrive.Hours(), 100*load)
			b.ReportMetric(simMixedBound(tr).Hours(), "bound-h")
		})
	}
}

// BenchmarkSimulationSeeds replays seeds 1-8 of every trace (the one-card
// batch and arrivals of sim_test.go, the mixed batch, busy and calm) under
// gpusched's rule with reservations (1m) and without, and reports the means
// over the seeds, for docs/benchmarks.md: one seed's makespan hangs on
// where its few longest tasks fall, so rules are compared on these.
// go test ./internal/engine -run '^$' -bench SimulationSeeds -benchtime 1x.
func BenchmarkSimulationSeeds(b *testing.B) {
	const seeds = 8
	traces := []struct {
		name  string
		trace func(seed uint64) []simTask
		bound func([]simTask) time.Duration
	}{
		{"onecard-batch", func(s uint64) []simTask { return simTrace(s, simTasks, 0) }, simBound},
		{"onecard-arrivals", func(s uint64) []simTask { return simTrace(s, simTasks, simArrGap) }, simBound},
		{"mixed-batch", func(s uint64) []simTask { return simMixedTrace(s, simMixedTasks, 0) }, simMixedBound},
		{"mixed-busy", func(s uint64) []simTask { return simMixedTrace(s, simMixedTasks, simMixedBusyGap) }, simMixedBound},
		{"mixed-calm", func(s uint64) []simTask { return simMixedTrace(s, simMixedTasks, simMixedCalmGap) }, simMixedBound},
	}
	for _, trc := range traces {
		for _, pol := range []simPolicy{simPolicies[0], simPolicies[2]} {
			b.Run(fmt.Sprintf("trace=%s/%s", trc.name, pol.name), func(b *testing.B) {
				var ratio, wide, big float64
				for b.Loop() {
					ratio, wide, big = 0, 0, 0
					for seed := uint64(1); seed <= seeds; seed++ {
						tr := trc.trace(seed)
						res, err := simulate(tr, pol, simOptions{})
						if err != nil {
							b.Fatal(err)
						}
						ratio += res.makespan.Seconds() / trc.bound(tr).Seconds() / seeds
						wide += res.maxWaitWide.Hours() / seeds
						big += res.maxWaitBig.Hours() / seeds
					}
				}
				b.ReportMetric(ratio, "x-bound")
				b.ReportMetric(wide, "maxwait-8gpu-h")
				b.ReportMetric(big, "maxwait-big-h")
			})
		}
	}
}
