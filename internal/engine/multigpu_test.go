package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// gspecN is a GPU task needing mib on each of n cards.
func gspecN(id string, n int, mib int64, deps ...string) *task.Spec {
	s := gspec(id, mib, deps...)
	s.Resources.GPUs = n
	return s
}

// topoProbe is a fakeProbe that also answers the topology question.
type topoProbe struct {
	*fakeProbe
	mu    sync.Mutex // guards the fields below
	topo  *gpu.Topology
	err   error
	asked int
}

func (p *topoProbe) Topology(ctx context.Context) (*gpu.Topology, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	return p.topo, p.err
}

// A task on two cards starts on two cards at once, sees both in its
// request, and is charged on both: a one-card task that would fit on
// either beside it waits until it ends; one that fits beside nothing
// else of it starts at once.
func TestTaskOnTwoCards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 40500, 40500) // capacity 40000 each
		h := newGPUHarness(t, probe, Config{MaxParallel: 8})
		defer h.Close()
		h.runner.script["pair"] = []step{{dur: 10 * time.Second}}
		h.runner.script["third"] = []step{{dur: 20 * time.Second}}
		// pair takes 30000 on two cards; wait (15000) fits only where pair
		// is not, and third (30000) holds that card first.
		h.mustSubmit(t, gspecN("pair", 2, 30000), gspec("third", 30000), gspec("wait", 15000))
		mid := make(chan []gpu.CardView, 1)
		time.AfterFunc(5*time.Second, func() { mid <- h.store.Cards() })
		recs := h.run(t)
		for id, r := range recs {
			if r.State != task.Complete {
				t.Fatalf("%s: %s (%s)", id, r.State, r.Error)
			}
		}
		if len(probe.ooms) > 0 {
			t.Fatalf("over-committed: %v", probe.ooms)
		}
		a := recs["pair"].Attempts[0]
		if a.GPU == nil || len(a.GPUs) != 2 || a.GPUs[0] != *a.GPU || a.GPUs[0] == a.GPUs[1] || a.MemRequestedMiB != 30000 {
			t.Fatalf("pair's attempt: gpu %v, gpus %v, %d MiB; want two cards, gpu the first, 30000 MiB each", a.GPU, a.GPUs, a.MemRequestedMiB)
		}
		i := slices.IndexFunc(h.runner.gpuStarts, func(g gpuStart) bool { return g.task == "pair" })
		if g := h.runner.gpuStarts[i]; !slices.Equal(g.cards, a.GPUs) || g.requested != 30000 {
			t.Errorf("the runner was given cards %v with %d MiB, the attempt says %v", g.cards, g.requested, a.GPUs)
		}
		// Halfway through, both of pair's cards are charged 30000.
		for _, c := range <-mid {
			charged := slices.ContainsFunc(c.Holders, func(h gpu.Holding) bool { return h.Task == "pair" && h.RequestMiB == 30000 })
			if want := slices.Contains(a.GPUs, c.Index); charged != want || want && c.ChargedMiB < 30000 {
				t.Errorf("card %d at 5s: %+v; charged for pair: %v, want %v", c.Index, c.Holders, charged, want)
			}
		}
		third, wait := recs["third"].Attempts[0], recs["wait"].Attempts[0]
		if slices.Contains(a.GPUs, *third.GPU) {
			t.Errorf("third started on card %d, one of pair's %v", *third.GPU, a.GPUs)
		}
		if !wait.Start.After(a.End) && wait.Start.Before(third.End) {
			t.Errorf("wait started at %v, while pair (until %v) and third (until %v) held every card", wait.Start, a.End, third.End)
		}
	})
}

