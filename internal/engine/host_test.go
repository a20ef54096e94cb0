package engine

import (
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// withHost gives s the cores, host memory and custom resources asked.
func withHost(s *task.Spec, cpus int, mib int64, counters map[string]int) *task.Spec {
	s.Resources.CPUs, s.Resources.MemoryMiBHost, s.Resources.Counters = cpus, mib, counters
	return s
}

// Three tasks of 2 cores on 4: two run, the third waits for cores, and
// says so, until one of them ends.
func TestHostCoresBoundWhatRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 10, Host: HostConfig{CPUs: 4}}, nil)
		defer h.Close()
		for _, id := range []string{"a", "b", "c"} {
			h.runner.script[id] = []step{{dur: 10 * time.Second}}
			h.mustSubmit(t, withHost(spec(id), 2, 0, nil))
		}
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		checkWait(t, h, "c", task.WaitCPU, "needs 2 cpus, more than is free now (4 in all)")
		time.Sleep(20 * time.Second)
		recs := byID(h.Records())
		for _, id := range []string{"a", "b", "c"} {
			if recs[id].State != task.Complete {
				t.Errorf("%s is %s, want complete", id, recs[id].State)
			}
		}
		if c, a := recs["c"].Attempts[0], recs["a"].Attempts[0]; c.Start.Before(a.End) {
			t.Errorf("c started at %s, before a ended at %s", c.Start, a.End)
		}
		if h.runner.maxRunning != 2 {
			t.Errorf("%d ran at once, want 2", h.runner.maxRunning)
		}
	})
}

// A custom resource of one unit runs its takers one at a time; a task
// that takes none runs beside them.
func TestHostCounterSerializes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 10, Host: HostConfig{CPUs: 8, Counters: map[string]int{"licenses": 1}}}, nil)
		defer h.Close()
		one := map[string]int{"licenses": 1}
		for _, id := range []string{"l1", "l2", "free"} {
			h.runner.script[id] = []step{{dur: 10 * time.Second}}
		}
		h.mustSubmit(t, withHost(spec("l1"), 0, 0, one), withHost(spec("l2"), 0, 0, one), spec("free"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		checkWait(t, h, "l2", task.WaitResource, `needs 1 of "licenses", more than is free now (1 in all)`)
		time.Sleep(30 * time.Second)
		recs := byID(h.Records())
		l1, l2, free := recs["l1"].Attempts[0], recs["l2"].Attempts[0], recs["free"].Attempts[0]
		if l2.Start.Before(l1.End) || free.Start.After(l1.Start) {
			t.Errorf("l1 %s-%s, l2 %s-%s, free from %s: want l2 after l1, free beside l1", l1.Start, l1.End, l2.Start, l2.End, free.Start)
		}
	})
}

// Host memory budgets add up to the capacity; a task that declares none
// takes none.
func TestHostMemoryBudgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 10, Host: HostConfig{CPUs: 8, MemoryMiB: 10000}}, nil)
		defer h.Close()
		for _, id := range []string{"m1", "m2", "none"} {
			h.runner.script[id] = []step{{dur: 10 * time.Second}}
		}
		h.mustSubmit(t, withHost(spec("m1"), 0, 6000, nil), withHost(spec("m2"), 0, 6000, nil), spec("none"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		checkWait(t, h, "m2", task.WaitHostMemory, "needs 6000 MiB of host memory, more than is free now (10000 MiB in all)")
		checkWait(t, h, "none", task.NotWaiting, "")
		time.Sleep(30 * time.Second)
		recs := byID(h.Records())
		if m1, m2 := recs["m1"].Attempts[0], recs["m2"].Attempts[0]; m2.Start.Before(m1.End) || m2.HostMemRequestedMiB != 6000 {
			t.Errorf("m1 %+v, m2 %+v: want m2 after m1, admitted with 6000 MiB", m1, m2)
		}
	})
}

