package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/btree"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// order returns the ids of r's tasks in the order Ascend walks them.
func order(r *readySet) []string {
	var ids []string
	r.Ascend(func(n *node) bool { ids = append(ids, n.spec.ID); return true })
	return ids
}

func ownedNode(id, owner string, prio int, seq int64) *node {
	return &node{spec: &task.Spec{ID: id, Owner: owner, Priority: prio}, seq: seq}
}

// With one owner, the ready set walks tasks exactly as the single tree by
// priority and submission did.
func TestReadySetOneOwnerIsPriorityThenSubmission(t *testing.T) {
	r := newReadySet()
	want := btree.NewG(32, lessNode)
	rng := rand.New(rand.NewPCG(7, 7))
	var nodes []*node
	for i := range 500 {
		n := ownedNode(fmt.Sprint("t", i), "1000", rng.IntN(5)-2, int64(i))
		nodes = append(nodes, n)
		r.ReplaceOrInsert(n)
		want.ReplaceOrInsert(n)
	}
	for _, n := range nodes[:100] { // some leave, as tasks that start do
		r.Delete(n)
		want.Delete(n)
	}
	r.owner("2000").use = usage{SlotSec: 1e9, At: t0} // an owner with no ready task changes nothing
	var wantIDs []string
	want.Ascend(func(n *node) bool { wantIDs = append(wantIDs, n.spec.ID); return true })
	if got := order(r); !slices.Equal(got, wantIDs) || r.Len() != 400 {
		t.Errorf("order differs from priority-then-submission (len %d)", r.Len())
	}
}

// Among equal priority the lighter owner goes first; priority still comes
// before usage; within an owner, submission order; equal usage: the owner
// whose task came first.
func TestReadySetOrdersOwnersByUsage(t *testing.T) {
	r := newReadySet()
	r.now, r.slots = t0, 4
	for _, n := range []*node{
		ownedNode("alice-1", "1000", 0, 1), ownedNode("alice-2", "1000", 0, 2), ownedNode("alice-urgent", "1000", 5, 3),
		ownedNode("bob-1", "1001", 0, 4), ownedNode("bob-2", "1001", 0, 5), ownedNode("carol-1", "1002", 0, 6),
	} {
		r.ReplaceOrInsert(n)
	}
	// Nobody has used anything: submission order, owner by owner as their
	// first tasks came.
	if got, want := order(r), []string{"alice-urgent", "alice-1", "alice-2", "bob-1", "bob-2", "carol-1"}; !slices.Equal(got, want) {
		t.Errorf("no usage: order %v, want %v", got, want)
	}
	r.owner("1000").use = usage{SlotSec: 3600, At: t0}
	r.owner("1001").use = usage{SlotSec: 60, At: t0}
	if got, want := order(r), []string{"alice-urgent", "carol-1", "bob-1", "bob-2", "alice-1", "alice-2"}; !slices.Equal(got, want) {
		t.Errorf("alice heaviest, carol lightest: order %v, want %v", got, want)
	}
	// An hour later alice's usage has halved, but her running attempts
	// count too: two slots all hour put her above bob's.
	r.owner("1001").use = usage{SlotSec: 4000, At: t0}
	r.owner("1000").running = 2
	r.now = t0.Add(time.Hour)
	if got, want := order(r), []string{"alice-urgent", "carol-1", "bob-1", "bob-2", "alice-1", "alice-2"}; !slices.Equal(got, want) {
		t.Errorf("after an hour: order %v, want %v", got, want)
	}
	r.owner("1000").running = 0
	if got, want := order(r), []string{"alice-urgent", "carol-1", "alice-1", "alice-2", "bob-1", "bob-2"}; !slices.Equal(got, want) {
		t.Errorf("after an hour, alice idle: order %v, want %v", got, want)
	}
	// A walk that stops early stops.
	var seen []string
	r.Ascend(func(n *node) bool { seen = append(seen, n.spec.ID); return len(seen) < 3 })
	if len(seen) != 3 {
		t.Errorf("walk went on after fn returned false: %v", seen)
	}
}

