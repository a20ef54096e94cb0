package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plan and run --dry-run say what would run and why, and run nothing.
func TestPlanAndDryRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "flow.yaml"), `
tasks:
  - id: prepare
    args: `+sh("echo prepare >> ran; mkdir -p out; echo data > out/data.txt")+`
    artifacts: [out/data.txt]
  - id: train
    dependencies: [prepare]
    args: `+sh("echo train >> ran; cp out/data.txt out/model.pt")+`
    artifacts: [out/model.pt]
  - id: evaluate
    dependencies: [train]
    args: `+sh("echo evaluate >> ran; cat out/model.pt > out/eval.txt")+`
    artifacts: [out/eval.txt]
`)
	r := gs(t, "", "plan", wf)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "prepare   run     never ran") || !strings.Contains(r.stdout, "3 of 3 tasks would run") {
		t.Errorf("plan before any run:\n%s", r.stdout)
	}
	if exists(filepath.Join(dir, "ran")) || exists(filepath.Join(dir, ".gpusched")) {
		t.Fatal("plan ran something or created the run directory")
	}
	gs(t, "", "run", wf).want(t, 0)
	os.Remove(filepath.Join(dir, "ran"))
	os.Remove(filepath.Join(dir, "out", "model.pt"))

	for _, args := range [][]string{{"plan", wf}, {"run", "--dry-run", wf}, {"run", wf, "--dry-run"}} {
		r := gs(t, "", args...)
		r.want(t, 0)
		for _, want := range []string{
			"prepare   keep    complete, kept",
			"train     run     artifact missing: out/model.pt",
			"evaluate  run     upstream train reruns",
			"2 of 3 tasks would run",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
	if exists(filepath.Join(dir, "ran")) {
		t.Fatal("a dry run ran something")
	}
	r = gs(t, "", "plan", wf, "--json")
	r.want(t, 0)
	var p struct {
		Tasks []struct {
			ID  string `json:"id"`
			Run bool   `json:"run"`
			Why string `json:"why"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || len(p.Tasks) != 3 || p.Tasks[0].Run || !p.Tasks[1].Run {
		t.Errorf("plan --json = %s (%v)", r.stdout, err)
	}
	gs(t, "", "run", wf).want(t, 0)
	if got := readFile(t, filepath.Join(dir, "ran")); got != "train\nevaluate\n" {
		t.Errorf("the rerun executed %q, want exactly train and evaluate", got)
	}
	// An invalid workflow is invalid input for plan too.
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "tasks:\n  - id: a\n    args: [x]\n    dependencies: [nope]\n")
	gs(t, "", "plan", bad).want(t, 2)
}

// plan reads the run directory while it parses the workflow, and says
// what it said when it did one after the other: the workflow's problem
// (invalid input, 2) before the run directory's (1).
func TestPlanWorkflowErrorBeforeRunDirectoryError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	writeFile(t, filepath.Join(runDir, "state.db"), "not a database")
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "tasks:\n  - id: a\n    args: [x]\n    dependencies: [nope]\n")
	good := writeFile(t, filepath.Join(dir, "good.yaml"), "tasks:\n  - id: a\n    args: [x]\n")

	r := gs(t, "", "plan", bad, "--run-dir", runDir)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, `depends on "nope"`) {
		t.Errorf("bad workflow, bad run directory: %q, want the workflow's problem", msg)
	}
	r = gs(t, "", "plan", good, "--run-dir", runDir, "--force", "nope")
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "--force") {
		t.Errorf("--force of no task, bad run directory: %q, want the --force problem", msg)
	}
	r = gs(t, "", "plan", good, "--run-dir", runDir)
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "state db") {
		t.Errorf("good workflow, bad run directory: %q, want the state db's problem", msg)
	}
}
