package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// t0 is when synthetic runs start.
var t0 = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

// synth returns a plausible run of n tasks on 4 cards of 80 GB (3 tasks at
// most per card) and 8 CPU slots, as the state database would hold it: 60%
// GPU tasks, durations from 5s to 10m, a third of the tasks depending on an
// earlier one, some failures with retries, timeouts, a cancellation, an
// interrupted attempt, and a memory sample per card every 10s; read while
// it runs (Live), near its end. The same n and seed give the same data.
func synth(n int, seed uint64) Data {
	rng := rand.New(rand.NewPCG(seed, 1))
	const cards, perCard, cpuSlots = 4, 3, 8
	gpuFree := make([]time.Time, cards*perCard)
	cpuFree := make([]time.Time, cpuSlots)
	for i := range gpuFree {
		gpuFree[i] = t0
	}
	for i := range cpuFree {
		cpuFree[i] = t0
	}
	earliest := func(free []time.Time) int {
		best := 0
		for i, f := range free {
			if f.Before(free[best]) {
				best = i
			}
		}
		return best
	}
	type run struct {
		card       int
		start, end time.Time
		mib        int64
	}
	var runs []run
	d := Data{RunDir: "/runs/synthetic", Live: true, Location: time.UTC}
	ends := make([]time.Time, n)
	for i := range n {
		id := fmt.Sprintf("task-%05d", i)
		isGPU := rng.Float64() < 0.6
		var mib int64
		sp := map[string]any{"id": id}
		if isGPU {
			mib = int64(4+rng.IntN(21)) * 1024 // 3 fit on a card with its foreign use
			sp["resources"] = map[string]any{"device": "cuda", "memory_mib": mib}
		}
		ready := t0.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		if i > 0 && rng.Float64() < 0.33 {
			dep := rng.IntN(i)
			sp["dependencies"] = []string{fmt.Sprintf("task-%05d", dep)}
			if ends[dep].After(ready) {
				ready = ends[dep]
			}
		}
		spec, _ := json.Marshal(sp)
		r := store.Row{Seq: int64(i), Spec: spec, Record: task.Record{ID: id, State: task.Complete, Submitted: t0}}
		attempts := 1
		fate := rng.Float64()
		if fate < 0.06 {
			attempts = 2
		}
		for a := 1; a <= attempts; a++ {
			dur := time.Duration(5*math.Exp(rng.Float64()*math.Log(120))*1000) * time.Millisecond
			var slot int
			var free []time.Time
			if isGPU {
				free = gpuFree
			} else {
				free = cpuFree
			}
			slot = earliest(free)
			start := ready
			if free[slot].After(start) {
				start = free[slot]
			}
			start = start.Add(time.Duration(rng.IntN(500)) * time.Millisecond)
			end := start.Add(dur)
			free[slot] = end
			at := task.Attempt{Number: a, Start: start, End: end, ReadyAt: ready,
				LogPath: filepath.Join("/runs/synthetic/logs", id, "attempt-"+strconv.Itoa(a)+".log")}
			zero, one := 0, 1
			at.ExitCode = &zero
			if isGPU {
				c := slot / perCard
				at.GPU = &c
				at.GPUUUID = fmt.Sprintf("GPU-synthetic-%d", c)
				at.MemRequestedMiB = mib
				at.MemPeakMiB = mib * int64(80+rng.IntN(25)) / 100
				runs = append(runs, run{card: c, start: start, end: end, mib: mib})
			}
			switch {
			case attempts == 2 && a == 1:
				at.ExitCode = &one
				at.Error = "exit status 1"
				if isGPU {
					at.Error = "CUDA out of memory. Tried to allocate 2.00 GiB"
				}
			case fate > 0.985 && fate <= 0.99:
				at.ExitCode, at.Signal, at.TimedOut = nil, "SIGKILL", true
				r.State, r.Error = task.Failed, "timed out after "+dur.Round(time.Second).String()
			case fate > 0.99 && fate <= 0.993:
				at.ExitCode, at.Signal, at.Cancelled = nil, "SIGTERM", true
				r.State, r.Error = task.Cancelled, "cancelled"
			case fate > 0.993 && fate <= 0.995:
				at.ExitCode, at.Interrupted = nil, true
				r.State = task.Pending
			case fate > 0.97:
				at.ExitCode = &one
				r.State, r.Error, r.ExitCode = task.Failed, "exit status 1", &one
			}
			if r.State == task.Complete {
				r.ExitCode = &zero
			}
			r.Attempts = append(r.Attempts, at)
			ready = end
		}
		ends[i] = ready
		d.Rows = append(d.Rows, r)
	}
	// Dependents of failed tasks would be blocked; a handful is enough.
	for i := range min(3, n) {
		r := &d.Rows[n-1-i]
		if len(r.Attempts) == 0 || r.State != task.Complete {
			continue
		}
		r.Attempts, r.State, r.ExitCode, r.BlockedBy = nil, task.Blocked, nil, "task-00000"
		r.Error = "blocked: dependency task-00000 failed"
	}

	// The report is made while the run goes: at 97% of the schedule.
	// Attempts that had not started yet are not there, those that had not
	// ended are running, the charts stop at now.
	var end time.Time
	for _, e := range ends {
		if e.After(end) {
			end = e
		}
	}
	last := t0.Add(end.Sub(t0) * 97 / 100)
	d.Now = last
	for i := range d.Rows {
		r := &d.Rows[i]
		for j := 0; j < len(r.Attempts); j++ {
			a := &r.Attempts[j]
			switch {
			case a.Start.After(last):
				r.Attempts = r.Attempts[:j]
				r.State, r.ExitCode, r.Error = task.Pending, nil, ""
			case a.End.After(last):
				a.End, a.ExitCode, a.Signal, a.Error, a.TimedOut, a.Cancelled, a.Interrupted = time.Time{}, nil, "", "", false, false, false
				r.Attempts = r.Attempts[:j+1]
				r.State, r.ExitCode, r.Error = task.Running, nil, ""
			}
		}
	}
	runs = slices.DeleteFunc(runs, func(r run) bool { return r.start.After(last) })
	for c := range cards {
		d.Cards = append(d.Cards, gpu.CardView{Index: c, UUID: fmt.Sprintf("GPU-synthetic-%d", c),
			Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, CapacityMiB: 81047})
	}
	// Memory: charged is what the tasks running at each sample asked for,
	// observed 90% of it, card 0 has 6000 MiB of foreign use.
	type ev struct {
		at   time.Time
		card int
		mib  int64
	}
	var evs []ev
	for _, r := range runs {
		evs = append(evs, ev{r.start, r.card, r.mib}, ev{r.end, r.card, -r.mib})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Compare(a.at.UnixNano(), b.at.UnixNano()) })
	charged := make([]int64, cards)
	k := 0
	for at := t0; !at.After(last); at = at.Add(10 * time.Second) {
		for k < len(evs) && !evs[k].at.After(at) {
			charged[evs[k].card] += evs[k].mib
			k++
		}
		for c := range cards {
			foreign := int64(0)
			if c == 0 {
				foreign = 6000
			}
			obs := charged[c] * 9 / 10
			d.Samples = append(d.Samples, store.Sample{At: at, Index: c, TotalMiB: 81559, UsedMiB: foreign + obs,
				ForeignMiB: foreign, ObservedMiB: obs, ChargedMiB: charged[c], CapacityMiB: 81047})
		}
	}
	return d
}

