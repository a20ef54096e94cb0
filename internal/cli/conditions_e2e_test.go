package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// The binary on a sweep with dependency conditions: train-2 fails, the
// aggregate runs on the partial sweep (on: any), train-2's clean-up runs
// (on: failure) and train-1's is not needed; the run exits 1 for train-2
// alone. Fixed, train-2 runs again with the aggregate, its clean-up is not
// needed this time, and the run exits 0. status and --events say which
// tasks were not needed.
func TestConditionsEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "sweep.yaml"), `
tasks:
  - id: prepare
    args: `+sh("echo prepare >> ran")+`
  - id: train-${seed}
    matrix: {seed: [1, 2, 3]}
    dependencies: [prepare]
    args: `+sh("echo train-${seed} >> ran; test ${seed} != 2 || test -e fixed")+`
  - id: aggregate
    dependencies: [{id: "train-*", on: any}]
    args: `+sh("echo aggregate >> ran")+`
  - id: clean-${seed}
    matrix: {seed: [1, 2]}
    dependencies:
      - {id: "train-${seed}", on: failure}
    args: `+sh("echo clean-${seed} >> ran")+`
`)
	ran := func() []string {
		t.Helper()
		b, _ := os.ReadFile(filepath.Join(dir, "ran"))
		os.Remove(filepath.Join(dir, "ran"))
		got := strings.Fields(string(b))
		slices.Sort(got)
		return got
	}
	events := filepath.Join(dir, "events.jsonl")

	r := gs(t, "", "run", wf, "--events", events)
	r.want(t, 1)
	if got, want := ran(), []string{"aggregate", "clean-2", "prepare", "train-1", "train-2", "train-3"}; !slices.Equal(got, want) {
		t.Errorf("run 1 executed %v, want %v", got, want)
	}
	for _, want := range []string{
		"skipped   clean-1 (not needed: train-1 completed)",
		"7 tasks in ", ": 5 complete, 1 failed, 1 not needed\n",
		"  failed  train-2: exit code 1",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run 1 output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "blocked clean-1") {
		t.Errorf("clean-1 is named among blocked tasks:\n%s", r.stdout)
	}
	var blocked map[string]any
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, events)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--events line %q: %v", line, err)
		}
		if ev["event"] == "blocked" {
			blocked = ev
		}
	}
	if blocked["task"] != "clean-1" || blocked["not_needed"] != true || blocked["blocked_by"] != "train-1" {
		t.Errorf("blocked event = %v, want clean-1 not needed, by train-1", blocked)
	}

	writeFile(t, filepath.Join(dir, "fixed"), "")
	r = gs(t, "", "run", wf)
	r.want(t, 0)
	if got, want := ran(), []string{"aggregate", "train-2"}; !slices.Equal(got, want) {
		t.Errorf("run 2 executed %v, want %v", got, want)
	}
	if !strings.Contains(r.stdout, "skipped   clean-2 (not needed: train-2 completed)") {
		t.Errorf("run 2 output:\n%s", r.stdout)
	}

	r = gs(t, "", "status", wf)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "7 tasks: 5 complete, 2 blocked (not needed)") ||
		!strings.Contains(r.stdout, `not needed: dependency "train-2" completed; this task runs on its failure`) {
		t.Errorf("status:\n%s", r.stdout)
	}
	r = gs(t, "", "status", wf, "--json")
	r.want(t, 0)
	var st struct {
		Tasks []struct {
			ID           string            `json:"id"`
			State        string            `json:"state"`
			NotNeeded    bool              `json:"not_needed"`
			DependencyOn map[string]string `json:"dependency_on"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err)
	}
	for _, task := range st.Tasks {
		switch task.ID {
		case "clean-2":
			if task.State != "blocked" || !task.NotNeeded || task.DependencyOn["train-2"] != "failure" {
				t.Errorf("status --json of clean-2: %+v", task)
			}
		case "aggregate":
			if len(task.DependencyOn) != 3 || task.DependencyOn["train-3"] != "any" || task.NotNeeded {
				t.Errorf("status --json of aggregate: %+v", task)
			}
		}
	}
}

// validate names the line of a bad condition, and exits 2.
func TestConditionErrorsEndToEnd(t *testing.T) {
	t.Parallel()
	wf := writeFile(t, filepath.Join(t.TempDir(), "bad.yaml"), "tasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n    dependencies:\n      - {id: a, on: sometimes}\n")
	r := gs(t, "", "validate", wf)
	r.want(t, 2)
	if !strings.Contains(r.stderr, `bad.yaml:7: task "b": dependencies[0].on: "sometimes" is not a condition: use success (the default), failure or any`) {
		t.Errorf("validate: %s", r.stderr)
	}
}

// Through a daemon: the conditions reach its scheduler (the aggregate runs
// on a partial sweep, the clean-up of a run that succeeded is not needed),
// its queue and the run's summary say which tasks were not needed, and
// the run's exit code is the failed run's alone; without it, 0.
func TestConditionsThroughTheDaemon(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: train-${seed}
    matrix: {seed: [1, 2]}
    retries: 0
    args: `+sh("test ${seed} != 2 || test -e fixed")+`
  - id: aggregate
    dependencies: [{id: "train-*", on: any}]
    args: ['true']
  - id: clean-1
    dependencies: [{id: train-1, on: failure}]
    args: ['true']
`)
	r := d.gs(t, dir, nil, "run", "--daemon", "--socket", d.socket, wf)
	r.want(t, 1)
	for _, want := range []string{"skipped   1/clean-1 (not needed: 1/train-1 completed)", ": 2 complete, 1 failed, 1 not needed\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run 1 stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "blocked 1/clean-1") {
		t.Errorf("clean-1 is named among the blocked tasks:\n%s", r.stdout)
	}
	var clean client.TaskInfo
	for _, task := range d.queue(t) {
		if task.ID == "1/clean-1" {
			clean = task
		}
	}
	if clean.State != "blocked" || !clean.NotNeeded || clean.BlockedBy != "1/train-1" {
		t.Errorf("queue's clean-1: %+v", clean)
	}

	writeFile(t, filepath.Join(dir, "fixed"), "")
	r = d.gs(t, dir, nil, "run", "--daemon", "--socket", d.socket, wf)
	r.want(t, 0)
	if !strings.Contains(r.stdout, ": 3 complete, 1 not needed\n") {
		t.Errorf("run 2 stdout:\n%s", r.stdout)
	}
}
