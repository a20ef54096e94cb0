package gpusched_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
)

// A Planner reads the run directory while its caller gets the tasks
// ready, and still reports what PlanWith does, in the same order: a
// problem with the tasks or with --force and the like before one with
// the run directory.
func TestPlannerReportsTasksBeforeTheRunDirectory(t *testing.T) {
	t.Parallel()
	junk := t.TempDir()
	if err := os.WriteFile(filepath.Join(junk, gpusched.StateFile), []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := []gpusched.TaskSpec{{ID: "a", Payload: []string{"true"}}}
	bad := []gpusched.TaskSpec{{ID: "a", Payload: []string{"true"}, Dependencies: []string{"nope"}}}

	if _, err := gpusched.NewPlanner(junk).Plan(bad, gpusched.SubmitOptions{}); !errors.Is(err, gpusched.ErrUnknownDependency) {
		t.Errorf("bad tasks on a bad run directory: %v, want ErrUnknownDependency", err)
	}
	if _, err := gpusched.NewPlanner(junk).Plan(good, gpusched.SubmitOptions{Force: []string{"nope"}}); !errors.Is(err, gpusched.ErrUnknownTask) {
		t.Errorf("--force of no task on a bad run directory: %v, want ErrUnknownTask", err)
	}
	_, want := gpusched.PlanWith(junk, good, gpusched.SubmitOptions{})
	_, err := gpusched.NewPlanner(junk).Plan(good, gpusched.SubmitOptions{})
	if err == nil || want == nil || err.Error() != want.Error() || !strings.Contains(err.Error(), "state db") {
		t.Errorf("good tasks on a bad run directory: %v, want %v, naming the state db", err, want)
	}
	p := gpusched.NewPlanner(junk)
	p.Wait() // a caller whose tasks did not load: returns once the reading ends
	p.Wait()
}

// One Planner plans several submissions against what it read once, each
// as PlanWith would; a run directory that does not exist has every task
// never run.
func TestPlannerPlansAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	tasks := inputTasks(dir, ran)
	writeInput(t, filepath.Join(dir, "data", "a.csv"), "1\n")
	writeInput(t, filepath.Join(dir, "params.json"), "{}")
	writeInput(t, filepath.Join(dir, "other.txt"), "x")

	fresh, err := gpusched.NewPlanner(filepath.Join(dir, "none")).Plan(tasks, gpusched.SubmitOptions{})
	if err != nil || len(fresh) != len(tasks) || !fresh[0].Run || fresh[0].Why != "never ran" {
		t.Fatalf("plan of a run directory that does not exist: %+v, %v", fresh, err)
	}
	runDir := filepath.Join(dir, "run")
	runWith(t, runDir, tasks, gpusched.SubmitOptions{})
	writeInput(t, filepath.Join(dir, "params.json"), `{"lr": 2}`)

	p := gpusched.NewPlanner(runDir)
	for _, opts := range []gpusched.SubmitOptions{{}, {Force: []string{"other"}}, {Only: []string{"other"}}} {
		want, err := gpusched.PlanWith(runDir, tasks, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Plan(tasks, opts)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Planner.Plan(%+v) = %+v, %v; PlanWith says %+v", opts, got, err, want)
		}
		checked, err := gpusched.CheckTasks(tasks)
		if err != nil {
			t.Fatal(err)
		}
		got, err = p.PlanChecked(checked, opts)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Planner.PlanChecked(%+v) = %+v, %v; PlanWith says %+v", opts, got, err, want)
		}
	}
	if got := planWhy(t, runDir, tasks, gpusched.SubmitOptions{}); got["train"] != "input changed: params.json" || got["prepare"] != "" {
		t.Errorf("after params.json changed: %v", got)
	}
}

// CheckTasks finds what ValidateTasks finds, and keeps nothing then.
func TestCheckTasksAsValidateTasks(t *testing.T) {
	t.Parallel()
	for _, tasks := range [][]gpusched.TaskSpec{
		{{ID: "a", Payload: []string{"true"}, Dependencies: []string{"nope"}}},
		{{ID: "a", Payload: []string{"true"}, Dependencies: []string{"b"}}, {ID: "b", Payload: []string{"true"}, Dependencies: []string{"a"}}},
		{{ID: "a", Payload: []string{"true"}, Executor: "slurmm"}},
		{{ID: "a"}},
		{{ID: "a", Payload: []string{"true"}}},
	} {
		want := gpusched.ValidateTasks(tasks)
		checked, err := gpusched.CheckTasks(tasks)
		if fmt.Sprint(err) != fmt.Sprint(want) || reflect.TypeOf(err) != reflect.TypeOf(want) || (checked == nil) != (err != nil) {
			t.Errorf("CheckTasks(%+v) = %v, %v; ValidateTasks says %v", tasks, checked, err, want)
		}
	}
}