// TestWriteSynthetic writes synthetic reports of the sizes listed in
// $REPORT_SYNTHETIC (e.g. "1000,10000") to $REPORT_SYNTHETIC_DIR, to look at
// them or time them in a browser: synthetic-N.html (synth) and
// synthetic-N-resumed.html (synthResumed, 10 minutes away); skipped
// otherwise.
func TestWriteSynthetic(t *testing.T) {
	sizes, dir := os.Getenv("REPORT_SYNTHETIC"), os.Getenv("REPORT_SYNTHETIC_DIR")
	if sizes == "" || dir == "" {
		t.Skip("set REPORT_SYNTHETIC=1000,10000 and REPORT_SYNTHETIC_DIR=DIR to write synthetic reports")
	}
	var ns []int
	if err := json.Unmarshal([]byte("["+sizes+"]"), &ns); err != nil {
		t.Fatalf("REPORT_SYNTHETIC=%q: %v", sizes, err)
	}
	for _, n := range ns {
		for name, d := range map[string]Data{"synthetic-%d.html": synth(n, 1), "synthetic-%d-resumed.html": synthResumed(n, 1, 10*time.Minute)} {
			path := filepath.Join(dir, fmt.Sprintf(name, n))
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := Write(f, d); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			t.Logf("%s: %d bytes in %s", path, st.Size(), time.Since(start))
		}
	}
}