// A task starving for cores holds them: the small tasks behind it wait,
// saying for whom, and it starts as soon as what runs ends.
func TestHostHoldForAStarvingTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 10, Host: HostConfig{CPUs: 4, ReserveAfter: time.Minute}}, nil)
		defer h.Close()
		h.runner.script["long"] = []step{{dur: 2 * time.Minute}}
		h.runner.script["big"] = []step{{dur: time.Second}}
		h.mustSubmit(t, spec("long"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		h.mustSubmit(t, withHost(spec("big"), 4, 0, nil))
		// Small tasks keep coming; before the big one starves they run
		// beside the long one.
		small := 0
		submitSmall := func() string {
			small++
			id := "s" + string(rune('a'+small))
			h.runner.script[id] = []step{{dur: 20 * time.Second}}
			h.mustSubmit(t, spec(id))
			return id
		}
		first := submitSmall()
		time.Sleep(time.Second)
		checkWait(t, h, first, task.NotWaiting, "")
		time.Sleep(70 * time.Second) // big has waited over a minute
		late := submitSmall()
		checkWait(t, h, late, task.WaitCPU, `held for "big", which has waited longest`)
		time.Sleep(3 * time.Minute)
		recs := byID(h.Records())
		if b, l := recs["big"], recs[late]; b.State != task.Complete || l.State != task.Complete ||
			!b.Attempts[0].Start.Before(l.Attempts[0].Start) || b.Attempts[0].Start.Before(recs["long"].Attempts[0].End) {
			t.Errorf("big %+v, %s %+v: want big first, once long ended", b.Attempts, late, l.Attempts)
		}
	})
}

// Tasks that could never start are refused at submit; a task whose
// executor runs it elsewhere takes no core here, so it is not.
func TestHostRefusedAtSubmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Host: HostConfig{CPUs: 4, MemoryMiB: 8000, Counters: map[string]int{"licenses": 2}},
			PlacesGPUs: func(sp *task.Spec) bool { return sp.Executor == "slurm" }}, nil)
		defer h.Close()
		for _, tc := range []struct {
			spec  *task.Spec
			field string
			says  string
		}{
			{withHost(spec("wide"), 8, 0, nil), "resources.cpus", "asks for 8 cpus; this scheduler's tasks may take 4 in all"},
			{withHost(spec("fat"), 1, 9000, nil), "resources.memory_mib_host", "asks for 9000 MiB; this scheduler's tasks may take 8000 MiB"},
			{withHost(spec("typo"), 1, 0, map[string]int{"licences": 1}), "resources.licences", `"licences" is not a resource declared under scheduling.resources (licenses)`},
			{withHost(spec("greedy"), 1, 0, map[string]int{"licenses": 3}), "resources.licenses", `asks for 3 of "licenses", which has 2 in all`},
		} {
			err := h.submit(t, tc.spec)
			var te *task.Error
			if !errors.As(err, &te) || te.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("submit %s: %v; want an error on %s saying %q", tc.spec.ID, err, tc.field, tc.says)
			}
		}
		away := withHost(spec("away"), 64, 1<<20, map[string]int{"licenses": 1})
		away.Executor = "slurm"
		if err := h.submit(t, away); err != nil {
			t.Errorf("a task run elsewhere: %v", err)
		}
		if recs := h.Records(); len(recs) != 1 {
			t.Errorf("records = %+v: a refused batch left tasks", recs)
		}
	})
}

// An adopted attempt takes its share as it is adopted, before anything
// new starts: a task that needs the cores it holds waits until it ends.
func TestHostAdoptedAttemptTakesItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		runningRow(t, st, withHost(spec("old"), 4, 0, nil), since, nil, 0)
		end := make(chan struct{})
		r := &fakeRunner{recovered: stillRunning(since, end, 0)}
		h := newHarness(t, Config{Runner: r, MaxParallel: 4, Host: HostConfig{CPUs: 4}}, st)
		defer h.Close()
		h.mustSubmit(t, withHost(spec("old"), 4, 0, nil), spec("new"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		checkWait(t, h, "new", task.WaitCPU, "needs 1 cpu")
		close(end)
		time.Sleep(5 * time.Second)
		if recs := byID(h.Records()); recs["new"].State != task.Complete {
			t.Errorf("new is %s once the adopted attempt ended, want complete", recs["new"].State)
		}
	})
}

// fakeRSS answers samples with what use says each group holds, counting
// the samples taken.
type fakeRSS struct {
	mu      sync.Mutex
	use     map[int]int64
	samples int
}

// taken is how many samples were taken.
func (f *fakeRSS) taken() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.samples
}

func (f *fakeRSS) sample(pgids []int) (map[int]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.samples++
	out := map[int]int64{}
	for _, g := range pgids {
		if mib, ok := f.use[g]; ok {
			out[g] = mib
		}
	}
	return out, nil
}