// A task on several cards never starts on fewer: while only one card has
// room it waits, and a starving one whose cards lack little (long leaves
// pair 1500 MiB short of its 2 x 20000) reserves both cards it needs.
func TestTaskOnTwoCardsWaitsForBoth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 8, GPU: GPUConfig{ReserveAfter: time.Second}})
		defer h.Close()
		h.runner.script["long"] = []step{{dur: time.Minute}}
		// small tasks keep arriving behind pair on the free card: the
		// reservation keeps them from taking pair's room there.
		specs := []*task.Spec{gspec("long", 22000), gspecN("pair", 2, 20000)}
		for i := range 5 {
			s := gspec("small"+itoa(i), 25000)
			h.runner.script[s.ID] = []step{{dur: 30 * time.Second}}
			specs = append(specs, s)
		}
		h.mustSubmit(t, specs...)
		recs := h.run(t)
		if len(probe.ooms) > 0 {
			t.Fatalf("over-committed: %v", probe.ooms)
		}
		long, pair := recs["long"].Attempts[0], recs["pair"].Attempts[0]
		if len(pair.GPUs) != 2 || pair.Start.Before(long.End) {
			t.Fatalf("pair on %v at %v; want two cards, after long ended at %v", pair.GPUs, pair.Start, long.End)
		}
		for i := range 5 {
			s := recs["small"+itoa(i)].Attempts[0]
			if s.Start.Before(pair.Start) && s.End.After(pair.Start) {
				t.Errorf("small%d ran %v-%v, over pair's start at %v", i, s.Start, s.End, pair.Start)
			}
		}
		if waited := pair.Start.Sub(long.End); waited > 10*time.Second {
			t.Errorf("pair started %v after long ended: the small tasks behind it took its cards", waited)
		}
	})
}

// The cards' topology is asked once, at the first good reading, and a task
// on two cards gets the pair it says is closest.
func TestTopologyChoosesThePairOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := &topoProbe{fakeProbe: newFakeProbe(40500, 40500, 40500, 40500), topo: linked(4, [2]int{1, 3})}
		h := newHarness(t, Config{MaxParallel: 8, GPU: GPUConfig{Probe: probe, Settings: gpuSettings(), ReserveAfter: time.Hour}}, nil)
		h.runner.gpus = probe.fakeProbe
		defer h.Close()
		h.runner.script["first"] = []step{{dur: 20 * time.Second}}
		h.runner.script["between"] = []step{{dur: 10 * time.Second}} // past first's cards' cooldown
		h.mustSubmit(t, gspecN("first", 2, 1000), spec("between", "first"), gspecN("second", 2, 1000, "between"))
		recs := h.run(t)
		for _, id := range []string{"first", "second"} {
			if a := recs[id].Attempts[0]; len(a.GPUs) != 2 || !slices.Contains(a.GPUs, 1) || !slices.Contains(a.GPUs, 3) {
				t.Errorf("%s on cards %v, want 1 and 3 (NVLinked)", id, a.GPUs)
			}
		}
		if probe.asked != 1 || probe.calls < 5 {
			t.Errorf("topology asked %d times over %d readings, want once", probe.asked, probe.calls)
		}
		if why := h.store.Meta(store.MetaGPUTopology); why != "" {
			t.Errorf("topology read, yet the run says %q", why)
		}
	})
}

// When the topology cannot be read, cards are chosen as if every pair
// were as close (the most room), and the run says why, once.
func TestTopologyFailureMeansNoPreference(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := &topoProbe{fakeProbe: newFakeProbe(40500, 40500, 40500), err: errors.New("nvidia-smi topo -m: exit status 3")}
		probe.foreign[0] = 20000
		h := newHarness(t, Config{MaxParallel: 8, GPU: GPUConfig{Probe: probe, Settings: gpuSettings(), ReserveAfter: time.Hour}}, nil)
		h.runner.gpus = probe.fakeProbe
		defer h.Close()
		h.mustSubmit(t, gspecN("pair", 2, 10000))
		a := h.run(t)["pair"].Attempts[0]
		if !slices.Equal(a.GPUs, []int{1, 2}) {
			t.Errorf("pair on %v, want [1 2] (the most room)", a.GPUs)
		}
		if why := h.store.Meta(store.MetaGPUTopology); !strings.Contains(why, "exit status 3") || probe.asked != 1 {
			t.Errorf("asked %d times; the run says %q", probe.asked, why)
		}
	})
}

