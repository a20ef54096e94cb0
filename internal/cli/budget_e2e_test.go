package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

// budgetTask is what status --json says of a task's budget.
type budgetTask struct {
	ID           string           `json:"id"`
	State        string           `json:"state"`
	MemoryMiB    int64            `json:"memory_mib"`
	MemorySource string           `json:"memory_mib_source"`
	History      []gpuAttemptJSON `json:"history"`
}

// memory_mib: auto across two runs of the real binary on a fake card: the
// first asks for memory_mib_max, the fake job uses 5000 MiB (seen by the
// fake nvidia-smi), and the next run of the same definition (its artifact
// removed, so it runs again) asks for the peak plus the margin, 5632 MiB,
// as plan says beforehand and the run's first lines say. suggest then
// shows what each task asked for and used, and flags the fixed budget
// far above its peak.
func TestGPUAutoBudgetLearnsFromHistory(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	job := q(fakeJobBin(t)) + " --mem 5000 --duration 800ms --record " + q(m.record)
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
  gpu_cooldown: 0
tasks:
  - id: train
    resources: {device: cuda, memory_mib: auto, memory_mib_max: 12000}
    artifacts: [train.done]
    args: ` + sh(job+" && touch train.done") + `
  - id: eval
    resources: {device: cuda, memory_mib: 20000}
    args: ` + m.job("--mem", "3000", "--duration", "800ms") + `
`)
	first := gpuGS(t, m.env, "run", "--no-progress", wf)
	first.want(t, 0)
	if want := "train: memory_mib auto: 12000 MiB (memory_mib_max: no earlier attempt to learn from)"; !strings.Contains(first.stdout, want) {
		t.Errorf("the first run does not say %q:\n%s", want, first.stdout)
	}
	st := budgetStatusOf(t, runDir)
	train := st["train"]
	if len(train.History) != 1 || train.History[0].MemRequestedMiB != 12000 || train.History[0].MemPeakMiB != 5000 {
		t.Fatalf("train after run 1: %+v; want one attempt asking 12000 MiB, peaking at 5000", train.History)
	}
	if !strings.HasPrefix(train.MemorySource, "memory_mib auto: 12000 MiB (memory_mib_max") {
		t.Errorf("status memory_mib_source = %q", train.MemorySource)
	}

	// The same definition runs again: its artifact is gone.
	if err := os.Remove(filepath.Join(filepath.Dir(wf), "train.done")); err != nil {
		t.Fatal(err)
	}
	learned := "train: memory_mib auto: 5632 MiB (peak 5000 MiB in 1 attempt + margin)"
	plan := gpuGS(t, m.env, "plan", wf)
	plan.want(t, 0)
	if !strings.Contains(plan.stdout, learned) || !regexp.MustCompile(`train\s+run\s+artifact missing: train.done`).MatchString(plan.stdout) {
		t.Errorf("plan does not say %q for a rerun:\n%s", learned, plan.stdout)
	}
	second := gpuGS(t, m.env, "run", "--no-progress", wf)
	second.want(t, 0)
	if !strings.Contains(second.stdout, learned) {
		t.Errorf("the second run does not say %q:\n%s", learned, second.stdout)
	}
	if strings.Contains(second.stdout, "eval: memory_mib") {
		t.Errorf("the second run speaks of eval's budget, which is fixed and kept:\n%s", second.stdout)
	}
	st = budgetStatusOf(t, runDir)
	train = st["train"]
	if len(train.History) != 2 || train.History[1].MemRequestedMiB != 5632 || train.History[1].MemPeakMiB != 5000 {
		t.Fatalf("train after run 2: %+v; want a second attempt asking 5632 MiB", train.History)
	}
	if eval := st["eval"]; eval.State != "complete" || len(eval.History) != 1 {
		t.Errorf("eval: %s after %d attempts; want kept complete after 1", eval.State, len(eval.History))
	}
	m.checkNoOvercommit(512)

	sg := gpuGS(t, nil, "suggest", wf)
	sg.want(t, 0)
	for _, re := range []string{
		`(?m)^train\s+auto \(max 12000\)\s+5632\s+5000\s+2\s+5632\s*$`,
		`(?m)^eval\s+20000\s+20000\s+3000\s+1\s+3584\s+wasted: asks 6\.7× its peak$`,
	} {
		if !regexp.MustCompile(re).MatchString(sg.stdout) {
			t.Errorf("suggest output does not match %s:\n%s", re, sg.stdout)
		}
	}
	sj := gpuGS(t, nil, "suggest", "--json", "--run-dir", runDir)
	sj.want(t, 0)
	var out struct {
		RunDir string `json:"run_dir"`
		Tasks  []struct {
			ID          string `json:"id"`
			MemoryAuto  bool   `json:"memory_auto"`
			AskedMiB    int64  `json:"asked_mib"`
			PeakMiB     int64  `json:"peak_mib"`
			Attempts    int    `json:"attempts"`
			ProposedMiB int64  `json:"proposed_mib"`
			Flag        string `json:"flag"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(sj.stdout), &out); err != nil {
		t.Fatalf("suggest --json: %v\n%s", err, sj.stdout)
	}
	if len(out.Tasks) != 2 || out.RunDir != runDir {
		t.Fatalf("suggest --json: %s", sj.stdout)
	}
	tr, ev := out.Tasks[0], out.Tasks[1]
	if tr.ID != "train" || !tr.MemoryAuto || tr.AskedMiB != 5632 || tr.PeakMiB != 5000 || tr.Attempts != 2 || tr.ProposedMiB != 5632 || tr.Flag != "" {
		t.Errorf("suggest --json train: %+v", tr)
	}
	if ev.ID != "eval" || ev.AskedMiB != 20000 || ev.PeakMiB != 3000 || ev.ProposedMiB != 3584 || ev.Flag != "wasted" {
		t.Errorf("suggest --json eval: %+v", ev)
	}
}

// budgetStatusOf runs status --json on runDir: its tasks by id.
func budgetStatusOf(t *testing.T, runDir string) map[string]budgetTask {
	t.Helper()
	r := gpuGS(t, nil, "status", "--json", "--run-dir", runDir)
	r.want(t, 0)
	var s struct {
		Tasks []budgetTask `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	out := map[string]budgetTask{}
	for _, tk := range s.Tasks {
		out[tk.ID] = tk
	}
	return out
}
