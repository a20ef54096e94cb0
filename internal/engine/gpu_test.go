package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// fakeProbe is a machine of cards whose memory the fake runner's GPU
// attempts take and give back, as a real driver would show it.
type fakeProbe struct {
	mu      sync.Mutex // guards the fields below
	cards   []gpu.Card
	foreign map[int]int64 // by card index: memory held by processes not ours
	procs   map[procKey]gpu.Proc
	err     error
	calls   int
	ooms    []string // attempts that found no room: over-commits
}

func newFakeProbe(totals ...int64) *fakeProbe {
	p := &fakeProbe{foreign: map[int]int64{}, procs: map[procKey]gpu.Proc{}}
	for i, t := range totals {
		p.cards = append(p.cards, gpu.Card{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "Fake", TotalMiB: t})
	}
	return p
}

func (p *fakeProbe) used(c gpu.Card) int64 {
	u := p.foreign[c.Index]
	for _, pr := range p.procs {
		if pr.GPUUUID == c.UUID {
			u += pr.UsedMiB
		}
	}
	return u
}

func (p *fakeProbe) Snapshot(ctx context.Context) (gpu.Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return gpu.Snapshot{}, p.err
	}
	s := gpu.Snapshot{Time: time.Now()}
	for _, c := range p.cards {
		c.UsedMiB = p.used(c)
		c.FreeMiB = c.TotalMiB - c.UsedMiB
		s.Cards = append(s.Cards, c)
	}
	for _, pr := range p.procs {
		s.Procs = append(s.Procs, pr)
	}
	slices.SortFunc(s.Procs, func(a, b gpu.Proc) int { return cmp.Or(a.PID-b.PID, strings.Compare(a.GPUUUID, b.GPUUUID)) })
	return s, nil
}

// take registers pid using mib on the card, or fails like CUDA would.
func (p *fakeProbe) take(pid int, uuid string, mib int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.cards {
		if c.UUID == uuid {
			if free := c.TotalMiB - p.used(c); free < mib {
				p.ooms = append(p.ooms, fmt.Sprintf("pid %d wanted %d MiB on %s, %d free", pid, mib, uuid, free))
				return fmt.Errorf("CUDA out of memory: tried %d MiB, %d free", mib, free)
			}
			p.procs[procKey{pid, uuid}] = gpu.Proc{PID: pid, GPUUUID: uuid, UsedMiB: mib, PGID: pid}
			return nil
		}
	}
	return fmt.Errorf("no card %s", uuid)
}

// procKey names a process's use of one card: a process may use several.
type procKey struct {
	pid  int
	uuid string
}

// release gives back everything pid holds, on every card.
func (p *fakeProbe) release(pid int) {
	p.mu.Lock()
	maps.DeleteFunc(p.procs, func(k procKey, _ gpu.Proc) bool { return k.pid == pid })
	p.mu.Unlock()
}

func (p *fakeProbe) set(f func(p *fakeProbe)) {
	p.mu.Lock()
	f(p)
	p.mu.Unlock()
}

func gpuSettings() gpu.Settings {
	return gpu.Settings{SafetyMarginMiB: 500, Cooldown: 3 * time.Second, QuarantineAfter: 3, QuarantineFor: 10 * time.Minute}
}

func newGPUHarness(t *testing.T, probe *fakeProbe, cfg Config) *harness {
	t.Helper()
	if cfg.GPU.Settings.SafetyMarginMiB == 0 && cfg.GPU.Settings.Cooldown == 0 {
		cfg.GPU.Settings = gpuSettings()
	}
	if probe != nil {
		cfg.GPU.Probe = probe
	}
	if cfg.GPU.ReserveAfter == 0 {
		cfg.GPU.ReserveAfter = time.Hour
	}
	h := newHarness(t, cfg, nil)
	h.runner.gpus = probe
	return h
}

func gspec(id string, mib int64, deps ...string) *task.Spec {
	s := spec(id, deps...)
	s.Resources = task.ResourceRequest{Device: task.CUDA, MemoryMiB: mib}
	return s
}

func reading(p *fakeProbe) *Reading {
	s, err := p.Snapshot(context.Background())
	return &Reading{Snap: s, Err: err}
}

func TestGPUTasksPackWithoutOvercommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(24000, 16000)
		h := newGPUHarness(t, probe, Config{MaxParallel: 16})
		defer h.Close()
		var specs []*task.Spec
		for i := range 40 {
			s := gspec(fmt.Sprint("g", i), int64(1000+(i*2777)%9000))
			h.runner.script[s.ID] = []step{{dur: time.Duration(3+i%5) * time.Second}}
			specs = append(specs, s)
		}
		specs = append(specs, spec("cpu"))
		h.mustSubmit(t, specs...)
		recs := h.run(t)
		for id, r := range recs {
			if r.State != task.Complete {
				t.Errorf("%s: %s (%s)", id, r.State, r.Error)
			}
		}
		if len(probe.ooms) > 0 {
			t.Errorf("over-committed: %v", probe.ooms)
		}
		for _, r := range recs {
			a := r.Attempts[0]
			if r.ID == "cpu" {
				if a.GPU != nil {
					t.Errorf("cpu task got card %d", *a.GPU)
				}
				continue
			}
			if a.GPU == nil || a.GPUUUID != fmt.Sprintf("GPU-%d", *a.GPU) || a.MemRequestedMiB == 0 || a.MemPeakMiB > a.MemRequestedMiB {
				t.Errorf("%s attempt = %+v", r.ID, a)
			}
		}
		for _, r := range recs {
			if a := r.Attempts[0]; a.ReadyAt.IsZero() || a.Start.Before(a.ReadyAt) || r.Submitted.IsZero() || a.ReadyAt.Before(r.Submitted) {
				t.Errorf("%s: submitted %v, ready %v, started %v", r.ID, r.Submitted, a.ReadyAt, a.Start)
			}
		}
		samples := h.store.Samples()
		if len(samples) < 4 {
			t.Errorf("%d memory samples saved for a run of ~15s on 2 cards", len(samples))
		}
		for _, sm := range samples {
			if sm.ChargedMiB > sm.CapacityMiB || sm.TotalMiB == 0 {
				t.Errorf("sample %+v", sm)
			}
		}
		// Both cards were used at once.
		used := map[int]bool{}
		for _, g := range h.runner.gpuStarts {
			used[g.card] = true
		}
		if len(used) != 2 {
			t.Errorf("cards used: %v", used)
		}
	})
}

func TestObservedUseBeyondRequestKeepsOthersOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500) // capacity 40000 with the margin
		h := newGPUHarness(t, probe, Config{MaxParallel: 4, GPU: GPUConfig{PollInterval: time.Second}})
		defer h.Close()
		h.runner.script["greedy"] = []step{{dur: 20 * time.Second, use: 30000}}
		h.runner.script["second"] = []step{{dur: time.Second}}
		h.mustSubmit(t, gspec("greedy", 1000))
		// second arrives once greedy's real use has been seen.
		h.runner.hook = func(req AttemptRequest) {
			if req.Spec.ID == "greedy" {
				go func() {
					time.Sleep(5 * time.Second)
					if err := h.submit(t, gspec("second", 15000)); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		recs := h.run(t)
		if len(probe.ooms) > 0 {
			t.Fatalf("over-committed: %v", probe.ooms)
		}
		g, s := recs["greedy"].Attempts[0], recs["second"].Attempts[0]
		if s.Start.Before(g.End) {
			t.Errorf("second started at %v, before greedy (using 30000 of 40000) ended at %v", s.Start, g.End)
		}
		if g.MemPeakMiB != 30000 {
			t.Errorf("greedy peak = %d, want 30000", g.MemPeakMiB)
		}
	})
}

func TestForeignMemoryIsRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		probe.foreign[0] = 30000 // someone else's job
		h := newGPUHarness(t, probe, Config{})
		defer h.Close()
		h.mustSubmit(t, gspec("g", 15000))
		freedAt := time.Now().Add(30 * time.Second)
		time.AfterFunc(30*time.Second, func() { probe.set(func(p *fakeProbe) { p.foreign[0] = 0 }) })
		recs := h.run(t)
		if a := recs["g"].Attempts[0]; a.Start.Before(freedAt) {
			t.Errorf("g started at %v, before the foreign memory was freed at %v", a.Start, freedAt)
		}
		if len(probe.ooms) > 0 {
			t.Errorf("over-committed: %v", probe.ooms)
		}
	})
}

func TestExclusiveTaskHasItsCardAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(80000)
		h := newGPUHarness(t, probe, Config{MaxParallel: 8})
		defer h.Close()
		ex := gspec("ex", 0)
		ex.Resources.Exclusive = true
		h.runner.script["ex"] = []step{{dur: 10 * time.Second, use: 100}}
		h.mustSubmit(t, gspec("before", 1000), ex, gspec("after", 1000, "before"))
		recs := h.run(t)
		e := recs["ex"].Attempts[0]
		for _, id := range []string{"before", "after"} {
			a := recs[id].Attempts[0]
			if a.Start.Before(e.End) && a.End.After(e.Start) {
				t.Errorf("%s ran %v-%v, overlapping the exclusive task %v-%v", id, a.Start, a.End, e.Start, e.End)
			}
		}
	})
}

func TestCooldownAfterATaskLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 1})
		defer h.Close()
		h.mustSubmit(t, gspec("first", 1000), gspec("second", 1000))
		recs := h.run(t)
		gap := recs["second"].Attempts[0].Start.Sub(recs["first"].Attempts[0].End)
		if gap < 3*time.Second {
			t.Errorf("second started %v after first left the card; the cooldown is 3s", gap)
		}
		if gap > 5*time.Second {
			t.Errorf("second started %v after first left; the card was idle past its cooldown", gap)
		}
	})
}

func TestQuarantineAfterRepeatedFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 20500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 1, DefaultRetries: 5})
		defer h.Close()
		// Each of three tasks fails once on card 0 (the roomiest): the card
		// is quarantined, and their retries go to card 1.
		for _, id := range []string{"a", "b", "c"} {
			h.runner.script[id] = []step{{exit: 1}, {exit: 0}}
		}
		h.mustSubmit(t, gspec("a", 1000), gspec("b", 1000), gspec("c", 1000), gspec("d", 1000, "a", "b", "c"))
		h.run(t)
		var got []string
		for _, g := range h.runner.gpuStarts {
			got = append(got, fmt.Sprintf("%s@%d", g.task, g.card))
		}
		// a fails on 0 and retries on 1 (avoids the card it failed on); b
		// and c likewise; after the third failure card 0 is quarantined,
		// so d, which never failed, goes to card 1 too.
		want := []string{"a@0", "a@1", "b@0", "b@1", "c@0", "c@1", "d@1"}
		if !slices.Equal(got, want) {
			t.Errorf("placements = %v, want %v", got, want)
		}
		cards := h.store.Cards()
		if len(cards) != 2 || cards[0].State != gpu.CardQuarantined || !strings.Contains(cards[0].Reason, "3 failed attempts") {
			t.Errorf("saved cards = %+v, want card 0 quarantined", cards)
		}
		var q []string
		for _, ev := range h.events {
			if ev.Kind == CardQuarantined {
				q = append(q, fmt.Sprintf("%d %s", ev.Card, ev.Error))
			}
		}
		if len(q) != 1 || !strings.HasPrefix(q[0], "0 3 failed attempts in a row (until ") {
			t.Errorf("quarantine events = %q", q)
		}
	})
}

func TestBrokenProbeNeverStopsCPUTasksNorStartsGPUTasksBlind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		probe.err = errors.New("nvidia-smi timed out after 10s")
		h := newGPUHarness(t, probe, Config{MaxParallel: 4, GPU: GPUConfig{UnknownTimeout: time.Minute}})
		defer h.Close()
		h.mustSubmit(t, gspec("g", 100), spec("c1"), spec("c2", "c1"), gspec("after-g", 100, "g"))
		start := time.Now()
		recs := h.run(t)
		if recs["c1"].State != task.Complete || recs["c2"].State != task.Complete {
			t.Errorf("CPU tasks: %s, %s", recs["c1"].State, recs["c2"].State)
		}
		g := recs["g"]
		if g.State != task.Failed || len(g.Attempts) != 0 || !strings.Contains(g.Error, "GPU state unknown for 1m") ||
			!strings.Contains(g.Error, "nvidia-smi timed out") {
			t.Errorf("g = %+v, want failed without running after the unknown timeout", g)
		}
		if took := time.Since(start); took < time.Minute || took > 2*time.Minute {
			t.Errorf("gave up after %v, want about the 1m unknown timeout", took)
		}
		if recs["after-g"].State != task.Blocked {
			t.Errorf("after-g: %s", recs["after-g"].State)
		}
		if got := h.store.Meta(store.MetaGPUUnknown); !strings.Contains(got, "timed out") {
			t.Errorf("saved unknown reason = %q", got)
		}
	})
}

func TestProbeRecoveryLetsGPUTasksStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		probe.err = errors.New("driver gone")
		h := newGPUHarness(t, probe, Config{})
		defer h.Close()
		h.mustSubmit(t, gspec("g", 100))
		fixed := time.Now().Add(20 * time.Second)
		time.AfterFunc(20*time.Second, func() { probe.set(func(p *fakeProbe) { p.err = nil }) })
		recs := h.run(t)
		if r := recs["g"]; r.State != task.Complete || r.Attempts[0].Start.Before(fixed) {
			t.Errorf("g = %+v: want it complete, started after the driver came back at %v", r, fixed)
		}
	})
}

func TestNoGPUTasksNoProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{})
		defer h.Close()
		h.mustSubmit(t, spec("a"), spec("b", "a"))
		h.run(t)
		if probe.calls != 0 {
			t.Errorf("the probe ran %d times for a workflow without GPU tasks", probe.calls)
		}
	})
}

func TestPollingOnlyWhileGPUWorkRemains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{GPU: GPUConfig{PollInterval: time.Second}})
		defer h.Close()
		h.runner.script["g"] = []step{{dur: 10 * time.Second}}
		h.runner.script["cpu"] = []step{{dur: time.Minute}}
		h.mustSubmit(t, gspec("g", 100), spec("cpu"))
		h.run(t)
		// About one read a second while g ran (10s), one after it ended,
		// none during the 50s the CPU task ran alone.
		if probe.calls < 8 || probe.calls > 16 {
			t.Errorf("probe ran %d times, want about 11", probe.calls)
		}
	})
}

func TestOOMRetryAsksForMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{DefaultRetries: 2})
		defer h.Close()
		// The first attempt is admitted with 10000 but needs 25000: with
		// 20000 foreign it fails like CUDA. The retry must ask for more.
		probe.foreign[0] = 15000
		h.runner.script["g"] = []step{{use: 26000}, {}}
		h.mustSubmit(t, gspec("g", 10000))
		time.AfterFunc(time.Second, func() { probe.set(func(p *fakeProbe) { p.foreign[0] = 0 }) })
		r := h.run(t)["g"]
		if r.State != task.Complete || len(r.Attempts) != 2 {
			t.Fatalf("g = %s after %d attempts (%s)", r.State, len(r.Attempts), r.Error)
		}
		first, second := r.Attempts[0], r.Attempts[1]
		if first.MemRequestedMiB != 10000 || second.MemRequestedMiB <= 10000 {
			t.Errorf("requests %d then %d: the retry must ask for more", first.MemRequestedMiB, second.MemRequestedMiB)
		}
		if !strings.Contains(first.Error, "CUDA out of memory") || !strings.Contains(first.Error, fmt.Sprintf("grows from 10000 to %d MiB", second.MemRequestedMiB)) {
			t.Errorf("first attempt's error = %q", first.Error)
		}
	})
}

func TestSubmitRefusesRequestsNoCardHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(24000, 16000)
		h := newGPUHarness(t, probe, Config{})
		defer h.Close()
		s := gspec("huge", 30000)
		s.Normalize()
		err := h.Submit(Submission{Specs: []*task.Spec{s}, JSON: [][]byte{[]byte(`{}`)}, Reading: reading(probe)})
		var te *task.Error
		if !errors.As(err, &te) || te.TaskID != "huge" || te.Field != "resources.memory_mib" ||
			!strings.Contains(err.Error(), "needs 30000 MiB") || !strings.Contains(err.Error(), "card 0") {
			t.Errorf("Submit = %v", err)
		}
		// Within capacity (24000 less the 500 margin) it is accepted.
		ok := gspec("fits", 23500)
		ok.Normalize()
		if err := h.Submit(Submission{Specs: []*task.Spec{ok}, JSON: [][]byte{[]byte(`{}`)}, Reading: reading(probe)}); err != nil {
			t.Errorf("Submit of a task that fits: %v", err)
		}
	})
}

func TestVisibleGPUs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 40500, 40500)
		settings := gpuSettings()
		settings.Visible = []string{"GPU-2"}
		h := newGPUHarness(t, probe, Config{MaxParallel: 4, GPU: GPUConfig{Settings: settings}})
		defer h.Close()
		h.mustSubmit(t, gspec("a", 100), gspec("b", 100))
		h.run(t)
		for _, g := range h.runner.gpuStarts {
			if g.card != 2 {
				t.Errorf("%s ran on card %d; only card 2 is visible", g.task, g.card)
			}
		}
	})
}

