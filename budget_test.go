package gpusched

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// idleCard is a GPU probe reading one idle 40960 MiB card.
type idleCard struct{}

func (idleCard) Snapshot(context.Context) (GPUSnapshot, error) {
	return GPUSnapshot{Time: time.Now(), Cards: []GPUCard{{Index: 0, UUID: "GPU-budget", Name: "Test", TotalMiB: 40960, FreeMiB: 40960}}}, nil
}

// earlierTask is what an earlier run left of a task in the run directory.
type earlierTask struct {
	spec     TaskSpec
	state    task.State
	attempts []task.Attempt
	grownMiB int64
}

var tb0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// peaked is attempt n, ended by itself, admitted with asked MiB and seen
// using peak MiB at most.
func peaked(n int, asked, peak int64) task.Attempt {
	code := 0
	return task.Attempt{Number: n, Start: tb0, End: tb0.Add(time.Minute), ExitCode: &code, MemRequestedMiB: asked, MemPeakMiB: peak}
}

// seedRunDir writes a state database into a new run directory as an
// earlier run would have left it, with a saved view of one card of
// capacityMiB (none if 0), and returns the directory.
func seedRunDir(t testing.TB, capacityMiB int64, tasks ...earlierTask) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenSQLite(filepath.Join(dir, StateFile), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b store.Batch
	if capacityMiB > 0 {
		b.Cards = []gpu.CardView{{Index: 0, UUID: "GPU-budget", TotalMiB: capacityMiB + 512, CapacityMiB: capacityMiB}}
	}
	for i, et := range tasks {
		sp := et.spec.spec()
		sp.Normalize()
		blob, err := json.Marshal(&sp)
		if err != nil {
			t.Fatal(err)
		}
		b.Tasks = append(b.Tasks, store.TaskWrite{ID: sp.ID, Seq: int64(i), Kind: sp.Kind, Spec: blob, State: et.state,
			Fingerprint: sp.Fingerprint(), GPURequestMiB: et.grownMiB, Submitted: tb0})
		for _, a := range et.attempts {
			b.Attempts = append(b.Attempts, store.AttemptWrite{TaskID: sp.ID, Attempt: a})
		}
	}
	if err := st.Apply(&b); err != nil {
		t.Fatal(err)
	}
	return dir
}

func autoTask(id string, maxMiB int64, args ...string) TaskSpec {
	return TaskSpec{ID: id, Payload: args, Resources: ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMaxMiB: maxMiB}}
}

