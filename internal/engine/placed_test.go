package engine

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// GPU tasks of an executor that places its work itself (Slurm) are
// admitted as CPU tasks: Config.PlacesGPUs.

// remote is the executor these tests say places its work.
const remote = "remote"

func placesRemote(sp *task.Spec) bool { return sp.Executor == remote }

// pspec is a GPU task of the remote executor with a budget of mib.
func pspec(id string, mib int64, deps ...string) *task.Spec {
	s := gspec(id, mib, deps...)
	s.Executor = remote
	return s
}

// seen records what the runner was asked, for each attempt.
type seen struct {
	mu   sync.Mutex
	reqs []AttemptRequest
}

func (s *seen) hook(req AttemptRequest) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
}

// TestPlacedGPUTaskTakesNoCard: while the GPUs cannot be read at all
// (no nvidia-smi), a placed GPU task larger than any card here starts at
// once: no wait for the GPU state, no card, no probe, no GPU event; it
// takes a slot as a CPU task does, and its budget goes to the runner.
func TestPlacedGPUTaskTakesNoCard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(16000)
		probe.err = errors.New("nvidia-smi not found")
		h := newGPUHarness(t, probe, Config{MaxParallel: 1, PlacesGPUs: placesRemote})
		defer h.Close()
		var s seen
		h.runner.hook = s.hook
		h.mustSubmit(t, pspec("a", 100000), pspec("b", 8000), spec("cpu"))
		got := h.run(t)
		for _, id := range []string{"a", "b", "cpu"} {
			if got[id].State != task.Complete {
				t.Errorf("%s: %s (%s), want complete", id, got[id].State, got[id].Error)
			}
		}
		if probe.calls != 0 {
			t.Errorf("nvidia-smi was read %d times for tasks that do not run here", probe.calls)
		}
		for _, ev := range h.events {
			if ev.Kind == GPUUnknown || ev.Kind == GPUKnown || ev.Kind == CardQuarantined {
				t.Errorf("event %s: the local GPUs have nothing to do with these tasks", ev.Kind)
			}
		}
		if h.runner.maxRunning != 1 {
			t.Errorf("%d attempts ran at once, want 1: a placed GPU task takes a slot", h.runner.maxRunning)
		}
		want := map[string]int64{"a": 100000, "b": 8000, "cpu": 0}
		for _, req := range s.reqs {
			if req.GPU != nil || req.GPUMiB != want[req.Spec.ID] {
				t.Errorf("%s: GPU %+v, GPUMiB %d; want no card and %d", req.Spec.ID, req.GPU, req.GPUMiB, want[req.Spec.ID])
			}
		}
		if a := got["a"].Attempts[0]; a.GPU != nil || a.MemRequestedMiB != 100000 {
			t.Errorf("a's attempt: card %v, budget %d; want no card, 100000", a.GPU, a.MemRequestedMiB)
		}
	})
}

// TestPlacedGPUTaskWithoutProbe: a scheduler that cannot read GPUs at
// all (no probe) takes placed GPU tasks, and refuses the others.
func TestPlacedGPUTaskWithoutProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{PlacesGPUs: placesRemote}, nil)
		defer h.Close()
		if err := h.submit(t, gspec("local", 1000)); err == nil || !strings.Contains(err.Error(), "no GPU probe") {
			t.Errorf("a local GPU task without a probe: %v, want it refused", err)
		}
		h.mustSubmit(t, pspec("placed", 1000))
		if got := h.run(t); got["placed"].State != task.Complete {
			t.Errorf("placed: %s (%s)", got["placed"].State, got["placed"].Error)
		}
	})
}