func TestStarvingTaskGetsACard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 8, GPU: GPUConfig{ReserveAfter: 30 * time.Second, Settings: gpu.Settings{SafetyMarginMiB: 500}}})
		defer h.Close()
		// A stream of small tasks keeps the card partly busy forever; the
		// big one needs it nearly empty.
		h.mustSubmit(t, gspec("big", 35000))
		var small []*task.Spec
		for i := range 60 {
			s := gspec(fmt.Sprint("s", i), 10000)
			h.runner.script[s.ID] = []step{{dur: 10 * time.Second}}
			small = append(small, s)
		}
		// big is first in the queue; small ones keep arriving.
		for i, s := range small {
			time.AfterFunc(time.Duration(i)*2*time.Second, func() {
				if err := h.submit(t, s); err != nil {
					t.Error(err)
				}
			})
		}
		// Keep big out at first: the card is full of small tasks.
		probe.set(func(p *fakeProbe) { p.foreign[0] = 10000 })
		time.AfterFunc(5*time.Second, func() { probe.set(func(p *fakeProbe) { p.foreign[0] = 0 }) })
		recs := h.run(t)
		b := recs["big"]
		if b.State != task.Complete {
			t.Fatalf("big: %s", b.State)
		}
		last := time.Time{}
		for _, r := range recs {
			if r.ID != "big" && r.Attempts[0].Start.After(last) {
				last = r.Attempts[0].Start
			}
		}
		if !b.Attempts[0].Start.Before(last) {
			t.Errorf("big started at %v, after every small task (last at %v): it starved", b.Attempts[0].Start, last)
		}
		if len(probe.ooms) > 0 {
			t.Errorf("over-committed: %v", probe.ooms)
		}
	})
}

// nvidia-smi answers, but every card's memory reads [N/A]: GPU tasks wait,
// and after gpu_unknown_timeout they fail exactly as when nvidia-smi
// fails; the observer hears once that the GPUs cannot be read.
func TestEveryCardUnreadableTimesOutLikeAFailingProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 40500)
		for i := range probe.cards {
			probe.cards[i].Problem = "memory.used is [N/A]"
		}
		h := newGPUHarness(t, probe, Config{MaxParallel: 2, GPU: GPUConfig{UnknownTimeout: time.Minute}})
		defer h.Close()
		h.mustSubmit(t, gspec("g", 100), spec("c"))
		start := time.Now()
		recs := h.run(t)
		if recs["c"].State != task.Complete {
			t.Errorf("CPU task: %s", recs["c"].State)
		}
		g := recs["g"]
		if g.State != task.Failed || len(g.Attempts) != 0 || !strings.Contains(g.Error, "GPU state unknown for 1m") ||
			!strings.Contains(g.Error, "no visible card has a usable memory reading") {
			t.Errorf("g = %+v, want failed without running after the unknown timeout", g)
		}
		if took := time.Since(start); took < time.Minute {
			t.Errorf("gave up after %v, before the 1m unknown timeout", took)
		}
		var unknown []string
		for _, ev := range h.events {
			if ev.Kind == GPUUnknown {
				unknown = append(unknown, ev.Error)
			}
		}
		if len(unknown) != 1 || !strings.HasSuffix(unknown[0], "; GPU tasks wait") {
			t.Errorf("gpu-unknown events = %q, want one saying GPU tasks wait", unknown)
		}
	})
}

// The observer hears when the GPUs become unreadable and when they can be
// read again; CPU tasks never wait for nvidia-smi.
func TestGPUUnknownThenKnownEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		probe.err = errors.New("nvidia-smi timed out after 10s (compute-apps query)")
		h := newGPUHarness(t, probe, Config{MaxParallel: 2})
		defer h.Close()
		h.runner.script["c"] = []step{{dur: time.Second}}
		h.mustSubmit(t, gspec("g", 100), spec("c"))
		time.AfterFunc(20*time.Second, func() { probe.set(func(p *fakeProbe) { p.err = nil }) })
		recs := h.run(t)
		if recs["g"].State != task.Complete || recs["c"].State != task.Complete {
			t.Fatalf("g %s, c %s", recs["g"].State, recs["c"].State)
		}
		var kinds []string
		for _, ev := range h.events {
			if ev.Kind == GPUUnknown {
				kinds = append(kinds, "unknown: "+ev.Error)
			}
			if ev.Kind == GPUKnown {
				kinds = append(kinds, "known")
			}
		}
		want := []string{"unknown: nvidia-smi timed out after 10s (compute-apps query); GPU tasks wait", "known"}
		if !slices.Equal(kinds, want) {
			t.Errorf("GPU events = %q, want %q", kinds, want)
		}
		if c := recs["c"].Attempts[0]; c.Start.After(recs["g"].Attempts[0].Start) {
			t.Errorf("the CPU task started at %v, after the GPU task (%v): it waited for nvidia-smi", c.Start, recs["g"].Attempts[0].Start)
		}
	})
}