// An adopted attempt on several cards holds every one of them before
// anything new is admitted.
func TestAdoptedTaskHoldsEveryCard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		sp := gspecN("pair", 2, 30000)
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		first := 1
		a := task.Attempt{Number: 1, Start: since, LogPath: "/logs/pair/attempt-1.log", GPU: &first, GPUs: []int{1, 0}, GPUUUID: "GPU-1", MemRequestedMiB: 30000}
		if err := st.Apply(&store.Batch{
			Tasks:    []store.TaskWrite{{ID: sp.ID, Seq: 1, Kind: "command", Spec: b, State: task.Running, Fingerprint: sp.Fingerprint()}},
			Attempts: []store.AttemptWrite{{TaskID: sp.ID, Attempt: a, Handle: executor.Handle{Executor: "fake", Version: 1, Data: []byte("99")}}},
		}); err != nil {
			t.Fatal(err)
		}
		end := make(chan struct{})
		probe := newFakeProbe(40500, 40500)
		r := &fakeRunner{recovered: stillRunning(since, end, 0)}
		h := newHarness(t, Config{Runner: r, GPU: GPUConfig{Probe: probe, Settings: gpuSettings(), ReserveAfter: time.Hour}}, st)
		r.gpus = probe
		defer h.Close()
		if o := r.orphans; len(o) != 1 || o[0].Req.GPU == nil || len(o[0].Req.GPU.More) != 2 || o[0].Req.GPU.More[1].Index != 0 {
			t.Fatalf("orphans %+v: want pair's request with both cards", o)
		}
		h.mustSubmit(t, sp, gspec("other", 20000))
		time.AfterFunc(time.Minute, func() { close(end) })
		got := h.run(t)
		if got["pair"].State != task.Complete || got["other"].State != task.Complete {
			t.Fatalf("states: pair %s, other %s", got["pair"].State, got["other"].State)
		}
		if o := got["other"].Attempts[0]; o.Start.Before(since.Add(time.Hour + time.Minute)) {
			t.Errorf("other started at %v on card %d, before the adopted task on both cards ended", o.Start, *o.GPU)
		}
	})
}

// A task on two cards that runs out of memory by its own growth asks
// for more on each card for the retry, and its failure makes it avoid
// both cards when others hold it.
func TestTaskOnTwoCardsGrowsOnEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 40500, 40500, 40500)
		h := newGPUHarness(t, probe, Config{MaxParallel: 8, DefaultRetries: 1})
		defer h.Close()
		h.runner.script["pair"] = []step{{oomAt: 5 * time.Second, tried: 4000}, {}}
		h.mustSubmit(t, gspecN("pair", 2, 10000))
		r := h.run(t)["pair"]
		if r.State != task.Complete || len(r.Attempts) != 2 {
			t.Fatalf("pair: %s after %d attempts (%s)", r.State, len(r.Attempts), r.Error)
		}
		first, second := r.Attempts[0], r.Attempts[1]
		if second.MemRequestedMiB <= first.MemRequestedMiB || !strings.Contains(first.Error, "request grows") {
			t.Errorf("requests %d then %d (%q); want the retry to ask for more on each card", first.MemRequestedMiB, second.MemRequestedMiB, first.Error)
		}
		if len(second.GPUs) != 2 || slices.ContainsFunc(second.GPUs, func(c int) bool { return slices.Contains(first.GPUs, c) }) {
			t.Errorf("retry on %v after failing on %v; want the other two cards", second.GPUs, first.GPUs)
		}
	})
}

// A task asking for more cards than the machine has, or whose memory
// fewer cards than it asks could ever give, is refused at submit.
func TestSubmitRefusesMoreCardsThanTheMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40500, 40500)
		h := newGPUHarness(t, probe, Config{})
		defer h.Close()
		for _, tt := range []struct {
			sp   *task.Spec
			want string
		}{
			{gspecN("three", 3, 1000), "needs 3 cards, and the machine has 2"},
			{gspecN("too-big", 2, 45000), "only 0 of the 2 cards"},
		} {
			tt.sp.Normalize()
			err := h.Submit(Submission{Specs: []*task.Spec{tt.sp}, JSON: [][]byte{[]byte(`{}`)}, Reading: reading(probe)})
			var te *task.Error
			if !errors.As(err, &te) || te.Field != "resources.gpus" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want resources.gpus refused saying %q", tt.sp.ID, err, tt.want)
			}
		}
	})
}
