package workflow_test

import (
	"reflect"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// With KeepChecked, a workflow that parses keeps its tasks as they were
// checked, and a plan of them is the plan of its Tasks; without it, it
// keeps nothing (a run does not need them).
func TestKeepChecked(t *testing.T) {
	t.Parallel()
	const doc = "tasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [y]\n    dependencies: [a]\n    priority: 3\n"
	w, err := workflow.ParseWith("/f.yaml", []byte(doc), workflow.Options{})
	if err != nil || w.Checked() != nil {
		t.Fatalf("without KeepChecked: %v, checked %v; want none kept", err, w.Checked())
	}
	w, err = workflow.ParseWith("/f.yaml", []byte(doc), workflow.Options{KeepChecked: true, Executor: "local"})
	if err != nil || w.Checked() == nil {
		t.Fatalf("with KeepChecked: %v, checked %v", err, w.Checked())
	}
	runDir := t.TempDir() // nothing ran there
	want, err := gpusched.PlanWith(runDir, w.Tasks, gpusched.SubmitOptions{Only: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := gpusched.NewPlanner(runDir).PlanChecked(w.Checked(), gpusched.SubmitOptions{Only: []string{"a"}})
	if err != nil || !reflect.DeepEqual(got, want) || len(got) != 2 || !got[1].Skipped || !got[0].Run {
		t.Errorf("PlanChecked = %+v, %v; PlanWith says %+v", got, err, want)
	}
	if _, err := workflow.ParseWith("/f.yaml", []byte("tasks:\n  - id: a\n    args: [x]\n    dependencies: [c]\n"), workflow.Options{KeepChecked: true}); err == nil {
		t.Error("a workflow with an unknown dependency parsed")
	}
}