func TestUsageDecaysAndAccrues(t *testing.T) {
	h := time.Hour
	u := usage{SlotSec: 1000, GPUMiBSec: 8000, At: t0}
	if v := u.at(t0.Add(h), 0, 0, h); math.Abs(v.SlotSec-500) > 1e-9 || math.Abs(v.GPUMiBSec-4000) > 1e-9 {
		t.Errorf("after one half-life: %+v, want 500 and 4000", v)
	}
	// One slot held for a minute, with no decay to speak of, is about 60
	// slot·seconds; held for ever, it tends to H/ln2.
	if v := (usage{At: t0}).at(t0.Add(time.Minute), 1, 100, h); math.Abs(v.SlotSec-60) > 0.5 || math.Abs(v.GPUMiBSec-6000) > 50 {
		t.Errorf("a minute of one slot and 100 MiB: %+v", v)
	}
	if v := (usage{At: t0}).at(t0.Add(100*h), 1, 0, h); math.Abs(v.SlotSec-h.Seconds()/math.Ln2) > 1e-6 {
		t.Errorf("steady state: %v, want %v", v.SlotSec, h.Seconds()/math.Ln2)
	}
	// Share: slot·s over the slots, MiB·s over the memory.
	if s := (usage{SlotSec: 400, GPUMiBSec: 1000}).share(4, 500); s != 102 {
		t.Errorf("share = %v, want 100 + 2", s)
	}
	if s := (usage{SlotSec: 400, GPUMiBSec: 1000}).share(4, 0); s != 100 {
		t.Errorf("share with GPU memory unknown = %v, want 100", s)
	}
}

func ownedCPU(id string, owner int32) Candidate { return Candidate{ID: id, Owner: owner} }

func ownedGPU(id string, owner int32, mib int64) Candidate {
	c := gpuTask(id, mib, 0)
	c.Owner = owner
	return c
}

func TestDecideUserCaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		queue      []Candidate
		free       int
		maxRunning int
		maxGPU     int64
		owners     []OwnerLoad
		cards      []gpu.CardView
		starts     []string
		capped     []string
	}{{
		name:  "running cap: the owner at it is passed over, others go on",
		queue: []Candidate{ownedCPU("a1", 0), ownedCPU("a2", 0), ownedCPU("a3", 0), ownedCPU("b1", 1)}, free: 8,
		maxRunning: 3, owners: []OwnerLoad{{Running: 1}, {Running: 5}},
		starts: []string{"a1", "a2"}, capped: []string{"a3", "b1"},
	}, {
		name:  "no cap set: as before",
		queue: []Candidate{ownedCPU("a1", 0), ownedCPU("a2", 0), ownedCPU("b1", 1)}, free: 8,
		owners: []OwnerLoad{{Running: 100}, {Running: 100}},
		starts: []string{"a1", "a2", "b1"},
	}, {
		name:  "GPU cap: what would go over waits, a smaller task and CPU tasks start",
		queue: []Candidate{ownedGPU("big", 0, 30000), ownedGPU("small", 0, 10000), ownedCPU("cpu", 0), ownedGPU("other", 1, 30000)},
		free:  8, maxGPU: 40000, owners: []OwnerLoad{{Running: 1, GPUMiB: 20000}, {}},
		cards:  []gpu.CardView{card(0, 81408, 81408), card(1, 81408, 81408)},
		starts: []string{"small", "cpu", "other"}, capped: []string{"big"},
	}, {
		name:  "GPU cap: a task over the cap on its own starts when its owner holds none",
		queue: []Candidate{ownedGPU("huge", 0, 50000), ownedGPU("next", 0, 1000)}, free: 8,
		maxGPU: 40000, owners: []OwnerLoad{{}},
		cards:  []gpu.CardView{card(0, 81408, 81408)},
		starts: []string{"huge"}, capped: []string{"next"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			owners := slices.Clone(tc.owners)
			p := decide(View{Free: tc.free, Ready: sliceQueue(tc.queue), Now: t0, GPUKnown: true, Cards: tc.cards,
				UserMaxRunning: tc.maxRunning, UserMaxGPUMiB: tc.maxGPU, Owners: owners, ReserveAfter: -1})
			var starts, capped []string
			for _, a := range p.Starts {
				starts = append(starts, a.TaskID)
			}
			for _, x := range p.Passed {
				if x.Why == task.WaitUserCap {
					capped = append(capped, x.TaskID)
				}
			}
			if !slices.Equal(starts, tc.starts) || !slices.Equal(capped, tc.capped) {
				t.Errorf("started %v, capped %v; want %v, %v", starts, capped, tc.starts, tc.capped)
			}
			if !slices.Equal(owners, tc.owners) {
				t.Errorf("decide changed the view's owners: %v", owners)
			}
		})
	}
}