// submitLookup submits tasks to a scheduler on dir and returns what the
// state database then holds of each, by id.
func submitLookup(t *testing.T, dir string, tasks []TaskSpec, opts ...Option) map[string]StoredTask {
	t.Helper()
	s, err := New(dir, Scheduling{}, append([]Option{WithProbe(idleCard{})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SubmitMany(tasks); err != nil {
		t.Fatal(err)
	}
	out := map[string]StoredTask{}
	for _, tk := range tasks {
		st, ok, err := s.Lookup(tk.ID)
		if err != nil || !ok {
			t.Fatalf("Lookup(%s) = %v, %v", tk.ID, ok, err)
		}
		out[tk.ID] = st
	}
	return out
}

func checkBudget(t *testing.T, st StoredTask, mib int64, want MemoryBudget) {
	t.Helper()
	r := st.Spec.Resources
	if r.MemoryMiB != mib || r.Budget == nil || *r.Budget != want {
		t.Errorf("%s: memory_mib %d, budget %+v; want %d, %+v", st.Spec.ID, r.MemoryMiB, r.Budget, mib, want)
	}
	if !r.MemoryAuto {
		t.Errorf("%s: the stored definition lost memory_auto", st.Spec.ID)
	}
}

// An auto budget is chosen at submit from the run directory's attempts
// of the same task, and saved with its definition; a completed task
// whose definition is unchanged stays complete (the number chosen is no
// part of the definition), and the budget a task grew to after running
// out of memory stands when it is more.
func TestAutoBudgetFromRunDirectory(t *testing.T) {
	t.Parallel()
	train := autoTask("train", 12000, "python3", "train.py")
	eval := autoTask("eval", 12000, "python3", "eval.py")
	changed := autoTask("changed", 12000, "python3", "new.py")
	big := autoTask("big", 0, "python3", "big.py")
	grown := autoTask("grown", 8000, "python3", "grown.py")
	fresh := autoTask("fresh", 0, "python3", "fresh.py")
	fixed := TaskSpec{ID: "fixed", Payload: []string{"python3", "fixed.py"},
		Resources: ResourceRequest{Device: CUDA, MemoryMiB: 3000, Budget: &MemoryBudget{Source: BudgetHistory}}}
	old := changed
	old.Payload = []string{"python3", "old.py"}
	dir := seedRunDir(t, 40448,
		earlierTask{spec: train, state: task.Complete, attempts: []task.Attempt{peaked(1, 12000, 5800), peaked(2, 6400, 5000)}},
		earlierTask{spec: eval, state: task.Failed, attempts: []task.Attempt{peaked(1, 12000, 2000)}},
		earlierTask{spec: old, state: task.Complete, attempts: []task.Attempt{peaked(1, 12000, 1000)}},
		earlierTask{spec: big, state: task.Failed, attempts: []task.Attempt{peaked(1, 8192, 39000)}},
		earlierTask{spec: grown, state: task.Failed, grownMiB: 15512, attempts: []task.Attempt{peaked(1, 8000, 8000)}},
	)
	got := submitLookup(t, dir, []TaskSpec{train, eval, changed, big, grown, fresh, fixed})

	checkBudget(t, got["train"], 6400, MemoryBudget{Source: BudgetHistory, PeakMiB: 5800, Attempts: 2, Since: 1})
	if got["train"].Record.State != StateComplete {
		t.Errorf("train: %s after a new budget was chosen; want it kept complete", got["train"].Record.State)
	}
	checkBudget(t, got["eval"], 2560, MemoryBudget{Source: BudgetHistory, PeakMiB: 2000, Attempts: 1, Since: 1})
	// Its first attempt ran old.py: not learned from, and its next
	// attempt (2) is the first of the new definition.
	checkBudget(t, got["changed"], 12000, MemoryBudget{Source: BudgetMax, Since: 2})
	checkBudget(t, got["big"], 40448, MemoryBudget{Source: BudgetHistory, PeakMiB: 39000, Attempts: 1, Cap: "card", Since: 1})
	checkBudget(t, got["grown"], 15512, MemoryBudget{Source: BudgetGrown, PeakMiB: 8000, Attempts: 1, Since: 1})
	checkBudget(t, got["fresh"], DefaultAutoMemoryMiB, MemoryBudget{Source: BudgetDefault, Since: 1})
	if r := got["fixed"].Spec.Resources; r.MemoryMiB != 3000 || r.Budget != nil {
		t.Errorf("fixed: memory_mib %d, budget %+v; want 3000 and none (only auto budgets have one)", r.MemoryMiB, r.Budget)
	}

	// The next run learns from what this one saved: changed's since is
	// kept, so its old attempt stays out.
	again := submitLookup(t, dir, []TaskSpec{changed})
	checkBudget(t, again["changed"], 12000, MemoryBudget{Source: BudgetMax, Since: 2})
}

// WithBudgetHistory replaces the run directory's attempts: the function
// is asked with the task as submitted, and what it returns is learned
// from.
func TestAutoBudgetFromHistoryFunction(t *testing.T) {
	t.Parallel()
	train := autoTask("train", 0, "python3", "train.py")
	dir := seedRunDir(t, 0, earlierTask{spec: train, state: task.Failed, attempts: []task.Attempt{peaked(1, 8192, 100)}})
	var asked []string
	history := func(ts TaskSpec) []Attempt {
		asked = append(asked, ts.ID+" "+strings.Join(ts.Payload.([]string), " "))
		return []Attempt{Attempt(peaked(7, 20000, 9000)), Attempt(peaked(8, 20000, 9500))}
	}
	got := submitLookup(t, dir, []TaskSpec{train, {ID: "cpu", Payload: []string{"true"}}}, WithBudgetHistory(history))
	checkBudget(t, got["train"], 10496, MemoryBudget{Source: BudgetHistory, PeakMiB: 9500, Attempts: 2, Since: 1})
	if len(asked) != 1 || asked[0] != "train python3 train.py" {
		t.Errorf("the history function was asked %q; want once, for train", asked)
	}
	if want := "memory_mib auto: 10496 MiB (peak 9500 MiB in 2 attempts + margin)"; DescribeBudget(10496, got["train"].Spec.Resources.Budget) != want {
		t.Errorf("DescribeBudget = %q, want %q", DescribeBudget(10496, got["train"].Spec.Resources.Budget), want)
	}
}

// Plan shows the budget the next run would choose, for the tasks that
// would run.
func TestPlanShowsAutoBudget(t *testing.T) {
	t.Parallel()
	train := autoTask("train", 12000, "python3", "train.py")
	kept := autoTask("kept", 12000, "python3", "kept.py")
	dir := seedRunDir(t, 40448,
		earlierTask{spec: train, state: task.Failed, attempts: []task.Attempt{peaked(1, 12000, 5800)}},
		earlierTask{spec: kept, state: task.Complete, attempts: []task.Attempt{peaked(1, 12000, 5800)}})
	items, err := Plan(dir, []TaskSpec{train, kept, autoTask("new", 0, "python3", "new.py")})
	if err != nil {
		t.Fatal(err)
	}
	want := []PlanItem{
		{ID: "train", Run: true, Why: "failed before", MemoryMiB: 6400, MemorySource: "memory_mib auto: 6400 MiB (peak 5800 MiB in 1 attempt + margin)"},
		{ID: "kept", Why: "complete, kept"},
		{ID: "new", Run: true, Why: "never ran", MemoryMiB: 8192, MemorySource: "memory_mib auto: 8192 MiB (the default: no earlier attempt to learn from)"},
	}
	for i := range want {
		if !reflect.DeepEqual(items[i], want[i]) {
			t.Errorf("item %d = %+v\nwant     %+v", i, items[i], want[i])
		}
	}
}

// benchSubmitResumed submits n GPU tasks to a run directory whose earlier
// run failed each of them after two attempts (so they all run again):
// with auto, each budget is chosen from its row.
func benchSubmitResumed(b *testing.B, n int, auto bool) {
	tasks := make([]TaskSpec, n)
	earlier := make([]earlierTask, n)
	for i := range tasks {
		tasks[i] = TaskSpec{ID: fmt.Sprintf("train-%06d", i), Payload: []string{"python3", "train.py", "--seed", strconv.Itoa(i)},
			Env: map[string]string{"SEED": strconv.Itoa(i)}, Resources: ResourceRequest{Device: CUDA, MemoryMiB: 8000}}
		if auto {
			tasks[i].Resources = ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMaxMiB: 12000}
		}
		earlier[i] = earlierTask{spec: tasks[i], state: task.Failed, attempts: []task.Attempt{peaked(1, 8000, 5000), peaked(2, 8000, 5200)}}
	}
	seeded := seedRunDir(b, 40448, earlier...)
	db, err := os.ReadFile(filepath.Join(seeded, StateFile))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StateFile), db, 0o600); err != nil {
			b.Fatal(err)
		}
		s, err := New(dir, Scheduling{}, WithProbe(idleCard{}))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.SubmitMany(tasks); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkSubmitResumedFixed10k and BenchmarkSubmitResumedAuto10k: what
// choosing 10,000 auto budgets from history adds to their submission.
func BenchmarkSubmitResumedFixed10k(b *testing.B) { benchSubmitResumed(b, 10_000, false) }
func BenchmarkSubmitResumedAuto10k(b *testing.B)  { benchSubmitResumed(b, 10_000, true) }
