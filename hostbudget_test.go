package gpusched

import (
	"context"
	"os/exec"
	"testing"

	"github.com/gpusched/gpusched/internal/budget"
	"github.com/gpusched/gpusched/internal/task"
)

// rssPeaked is attempt n, ended by itself (exit 1), admitted with asked
// MiB of host memory and seen at rss MiB resident at most.
func rssPeaked(n int, asked, rss int64) task.Attempt {
	a := peaked(n, 0, 0)
	code := 1
	a.ExitCode, a.HostMemRequestedMiB, a.RSSPeakMiB = &code, asked, rss
	return a
}

func hostAutoTask(id string, maxMiB int64, args ...string) TaskSpec {
	return TaskSpec{ID: id, Payload: args, Resources: ResourceRequest{MemoryHostAuto: true, MemoryHostMaxMiB: maxMiB}}
}

func checkHostBudget(t *testing.T, st StoredTask, mib int64, want MemoryBudget) {
	t.Helper()
	r := st.Spec.Resources
	if r.MemoryMiBHost != mib || r.HostBudget == nil || *r.HostBudget != want {
		t.Errorf("%s: memory_mib_host %d, host budget %+v; want %d, %+v", st.Spec.ID, r.MemoryMiBHost, r.HostBudget, mib, want)
	}
	if !r.MemoryHostAuto || r.MemoryMiB != 0 || r.Budget != nil {
		t.Errorf("%s: resources %+v: the host budget went elsewhere", st.Spec.ID, r)
	}
}

