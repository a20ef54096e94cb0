package gpusched_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// inputTasks: prepare reads data/*.csv, train reads params.json and
// prepare's output, evaluate reads train's; each appends its id to ran.
func inputTasks(dir, ran string) []gpusched.TaskSpec {
	sh := func(script string) []string {
		return []string{"sh", "-c", "echo $GPUSCHED_TASK_ID >> " + ran + "; " + script}
	}
	return []gpusched.TaskSpec{
		{ID: "prepare", Dir: dir, Payload: sh("mkdir -p out && cat data/*.csv > out/data.txt"), Inputs: []string{"data/*.csv"}, Artifacts: []string{"out/data.txt"}},
		{ID: "train", Dir: dir, Dependencies: []string{"prepare"}, Payload: sh("cat params.json out/data.txt > out/model.pt"),
			Inputs: []string{"params.json"}, Artifacts: []string{"out/model.pt"}},
		{ID: "evaluate", Dir: dir, Dependencies: []string{"train"}, Payload: sh("wc -c < out/model.pt > out/eval.txt"), Artifacts: []string{"out/eval.txt"}},
		{ID: "other", Dir: dir, Payload: sh("true"), Inputs: []string{"other.txt"}},
	}
}

func writeInput(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// planWhy returns each task's plan reason, "" for those kept.
func planWhy(t *testing.T, runDir string, tasks []gpusched.TaskSpec, opts gpusched.SubmitOptions) map[string]string {
	t.Helper()
	items, err := gpusched.PlanWith(runDir, tasks, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range items {
		if it.Run {
			out[it.ID] = it.Why
		}
	}
	return out
}

// runWith runs tasks with opts on runDir, returning what SubmitWith said
// and the records.
func runWith(t *testing.T, runDir string, tasks []gpusched.TaskSpec, opts gpusched.SubmitOptions) ([]gpusched.EditedTask, map[string]gpusched.Record) {
	t.Helper()
	s, err := gpusched.New(runDir, gpusched.Scheduling{MaxParallelTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	edited, err := s.SubmitWith(context.Background(), tasks, opts)
	if err != nil {
		t.Fatal(err)
	}
	return edited, run(t, s)
}

// A changed input makes its task run again, and everything downstream,
// with the reason in Plan and in the records; an added file that a glob
// finds is a change too; a task whose inputs did not change is kept.
func TestChangedInputRerunsTaskAndDownstream(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	writeInput(t, filepath.Join(dir, "params.json"), `{"lr": 1}`)
	writeInput(t, filepath.Join(dir, "data", "a.csv"), "1\n")
	tasks := inputTasks(dir, ran)
	runTasks(t, runDir, tasks)
	executions(t, ran)

	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); len(why) != 0 {
		t.Fatalf("nothing changed, yet the plan runs %v", why)
	}
	writeInput(t, filepath.Join(dir, "params.json"), `{"lr": 2}`)
	want := map[string]string{"train": "input changed: params.json", "evaluate": "upstream train reruns"}
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); !mapsEqual(why, want) {
		t.Errorf("plan after editing params.json: %v, want %v", why, want)
	}
	recs := runTasks(t, runDir, tasks)
	if got := executions(t, ran); !slices.Equal(got, []string{"train", "evaluate"}) {
		t.Errorf("ran %v, want train and evaluate", got)
	}
	if recs["train"].Rerun != "input changed: params.json" || recs["evaluate"].Rerun != "upstream train reruns" {
		t.Errorf("reasons: train %q, evaluate %q", recs["train"].Rerun, recs["evaluate"].Rerun)
	}

	writeInput(t, filepath.Join(dir, "data", "b.csv"), "2\n")
	want = map[string]string{"prepare": "input added: data/b.csv", "train": "upstream prepare reruns", "evaluate": "upstream train reruns"}
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); !mapsEqual(why, want) {
		t.Errorf("plan after adding data/b.csv: %v, want %v", why, want)
	}
	runTasks(t, runDir, tasks)
	if got := executions(t, ran); !slices.Equal(got, []string{"prepare", "train", "evaluate"}) {
		t.Errorf("ran %v", got)
	}
	if err := os.Remove(filepath.Join(dir, "data", "a.csv")); err != nil {
		t.Fatal(err)
	}
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); why["prepare"] != "input removed: data/a.csv" {
		t.Errorf("plan after removing data/a.csv: %v", why)
	}
	// An input that appears where none was: "other" read nothing.
	writeInput(t, filepath.Join(dir, "other.txt"), "x")
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); why["other"] != "input added: other.txt" {
		t.Errorf("plan after creating other.txt: %v", why)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// What is saved is the inputs as the attempt found them when it started:
// a task that changes its own input has read the old one, and runs again
// next time. With hash_inputs, a touched but unchanged input is the same.
func TestInputsAreReadWhenTheAttemptStarts(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	writeInput(t, filepath.Join(dir, "counter"), "1\n")
	tasks := []gpusched.TaskSpec{{ID: "count", Dir: dir, Payload: []string{"sh", "-c", "echo 2 >> counter"}, Inputs: []string{"counter"}}}
	runTasks(t, runDir, tasks)
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); why["count"] != "input changed: counter" {
		t.Errorf("the task changed its input while it ran; plan = %v, want it to run again", why)
	}

	tasks = []gpusched.TaskSpec{{ID: "read", Dir: dir, Payload: []string{"true"}, Inputs: []string{"counter"}, HashInputs: true}}
	runTasks(t, runDir, tasks)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "counter"), later, later); err != nil {
		t.Fatal(err)
	}
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); len(why) != 0 {
		t.Errorf("a touched input with hash_inputs: plan runs %v", why)
	}
	writeInput(t, filepath.Join(dir, "counter"), "9\n9\n")
	if why := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); why["read"] != "input changed: counter" {
		t.Errorf("a rewritten hashed input: plan = %v", why)
	}
}