// Running attempts' memory is sampled: each attempt's peak is saved with
// it, and one far over its budget is written as soon as it is seen, while
// it runs. Nothing is sampled while nothing runs.
func TestHostRSSPeaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rss := &fakeRSS{use: map[int]int64{}}
		h := newHarness(t, Config{MaxParallel: 4, Host: HostConfig{SampleRSS: rss.sample, SampleEvery: 2 * time.Second}}, nil)
		defer h.Close()
		h.runner.script["over"] = []step{{dur: 20 * time.Second}}
		h.runner.script["within"] = []step{{dur: 20 * time.Second}}
		h.mustSubmit(t, withHost(spec("over"), 0, 1000, nil), withHost(spec("within"), 0, 1000, nil))
		time.Sleep(10 * time.Second)
		if n := rss.taken(); n != 0 {
			t.Errorf("%d samples while nothing ran", n)
		}
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(time.Second)
		pid := map[string]int{}
		for _, r := range h.Records() {
			pid[r.ID] = r.Attempts[0].PID
		}
		rss.mu.Lock()
		rss.use[pid["over"]], rss.use[pid["within"]] = 3000, 700
		rss.mu.Unlock()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		saved := func(id string) task.Attempt {
			r, _, _ := h.store.LookupTask(id)
			if len(r.Attempts) == 0 {
				return task.Attempt{}
			}
			return r.Attempts[0]
		}
		if a := saved("over"); a.RSSPeakMiB != 3000 || a.HostMemoryNote() != "peak RSS 3000 MiB, 3.0x its memory_mib_host of 1000 MiB" {
			t.Errorf("while running, over is saved as %+v; want its peak of 3000 MiB written", a)
		}
		if a := saved("within"); a.RSSPeakMiB != 0 {
			t.Errorf("while running, within is saved with a peak of %d MiB; want it written at its end", a.RSSPeakMiB)
		}
		rss.mu.Lock()
		rss.use[pid["within"]] = 900 // its peak grows
		rss.mu.Unlock()
		time.Sleep(30 * time.Second)
		if a := saved("within"); a.RSSPeakMiB != 900 || a.OverHostMemory() {
			t.Errorf("within ended saved as %+v; want a peak of 900 MiB, not over", a)
		}
		n := rss.taken()
		time.Sleep(time.Minute)
		if m := rss.taken(); m != n {
			t.Errorf("%d samples after everything ended", m-n)
		}
	})
}

// What the loop counts as free comes back whole once everything ends,
// after starts, exits, cancellations and failures.
func TestHostFreeComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := HostConfig{CPUs: 6, MemoryMiB: 10000, Counters: map[string]int{"licenses": 2}}
		h := newHarness(t, Config{MaxParallel: 3, DefaultRetries: 1, Host: cfg}, nil)
		defer h.Close()
		h.runner.script["fails"] = []step{{dur: time.Second, exit: 3}, {dur: time.Second, exit: 3}}
		h.mustSubmit(t, withHost(spec("fails"), 2, 3000, map[string]int{"licenses": 1}),
			withHost(spec("ok"), 3, 5000, map[string]int{"licenses": 2}), spec("plain"), withHost(spec("after", "ok"), 6, 10000, nil))
		h.run(t)
		done := make(chan HostView, 1)
		h.send(funcEvent(func(e *Engine) { v := e.host.view; v.Counters = maps.Clone(v.Counters); done <- v }))
		v := <-done
		if v.CPUs != 6 || v.MemoryMiB != 10000 || !maps.Equal(v.Counters, map[string]int{"licenses": 2}) || len(h.host.held) != 0 {
			t.Errorf("free after the run: %+v (held %d); want the whole capacity", v, len(h.host.held))
		}
	})
}

// funcEvent runs a function on the loop.
type funcEvent func(e *Engine)

func (f funcEvent) apply(e *Engine) { f(e) }

// A task whose executor places it elsewhere takes none of this machine's
// cores: it runs beside a local task that takes them all.
func TestHostPlacedTaskTakesNoCore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4, Host: HostConfig{CPUs: 1},
			PlacesGPUs: func(sp *task.Spec) bool { return sp.Executor == "slurm" }}, nil)
		defer h.Close()
		away := withHost(spec("away"), 8, 1<<20, nil)
		away.Executor = "slurm"
		h.runner.script["away"] = []step{{dur: 10 * time.Second}}
		h.runner.script["here"] = []step{{dur: 10 * time.Second}}
		h.mustSubmit(t, away, spec("here"))
		h.run(t)
		if h.runner.maxRunning != 2 {
			t.Errorf("%d ran at once, want both", h.runner.maxRunning)
		}
		if a := byID(h.Records())["away"].Attempts[0]; a.HostMemRequestedMiB != 0 {
			t.Errorf("the placed task's attempt says a host budget of %d MiB here", a.HostMemRequestedMiB)
		}
	})
}