// An auto host memory budget is chosen at submit from the peak RSS of
// the run directory's attempts, capped by memory_mib_host_max and by the
// host memory the scheduler gives tasks; a task that sets its own keeps
// it and has no budget said. The host budget is no part of the
// definition: a completed task stays complete.
func TestAutoHostBudgetFromRunDirectory(t *testing.T) {
	t.Parallel()
	prep := hostAutoTask("prep", 4000, "python3", "prep.py")
	train := hostAutoTask("train", 4000, "python3", "train.py")
	huge := hostAutoTask("huge", 0, "python3", "huge.py")
	capped := hostAutoTask("capped", 1000, "python3", "capped.py")
	fresh := hostAutoTask("fresh", 0, "python3", "fresh.py")
	fixed := TaskSpec{ID: "fixed", Payload: []string{"true"}, Resources: ResourceRequest{MemoryMiBHost: 3000, HostBudget: &MemoryBudget{Source: BudgetHistory}}}
	gpuToo := TaskSpec{ID: "both", Payload: []string{"python3", "both.py"},
		Resources: ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryHostAuto: true}}
	fixedPrep := prep
	fixedPrep.Resources = ResourceRequest{MemoryMiBHost: 9000} // its first run's number
	dir := seedRunDir(t, 40448,
		earlierTask{spec: fixedPrep, state: task.Complete, attempts: []task.Attempt{rssPeaked(1, 9000, 300)}},
		earlierTask{spec: train, state: task.Failed, attempts: []task.Attempt{rssPeaked(1, 4000, 200), rssPeaked(2, 768, 150)}},
		earlierTask{spec: huge, state: task.Failed, attempts: []task.Attempt{rssPeaked(1, 2048, 50000)}},
		earlierTask{spec: capped, state: task.Failed, attempts: []task.Attempt{rssPeaked(1, 1000, 990)}},
		earlierTask{spec: gpuToo, state: task.Failed, attempts: []task.Attempt{func() task.Attempt {
			a := rssPeaked(1, 2048, 1000)
			a.MemRequestedMiB, a.MemPeakMiB = 8192, 5000
			return a
		}()}},
	)
	s, err := New(dir, Scheduling{MemoryMiBHost: 16000}, WithProbe(idleCard{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tasks := []TaskSpec{prep, train, huge, capped, fresh, fixed, gpuToo}
	if err := s.SubmitMany(tasks); err != nil {
		t.Fatal(err)
	}
	got := map[string]StoredTask{}
	for _, tk := range tasks {
		st, ok, err := s.Lookup(tk.ID)
		if err != nil || !ok {
			t.Fatalf("Lookup(%s) = %v, %v", tk.ID, ok, err)
		}
		got[tk.ID] = st
	}
	checkHostBudget(t, got["prep"], 1024, MemoryBudget{Source: BudgetHistory, PeakMiB: 300, Attempts: 1, Since: 1})
	if got["prep"].Record.State != StateComplete {
		t.Errorf("prep: %s after switching to an auto host budget; want it kept complete", got["prep"].Record.State)
	}
	checkHostBudget(t, got["train"], 768, MemoryBudget{Source: BudgetHistory, PeakMiB: 200, Attempts: 2, Since: 1})
	checkHostBudget(t, got["huge"], 16000, MemoryBudget{Source: BudgetHistory, PeakMiB: 50000, Attempts: 1, Cap: budget.CapMachine, Since: 1})
	checkHostBudget(t, got["capped"], 1000, MemoryBudget{Source: BudgetHistory, PeakMiB: 990, Attempts: 1, Cap: budget.CapHostMax, Since: 1})
	checkHostBudget(t, got["fresh"], DefaultAutoHostMemoryMiB, MemoryBudget{Source: BudgetDefault, Since: 1})
	if r := got["fixed"].Spec.Resources; r.MemoryMiBHost != 3000 || r.HostBudget != nil {
		t.Errorf("fixed: memory_mib_host %d, host budget %+v; want 3000 and none", r.MemoryMiBHost, r.HostBudget)
	}
	// Both budgets of one task, each learned from its own peaks.
	both := got["both"].Spec.Resources
	if both.MemoryMiB != 5632 || both.Budget == nil || both.Budget.PeakMiB != 5000 ||
		both.MemoryMiBHost != 1536 || both.HostBudget == nil || both.HostBudget.PeakMiB != 1000 {
		t.Errorf("both: resources %+v, budget %+v, host budget %+v", both, both.Budget, both.HostBudget)
	}
	if want := "memory_mib_host auto: 768 MiB (peak 200 MiB in 2 attempts + margin)"; DescribeHostBudget(768, got["train"].Spec.Resources.HostBudget) != want {
		t.Errorf("DescribeHostBudget = %q, want %q", DescribeHostBudget(768, got["train"].Spec.Resources.HostBudget), want)
	}

	items, err := Plan(dir, []TaskSpec{train})
	if err != nil {
		t.Fatal(err)
	}
	if it := items[0]; it.MemoryMiBHost != 768 || it.MemoryHostSource != "memory_mib_host auto: 768 MiB (peak 200 MiB in 2 attempts + margin)" {
		t.Errorf("plan: %+v", it)
	}
}

// Two runs of a real process that holds 200 MiB: the first asks for
// memory_mib_host_max and its RSS is sampled while it runs; the second
// asks for that peak plus the margin.
func TestAutoHostBudgetLearnsPeakRSS(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to allocate memory")
	}
	// Filled bytes, not a calloc'd bytearray: its pages must be resident.
	// It fails so that the next run runs it again; it sleeps through two
	// samples of its memory.
	tk := hostAutoTask("hold", 4000, py, "-c", "import time, sys\nb = b'x' * (200 << 20)\ntime.sleep(4)\nsys.exit(1)")
	dir := t.TempDir()
	run := func() Record {
		t.Helper()
		s, err := New(dir, Scheduling{MemoryMiBHost: 16000}, WithProbe(idleCard{}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Submit(tk); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return recs[0]
	}
	first := run()
	if n := len(first.Attempts); n != 1 {
		t.Fatalf("first run: %d attempts: %+v", n, first)
	}
	a := first.Attempts[0]
	if a.HostMemRequestedMiB != 4000 || a.RSSPeakMiB < 200 || a.RSSPeakMiB > 1000 {
		t.Fatalf("first attempt asked %d MiB and peaked at %d MiB; want 4000 (the maximum) and about 200", a.HostMemRequestedMiB, a.RSSPeakMiB)
	}
	second := run()
	if n := len(second.Attempts); n != 2 {
		t.Fatalf("second run: %d attempts in all: %+v", n, second)
	}
	if got, want := second.Attempts[1].HostMemRequestedMiB, budget.Propose(a.RSSPeakMiB); got != want {
		t.Errorf("second attempt asked %d MiB; want %d (peak %d MiB + margin)", got, want, a.RSSPeakMiB)
	}
}