// Without a reading at submit, a request no card can hold is accepted, and
// fails, with the message Submit gives, when the cards are first seen.
func TestRequestNoCardHoldsFailsAtFirstReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(24000)
		h := newGPUHarness(t, probe, Config{MaxParallel: 2})
		defer h.Close()
		h.mustSubmit(t, gspec("huge", 30000), gspec("fits", 1000), spec("after", "huge"))
		recs := h.run(t)
		huge := recs["huge"]
		if huge.State != task.Failed || len(huge.Attempts) != 0 ||
			!strings.HasPrefix(huge.Error, "resources.memory_mib: needs 30000 MiB, more than any card can give") {
			t.Errorf("huge = %+v", huge)
		}
		if recs["fits"].State != task.Complete || recs["after"].State != task.Blocked {
			t.Errorf("fits %s, after %s", recs["fits"].State, recs["after"].State)
		}
		// Once the cards are known, Submit refuses such a request at once.
		late := gspec("late", 30000)
		late.Normalize()
		err := h.Submit(Submission{Specs: []*task.Spec{late}, JSON: [][]byte{[]byte(`{}`)}})
		if !errors.Is(err, task.ErrInvalidTask) || !strings.Contains(err.Error(), "needs 30000 MiB") {
			t.Errorf("Submit after the cards are known = %v", err)
		}
	})
}

// A task that runs out of GPU memory while within its budget, after
// another process grew on the card, is not at fault: its request stays,
// the failure does not use up a retry nor count towards the card's
// quarantine, and its error says what happened.
func TestOOMFromSomeoneElsesGrowth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{GPU: GPUConfig{Settings: gpu.Settings{SafetyMarginMiB: 500, QuarantineAfter: 1, QuarantineFor: time.Hour}}})
		defer h.Close()
		h.runner.script["g"] = []step{{use: 10000, oomAt: 10 * time.Second, tried: 5000}, {}}
		g := gspec("g", 20000)
		g.Retries = task.NoRetries
		h.mustSubmit(t, g)
		time.AfterFunc(5*time.Second, func() { probe.set(func(p *fakeProbe) { p.foreign[0] = 30000 }) })
		time.AfterFunc(20*time.Second, func() { probe.set(func(p *fakeProbe) { p.foreign[0] = 0 }) })
		r := h.run(t)["g"]
		if r.State != task.Complete || len(r.Attempts) != 2 {
			t.Fatalf("g = %s after %d attempts (%s)", r.State, len(r.Attempts), r.Error)
		}
		first, second := r.Attempts[0], r.Attempts[1]
		if !first.NotCharged || !strings.Contains(first.Error, "another process took the card's memory (foreign 0 -> 30000 MiB)") ||
			strings.Contains(first.Error, "grows") {
			t.Errorf("first attempt: not charged %v, error %q", first.NotCharged, first.Error)
		}
		if second.MemRequestedMiB != 20000 {
			t.Errorf("the retry asked for %d MiB, want the same 20000", second.MemRequestedMiB)
		}
		for _, ev := range h.events {
			if ev.Kind == CardQuarantined {
				t.Errorf("card quarantined for someone else's growth: %s", ev.Error)
			}
		}
	})
}

// A task that outgrows its own budget and has no retry left fails without
// promising a larger request it will never get.
func TestOOMWithoutRetryPromisesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500)
		h := newGPUHarness(t, probe, Config{})
		defer h.Close()
		h.runner.script["g"] = []step{{use: 10000, oomAt: 10 * time.Second, tried: 35000}}
		g := gspec("g", 10000)
		g.Retries = task.NoRetries
		h.mustSubmit(t, g)
		r := h.run(t)["g"]
		if r.State != task.Failed || len(r.Attempts) != 1 {
			t.Fatalf("g = %s after %d attempts", r.State, len(r.Attempts))
		}
		if e := r.Attempts[0].Error; strings.Contains(e, "grows") || !strings.Contains(e, "CUDA out of memory (peak seen 10000 MiB, request 10000 MiB)") || r.Attempts[0].NotCharged {
			t.Errorf("error %q (not charged %v)", e, r.Attempts[0].NotCharged)
		}
	})
}