// Two owners on one slot: their tasks alternate, where one owner's would
// all run first in submission order.
func TestFairShareAlternatesOwners(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners [2]string
		want   []string
	}{
		{"two owners", [2]string{"1000", "1001"}, []string{"a1#1", "b1#1", "a2#1", "b2#1", "a3#1", "b3#1"}},
		{"one owner", [2]string{"1000", "1000"}, []string{"a1#1", "a2#1", "a3#1", "b1#1", "b2#1", "b3#1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{MaxParallel: 1}, nil)
				defer h.Close()
				var specs []*task.Spec
				for i, id := range []string{"a1", "a2", "a3", "b1", "b2", "b3"} {
					s := spec(id)
					s.Owner = tc.owners[i/3]
					h.runner.script[id] = []step{{dur: 10 * time.Second}}
					specs = append(specs, s)
				}
				h.mustSubmit(t, specs...)
				h.run(t)
				if got := h.runner.startOrder(); !slices.Equal(got, tc.want) {
					t.Errorf("start order %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// An owner at the running cap waits, with a reason that says so, while
// another owner's tasks use the free slots.
func TestUserCapHoldsTheOwnerAtIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 4, UserMaxRunning: 2, OwnerName: func(uid string) string {
			return map[string]string{"1000": "alice"}[uid]
		}}, nil)
		defer h.Close()
		var specs []*task.Spec
		for _, id := range []string{"a1", "a2", "a3", "a4", "b1"} {
			s := spec(id)
			s.Owner = "1000"
			if id[0] == 'b' {
				s.Owner = "1001"
			}
			h.runner.script[id] = []step{{dur: 10 * time.Second}}
			specs = append(specs, s)
		}
		h.mustSubmit(t, specs...)
		done := make(chan map[string]task.Record)
		go func() {
			recs, _ := h.Run(context.Background())
			done <- byID(recs)
		}()
		synctest.Wait()
		w := h.Waiting("a3", "a4")
		for _, id := range []string{"a3", "a4"} {
			if w[id].Kind != task.WaitUserCap || w[id].Detail != "alice has 2 tasks running (cap 2)" {
				t.Errorf("%s waits for %v %q; want user-cap, alice has 2 tasks running (cap 2)", id, w[id].Kind, w[id].Detail)
			}
		}
		recs := <-done
		for id, at := range map[string]time.Duration{"a1": 0, "a2": 0, "b1": 0, "a3": 10 * time.Second, "a4": 10 * time.Second} {
			if got := recs[id].Attempts[0].Start.Sub(t0.Add(recs["a1"].Attempts[0].Start.Sub(t0))); got != at {
				t.Errorf("%s started at +%v, want +%v", id, got, at)
			}
		}
	})
}

// The owners' usage is saved with the commits and read at Open: a
// restarted engine orders owners as the one before did.
func TestUsageSurvivesReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxParallel: 2}, nil)
		s := spec("long")
		s.Owner = "1000"
		h.runner.script["long"] = []step{{dur: 10 * time.Minute}}
		h.mustSubmit(t, s)
		h.run(t)
		before := h.Usage()
		h.Close()
		if before["1000"] < 200 { // 600 slot·s over 2 slots, barely decayed
			t.Fatalf("usage after a 10-minute task on one of 2 slots: %v", before)
		}
		h2 := newHarness(t, Config{MaxParallel: 2}, h.store)
		defer h2.Close()
		after := h2.Usage()
		if math.Abs(after["1000"]-before["1000"]) > 1e-6 {
			t.Errorf("usage after reopening %v, before %v", after, before)
		}
		if !strings.Contains(h.store.Meta(metaUsage), `"1000"`) {
			t.Errorf("meta %s = %q", metaUsage, h.store.Meta(metaUsage))
		}
	})
}

// BenchmarkReadySetChurn is BenchmarkReadyQueueChurn through the engine's
// ready set (one owner): the best task out, a new one in, as the loop does
// once per start, with 100,000 ready. The difference is the owner's lookup.
func BenchmarkReadySetChurn(b *testing.B) {
	r := newReadySet()
	for i := range 100_000 {
		r.ReplaceOrInsert(ownedNode("", "1000", i%7, int64(i)))
	}
	seq := int64(100_000)
	b.ReportAllocs()
	for b.Loop() {
		var n *node
		r.Ascend(func(m *node) bool { n = m; return false })
		r.Delete(n)
		n.seq = seq
		seq++
		r.ReplaceOrInsert(n)
	}
}

// A GPU task held by a cap keeps its reason when the cards are read again
// while its owner is still at the cap; once below it, the cards decide.
func TestCapReasonOutlivesACardSweep(t *testing.T) {
	e := &Engine{ready: newReadySet(), cfg: Config{UserMaxRunning: 1}}
	n := ownedNode("g", "1000", 0, 1)
	n.spec.Resources = task.ResourceRequest{Device: task.CUDA, MemoryMiB: 1000}
	n.need = gpu.Need{MiB: 1000}
	e.ready.owner("1000").running = 1
	n.rec.Waiting = e.capReason(n)
	if got := e.rereadGPU(n, nil, nil); got != n.rec.Waiting || got.Detail != "user 1000 has 1 task running (cap 1)" {
		t.Errorf("reread as %+v", got)
	}
	e.ready.owner("1000").running = 0
	if e.atCap(n) {
		t.Error("an owner with nothing running is at a cap of 1")
	}
}