// TestPlacedGPUTaskOOMGrowsToTheLimit: a placed task that runs out of GPU
// memory retries with a budget grown as a local one's (no peak is seen:
// budget, failed allocation, margin), up to its executor's largest GPU
// (MaxGPUMiB), where it stays; the attempt's error says so. No card here
// caps it or makes it fail without a retry.
func TestPlacedGPUTaskOOMGrowsToTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(8000) // smaller than its budget: irrelevant
		h := newGPUHarness(t, probe, Config{PlacesGPUs: placesRemote,
			MaxGPUMiB: func(sp *task.Spec) int64 { return map[bool]int64{true: 24576}[sp.Executor == remote] }})
		defer h.Close()
		var s seen
		h.runner.hook = s.hook
		sp := pspec("train", 7000)
		sp.Retries = 5
		h.runner.script["train"] = []step{
			{oomAt: time.Second, tried: 2048},
			{oomAt: time.Second, tried: 10240},
			{oomAt: time.Second, tried: 10240},
			{oomAt: time.Second, tried: 10240},
			{dur: time.Second},
		}
		h.mustSubmit(t, sp)
		got := h.run(t)["train"]
		if got.State != task.Complete || len(got.Attempts) != 5 {
			t.Fatalf("train: %s after %d attempts (%s), want complete after 5", got.State, len(got.Attempts), got.Error)
		}
		// Margin 500: 7000 + 2048 + 500; + 10240 + 500; then 31028, held
		// at 24576; then at 24576 still.
		budgets := []int64{7000, 9548, 20288, 24576, 24576}
		var asked []int64
		for _, req := range s.reqs {
			asked = append(asked, req.GPUMiB)
		}
		if !slices.Equal(asked, budgets) {
			t.Errorf("budgets asked = %v, want %v", asked, budgets)
		}
		for i, a := range got.Attempts {
			if a.MemRequestedMiB != budgets[i] || a.GPU != nil {
				t.Errorf("attempt %d: budget %d on card %v, want %d on none", i+1, a.MemRequestedMiB, a.GPU, budgets[i])
			}
		}
		if e := got.Attempts[0].Error; !strings.Contains(e, "grows from 7000 to 9548 MiB") {
			t.Errorf("attempt 1: %q, want its growth", e)
		}
		if e := got.Attempts[2].Error; !strings.Contains(e, "grows from 20288 to 24576 MiB, not 31028") {
			t.Errorf("attempt 3: %q, want its growth held at the limit", e)
		}
		if e := got.Attempts[3].Error; !strings.Contains(e, "grows from 24576 to 24576 MiB, not 35316") {
			t.Errorf("attempt 4: %q, want its budget kept at the limit", e)
		}
		rows, _ := h.store.Load()
		if i := slices.IndexFunc(rows, func(r store.Row) bool { return r.ID == "train" }); i < 0 || rows[i].GPURequestMiB != 24576 {
			t.Errorf("stored rows %+v: want train's grown budget, 24576", rows)
		}
	})
}

// TestPlacedGPUTasksOutsideUserGPUCap: the per-user GPU memory cap counts
// the cards here; placed tasks do not count towards it.
func TestPlacedGPUTasksOutsideUserGPUCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := newFakeProbe(40000)
		h := newGPUHarness(t, probe, Config{MaxParallel: 4, UserMaxGPUMiB: 1000, PlacesGPUs: placesRemote})
		defer h.Close()
		var specs []*task.Spec
		for _, id := range []string{"a", "b", "c"} {
			sp := pspec(id, 8000)
			sp.Owner = "1000"
			h.runner.script[id] = []step{{dur: time.Minute}}
			specs = append(specs, sp)
		}
		h.mustSubmit(t, specs...)
		got := h.run(t)
		for _, id := range []string{"a", "b", "c"} {
			if got[id].State != task.Complete {
				t.Errorf("%s: %s", id, got[id].State)
			}
		}
		if h.runner.maxRunning != 3 {
			t.Errorf("%d ran at once, want all 3: the cap is about this machine's cards", h.runner.maxRunning)
		}
	})
}

// TestAdoptedPlacedGPUTaskHoldsNoCard: a placed GPU attempt adopted at
// Open is charged on no card here (a local task that needs the whole
// card starts beside it), and its recovery carries its budget.
func TestAdoptedPlacedGPUTaskHoldsNoCard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		runningRow(t, st, pspec("big", 30000), since, nil, 30000)
		end := make(chan struct{})
		probe := newFakeProbe(40000)
		r := &fakeRunner{recovered: stillRunning(since, end, 0)}
		h := newHarness(t, Config{Runner: r, PlacesGPUs: placesRemote,
			GPU: GPUConfig{Probe: probe, Settings: gpuSettings(), ReserveAfter: time.Hour}}, st)
		r.gpus = probe
		defer h.Close()
		if len(r.orphans) != 1 || r.orphans[0].Req.GPU != nil || r.orphans[0].Req.GPUMiB != 30000 {
			t.Fatalf("orphans %+v: want big's, on no card, budget 30000", r.orphans)
		}
		h.mustSubmit(t, pspec("big", 30000), gspec("local", 30000))
		time.AfterFunc(time.Minute, func() { close(end) })
		got := h.run(t)
		if got["big"].State != task.Complete || got["local"].State != task.Complete {
			t.Fatalf("states: big %s, local %s", got["big"].State, got["local"].State)
		}
		if l := got["local"].Attempts[0]; !l.Start.Before(since.Add(time.Hour).Add(time.Minute)) || l.GPU == nil {
			t.Errorf("local started at %v on card %v: want at once, on the card the adopted task does not hold", l.Start, l.GPU)
		}
	})
}