// An input that is a named pipe fails the attempt before it starts, at
// once and without a retry, saying what it is.
func TestFIFOInputFailsTheTask(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks := []gpusched.TaskSpec{{ID: "a", Dir: dir, Payload: []string{"true"}, Inputs: []string{"pipe"}, Retries: 3}}
	recs := runTasks(t, runDir, tasks)
	r := recs["a"]
	if r.State != gpusched.StateFailed || len(r.Attempts) != 1 || !strings.Contains(r.Error, "input pipe: not a regular file (a named pipe)") {
		t.Errorf("a = %s after %d attempts: %q; want failed once, naming the pipe", r.State, len(r.Attempts), r.Error)
	}
}

// Force runs named tasks again, and what depends on them; Only runs the
// named tasks and nothing else, their dependencies kept; From runs a task
// and everything downstream of it.
func TestForceOnlyFrom(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	writeInput(t, filepath.Join(dir, "params.json"), "{}")
	writeInput(t, filepath.Join(dir, "data", "a.csv"), "1\n")
	tasks := inputTasks(dir, ran)
	runTasks(t, runDir, tasks)
	executions(t, ran)

	tests := []struct {
		name string
		opts gpusched.SubmitOptions
		ran  []string
		plan map[string]string
	}{
		{"force", gpusched.SubmitOptions{Force: []string{"train"}}, []string{"train", "evaluate"},
			map[string]string{"train": "forced", "evaluate": "upstream train reruns"}},
		{"only", gpusched.SubmitOptions{Only: []string{"train", "other"}}, []string{"train", "other"},
			map[string]string{"train": "forced", "other": "forced"}},
		{"from", gpusched.SubmitOptions{From: []string{"prepare"}}, []string{"prepare", "train", "evaluate"},
			map[string]string{"prepare": "forced", "train": "forced", "evaluate": "forced"}},
	}
	for _, tt := range tests {
		if why := planWhy(t, runDir, tasks, tt.opts); !mapsEqual(why, tt.plan) {
			t.Errorf("%s: plan %v, want %v", tt.name, why, tt.plan)
		}
		_, recs := runWith(t, runDir, tasks, tt.opts)
		got := executions(t, ran)
		slices.Sort(got) // train and other may run in either order
		if want := slices.Sorted(slices.Values(tt.ran)); !slices.Equal(got, want) {
			t.Errorf("%s: ran %v, want %v", tt.name, got, want)
		}
		if tt.name == "only" {
			if _, ok := recs["evaluate"]; ok || len(recs) != 3 {
				t.Errorf("only: records of %d tasks; want train, other and prepare (its dependency), not evaluate", len(recs))
			}
		}
	}
	items, err := gpusched.PlanWith(runDir, tasks, gpusched.SubmitOptions{Only: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}
	if it := items[0]; it.ID != "prepare" || !it.Skipped || it.Run || it.Why != "not selected" {
		t.Errorf("plan of a task Only leaves out: %+v", it)
	}
}

// Only refuses, before anything runs, a task whose dependency would run
// again, naming it and why; so does From for what lies upstream.
func TestOnlyRefusesStaleDependencies(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	writeInput(t, filepath.Join(dir, "params.json"), "{}")
	writeInput(t, filepath.Join(dir, "data", "a.csv"), "1\n")
	tasks := inputTasks(dir, ran)
	runTasks(t, runDir, tasks)
	executions(t, ran)
	writeInput(t, filepath.Join(dir, "data", "a.csv"), "changed\n")

	for _, opts := range []gpusched.SubmitOptions{{Only: []string{"evaluate"}}, {From: []string{"train"}}} {
		_, err := gpusched.PlanWith(runDir, tasks, opts)
		var te *gpusched.TaskError
		if !errors.Is(err, gpusched.ErrStaleDependency) || !errors.As(err, &te) || !strings.Contains(err.Error(), `"prepare" (input changed: data/a.csv)`) {
			t.Errorf("PlanWith(%+v) = %v; want an ErrStaleDependency naming prepare and why", opts, err)
		}
		s, err := gpusched.New(runDir, gpusched.Scheduling{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.SubmitWith(context.Background(), tasks, opts)
		if !errors.Is(err, gpusched.ErrStaleDependency) {
			t.Errorf("SubmitWith(%+v) = %v; want ErrStaleDependency", opts, err)
		}
		if recs := s.Records(); len(recs) != 0 {
			t.Errorf("SubmitWith refused, yet submitted %d tasks", len(recs))
		}
		s.Close()
	}
	var te *gpusched.TaskError
	if _, err := gpusched.PlanWith(runDir, tasks, gpusched.SubmitOptions{Force: []string{"nope"}}); !errors.Is(err, gpusched.ErrUnknownTask) || !errors.As(err, &te) || te.TaskID != "nope" {
		t.Errorf("an unknown id: %v", err)
	}
}

// A completed task whose artifact was edited and that runs again is
// reported before it runs, and overwrites the edit; with KeepEdited it is
// kept, what depends on it only too, and the next plan still sees the
// edit.
func TestEditedArtifacts(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	writeInput(t, filepath.Join(dir, "params.json"), "{}")
	writeInput(t, filepath.Join(dir, "data", "a.csv"), "1\n")
	tasks := inputTasks(dir, ran)
	runTasks(t, runDir, tasks)
	executions(t, ran)
	model := filepath.Join(dir, "out", "model.pt")
	writeInput(t, model, "hand-tuned")
	writeInput(t, filepath.Join(dir, "params.json"), `{"lr": 3}`)

	items, err := gpusched.PlanWith(runDir, tasks, gpusched.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if it := items[1]; !it.Run || it.Why != "input changed: params.json" || !slices.Equal(it.Edited, []string{"out/model.pt"}) {
		t.Errorf("plan for train = %+v; want it to run, naming the edited model", it)
	}

	edited, recs := runWith(t, runDir, tasks, gpusched.SubmitOptions{KeepEdited: true})
	want := []gpusched.EditedTask{{ID: "train", Artifacts: []string{"out/model.pt"}, Kept: true, Why: "input changed: params.json"}}
	if len(edited) != 1 || edited[0].ID != want[0].ID || !edited[0].Kept || edited[0].Why != want[0].Why || !slices.Equal(edited[0].Artifacts, want[0].Artifacts) {
		t.Errorf("SubmitWith said %+v, want %+v", edited, want)
	}
	if got := executions(t, ran); len(got) != 0 {
		t.Errorf("with KeepEdited, ran %v", got)
	}
	if b, _ := os.ReadFile(model); string(b) != "hand-tuned" {
		t.Errorf("the edited model was overwritten: %q", b)
	}
	if recs["train"].State != gpusched.StateComplete {
		t.Errorf("train: %s", recs["train"].State)
	}
	// Nothing new was saved of it: the next run still finds it edited,
	// and its changed input.
	items, err = gpusched.PlanWith(runDir, tasks, gpusched.SubmitOptions{KeepEdited: true})
	if err != nil {
		t.Fatal(err)
	}
	if it := items[1]; it.Run || !strings.HasPrefix(it.Why, "complete, kept with its edited artifacts (it would run: input changed: params.json") {
		t.Errorf("plan with KeepEdited after a kept run: %+v", it)
	}

	edited, _ = runWith(t, runDir, tasks, gpusched.SubmitOptions{})
	if len(edited) != 1 || edited[0].Kept {
		t.Errorf("without KeepEdited, SubmitWith said %+v; want train not kept", edited)
	}
	if got := executions(t, ran); !slices.Equal(got, []string{"train", "evaluate"}) {
		t.Errorf("ran %v", got)
	}
	if b, _ := os.ReadFile(model); string(b) == "hand-tuned" {
		t.Error("train ran, yet the model is the edited one")
	}

	// A task named by Force runs whatever KeepEdited says.
	writeInput(t, model, "edited again")
	edited, _ = runWith(t, runDir, tasks, gpusched.SubmitOptions{Force: []string{"train"}, KeepEdited: true})
	if len(edited) != 1 || edited[0].Kept || edited[0].Why == "" {
		t.Errorf("forced: SubmitWith said %+v; want train not kept", edited)
	}
	if got := executions(t, ran); !slices.Equal(got, []string{"train", "evaluate"}) {
		t.Errorf("forced: ran %v", got)
	}
}