// synthResumed is synth(n, seed) whose scheduler died at the moment synth
// reads it, resumed gap later: the attempts it was running are recorded
// as interrupted at the resumption, every task is submitted again, and
// the tasks that had not completed run once more (complete, 5s to 1m
// each, one at a time per card and per CPU slot), with memory samples
// every 10s. Read after the second run ended, with no scheduler running.
func synthResumed(n int, seed uint64, gap time.Duration) Data {
	d := synth(n, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	crash := d.Now
	resume := crash.Add(gap)
	submit := resume.Add(50 * time.Millisecond)
	const cards, cpuSlots = 4, 8
	free := make([]time.Time, cards+cpuSlots) // cards first, then CPU slots
	for i := range free {
		free[i] = submit
	}
	type held struct {
		card       int
		start, end time.Time
		mib        int64
	}
	var runs []held
	end := submit
	for i := range d.Rows {
		r := &d.Rows[i]
		r.Submitted = submit
		for j := range r.Attempts {
			a := &r.Attempts[j]
			// synth's own "interrupted" attempts end inside its run, which
			// no real one does: make them plain failures here.
			a.Interrupted = a.Interrupted && a.Ended()
			if a.Interrupted {
				a.Interrupted, a.Signal = false, "SIGKILL"
			}
			if !a.Ended() {
				a.End, a.Interrupted, a.Error = resume, true, "interrupted: the scheduler stopped during the attempt"
			}
		}
		if r.State == task.Complete || r.State == task.Blocked {
			continue
		}
		var sp spec
		_ = json.Unmarshal(r.Spec, &sp)
		slot, card := cards+i%cpuSlots, -1
		if sp.Resources.Device == string(task.CUDA) {
			slot, card = i%cards, i%cards
		}
		start := free[slot].Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		stop := start.Add(time.Duration(5+rng.IntN(55)) * time.Second)
		free[slot] = stop
		if stop.After(end) {
			end = stop
		}
		zero := 0
		a := task.Attempt{Number: len(r.Attempts) + 1, ReadyAt: submit, Start: start, End: stop, ExitCode: &zero}
		if card >= 0 {
			a.GPU, a.GPUUUID = &card, fmt.Sprintf("GPU-synthetic-%d", card)
			a.MemRequestedMiB, a.MemPeakMiB = sp.Resources.MemoryMiB, sp.Resources.MemoryMiB*9/10
			runs = append(runs, held{card, start, stop, sp.Resources.MemoryMiB})
		}
		r.Attempts = append(r.Attempts, a)
		r.State, r.ExitCode, r.Error, r.Rerun = task.Complete, &zero, "", "was "+r.State.String()
	}
	for at := resume.Add(time.Second); !at.After(end); at = at.Add(10 * time.Second) {
		for c := range cards {
			var charged int64
			for _, h := range runs {
				if h.card == c && !h.start.After(at) && h.end.After(at) {
					charged += h.mib
				}
			}
			foreign := int64(0)
			if c == 0 {
				foreign = 6000
			}
			obs := charged * 9 / 10
			d.Samples = append(d.Samples, store.Sample{At: at, Index: c, TotalMiB: 81559, UsedMiB: foreign + obs,
				ForeignMiB: foreign, ObservedMiB: obs, ChargedMiB: charged, CapacityMiB: 81047})
		}
	}
	d.Live, d.Now = false, end.Add(time.Minute)
	return d
}
