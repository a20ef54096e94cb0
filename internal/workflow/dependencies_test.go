package workflow_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// The example of the docs: a sweep aggregated on a partial result, a
// clean-up on failure, plain and mapped items mixed.
const conditionsDoc = `tasks:
  - id: prepare
    args: [sh, prepare.sh]
  - id: train-${seed}
    matrix: {seed: [1, 2, 3]}
    dependencies: [prepare]
    args: [python3, train.py, --seed, "${seed}"]
  - id: aggregate
    dependencies: [prepare, {id: "train-*", on: any}]
    args: [python3, aggregate.py]
  - id: cleanup
    dependencies:
      - id: prepare
        on: failure
    args: [sh, cleanup.sh]
  - id: report
    dependencies: [{id: aggregate, on: success}, {id: cleanup, on: any}]
    args: [sh, report.sh]
`

func TestDependencyConditions(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse(wfPath, []byte(conditionsDoc))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]gpusched.TaskSpec{}
	for _, ts := range w.Tasks {
		byID[ts.ID] = ts
	}
	any := gpusched.AfterAny
	tests := []struct {
		id   string
		deps []string
		on   map[string]gpusched.DependencyCondition
	}{
		{"train-1", []string{"prepare"}, nil},
		{"aggregate", []string{"prepare", "train-1", "train-2", "train-3"},
			map[string]gpusched.DependencyCondition{"train-1": any, "train-2": any, "train-3": any}},
		{"cleanup", []string{"prepare"}, map[string]gpusched.DependencyCondition{"prepare": gpusched.AfterFailure}},
		// on: success is the default: not kept as a condition.
		{"report", []string{"aggregate", "cleanup"}, map[string]gpusched.DependencyCondition{"cleanup": any}},
	}
	for _, tt := range tests {
		got := byID[tt.id]
		if !slices.Equal(got.Dependencies, tt.deps) || !maps.Equal(got.DependencyOn, tt.on) {
			t.Errorf("%s: dependencies %q on %v; want %q on %v", tt.id, got.Dependencies, got.DependencyOn, tt.deps, tt.on)
		}
	}
	if err := gpusched.ValidateTasks(w.Tasks); err != nil {
		t.Errorf("ValidateTasks: %v", err)
	}
}

// A task named keeps its own condition, whether a glob matched it before
// or after; two globs that match the same task: the first says.
func TestConditionsOfGlobsAndNames(t *testing.T) {
	t.Parallel()
	doc := `tasks:
  - {id: t-1, args: [x]}
  - {id: t-2, args: [x]}
  - {id: u-1, args: [x]}
  - id: a
    dependencies: [{id: "t-*", on: any}, t-2]
    args: [x]
  - id: b
    dependencies: [{id: t-1, on: failure}, {id: "t-*", on: any}]
    args: [x]
  - id: c
    dependencies: [{id: "*-1", on: failure}, {id: "t-*", on: any}]
    args: [x]
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]gpusched.DependencyCondition{
		"a": {"t-1": gpusched.AfterAny},
		"b": {"t-1": gpusched.AfterFailure, "t-2": gpusched.AfterAny},
		"c": {"t-1": gpusched.AfterFailure, "u-1": gpusched.AfterFailure, "t-2": gpusched.AfterAny},
	}
	for _, ts := range w.Tasks[3:] {
		if !maps.Equal(ts.DependencyOn, want[ts.ID]) {
			t.Errorf("%s: on %v, want %v (dependencies %q)", ts.ID, ts.DependencyOn, want[ts.ID], ts.Dependencies)
		}
	}
}

// ${name} works in a mapped item's id, and is checked there.
func TestConditionsWithTemplates(t *testing.T) {
	t.Parallel()
	doc := `tasks:
  - id: prep-${seed}
    matrix: {seed: [1, 2]}
    args: [x]
  - id: clean-${seed}
    matrix: {seed: [1, 2]}
    dependencies: [{id: "prep-${seed}", on: failure}]
    args: [x]
  - id: lit
    dependencies: [{id: prep-1, on: any}]
    args: [echo, "$${x}"]
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"prep-1", "prep-2"} {
		c := w.Tasks[2+i]
		if !slices.Equal(c.Dependencies, []string{id}) || c.DependencyOn[id] != gpusched.AfterFailure || len(c.DependencyOn) != 1 {
			t.Errorf("%s: %q on %v, want %s on failure", c.ID, c.Dependencies, c.DependencyOn, id)
		}
	}
	if lit := w.Tasks[4]; lit.DependencyOn["prep-1"] != gpusched.AfterAny {
		t.Errorf("lit: on %v", lit.DependencyOn)
	}
	got := problems(t, "tasks:\n  - id: a-${seed}\n    matrix: {seed: [1]}\n    args: [x]\n    dependencies:\n      - {id: \"p-${sed}\", on: any}\n")
	want := []string{`:6: task "a-${seed}": dependencies[0].id: ${sed}: the matrix has no variable sed (it has seed); did you mean ${seed}?`}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}

// Each mistake in a mapped item is told at its line, once, and nothing
// else is said of the item.
func TestDependencyConditionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		deps string // the value of dependencies:, on line 6
		want []string
	}{
		{"unknown on", `[{id: a, on: afterok}]`,
			[]string{`:6: task "t": dependencies[0].on: "afterok" is not a condition: use success (the default), failure or any`}},
		{"missing id", `[{on: any}]`,
			[]string{`:6: task "t": dependencies[0] has no id: give the task it depends on, e.g. {id: prepare, on: failure}`}},
		{"empty id", `[a, {id: "", on: any}]`,
			[]string{`:6: task "t": dependencies[1].id is empty: name the task it depends on`}},
		{"unknown key", `[{id: a, when: any}]`,
			[]string{`:6: task "t": dependencies[0]: unknown key "when" (known keys: id, on)`}},
		{"misspelt key", `[{idd: a, on: any}]`,
			[]string{`:6: task "t": dependencies[0]: unknown key "idd" (did you mean "id"?)`}},
		{"on twice", `[{id: a, on: any, on: failure}]`,
			[]string{`:6: task "t": dependencies[0]: key "on" appears twice`}},
		{"on not a value", `[{id: a, on: [any]}]`,
			[]string{`:6: task "t": dependencies[0].on must be a single value, not a list`}},
		{"a list item", `[a, [b]]`,
			[]string{`:6: task "t": dependencies: each item must be a task id or a mapping such as {id: prepare, on: failure}, not a list`}},
		{"not a list", `{id: a, on: any}`,
			[]string{`:6: task "t": dependencies must be a list, e.g. [a, b] or [prepare, {id: "train-*", on: any}], not a mapping`}},
		{"an unknown task", `[{id: nobody, on: any}]`,
			[]string{`:6: task "t": dependencies: depends on "nobody", which is not defined`}},
		{"a glob that matches nothing", "\n      - {id: \"z*\", on: any}",
			[]string{`:7: task "t": dependencies[0]: "z*" matches no task`}},
		{"a glob after a bad item", "\n      - {on: any}\n      - a\n      - \"z*\"",
			[]string{`:7: task "t": dependencies[0] has no id: give the task it depends on, e.g. {id: prepare, on: failure}`,
				`:9: task "t": dependencies[2]: "z*" matches no task`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "tasks:\n  - id: a\n    args: [x]\n  - id: t\n    args: [x]\n    dependencies: " + tt.deps + "\n"
			if got := problems(t, doc); !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
