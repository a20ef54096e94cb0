package workflow_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

const resPath = "/home/ml/flows/res.yaml"

// A task's cores, host memory and custom resources, and the scheduling
// keys that declare the machine's, parse into the Go fields; defaults
// give them to every task, key by key, whatever its device; a matrix's
// variants share no map.
func TestResourceKeys(t *testing.T) {
	t.Parallel()
	src := `scheduling:
  cpus: 16
  memory_mib_host: 64000
  resources: {licenses: 2, db: 5}
defaults:
  resources: {cpus: 2, licenses: 1}
tasks:
  - id: big
    args: [x]
    resources: {cpus: 8, memory_mib_host: 16000, db: 2}
  - id: plain
    args: [x]
  - id: gpu
    args: [x]
    resources: {device: cuda, memory_mib: 1000, memory_mib_host: 2000}
  - id: own-${n}
    matrix: {n: [1, 2]}
    args: [x]
    resources: {licenses: 2}
`
	w, err := workflow.Parse(resPath, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s := w.Scheduling; s.CPUs != 16 || s.MemoryMiBHost != 64000 || !reflect.DeepEqual(s.Resources, map[string]int{"licenses": 2, "db": 5}) {
		t.Errorf("scheduling = %+v", s)
	}
	want := map[string]gpusched.ResourceRequest{
		"big":   {CPUs: 8, MemoryMiBHost: 16000, Counters: map[string]int{"db": 2, "licenses": 1}},
		"plain": {CPUs: 2, Counters: map[string]int{"licenses": 1}},
		"gpu":   {Device: gpusched.CUDA, MemoryMiB: 1000, CPUs: 2, MemoryMiBHost: 2000, Counters: map[string]int{"licenses": 1}},
		"own-1": {CPUs: 2, Counters: map[string]int{"licenses": 2}},
		"own-2": {CPUs: 2, Counters: map[string]int{"licenses": 2}},
	}
	for _, tk := range w.Tasks {
		if !reflect.DeepEqual(tk.Resources, want[tk.ID]) {
			t.Errorf("%s: resources %+v, want %+v", tk.ID, tk.Resources, want[tk.ID])
		}
	}
	w.Tasks[3].Resources.Counters["licenses"] = 9
	w.Tasks[1].Resources.Counters["licenses"] = 9
	if w.Tasks[4].Resources.Counters["licenses"] != 2 || w.Tasks[2].Resources.Counters["licenses"] != 1 {
		t.Errorf("tasks share a map of resources: %+v", w.Tasks)
	}
}

// Mistakes name their line, one message each.
func TestResourceKeyErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		src      string
		line     int
		contains []string
		task     bool // a *gpusched.TaskError
	}{
		{"a resource not declared", "tasks:\n  - id: a\n    args: [x]\n    resources:\n      cpus: 2\n      licenses: 1\n", 6,
			[]string{`task "a": resources: unknown key "licenses"`, "declared under scheduling.resources, e.g. resources: {licenses: 2}"}, false},
		{"a misspelt resource", "scheduling:\n  resources: {licenses: 2}\ntasks:\n  - id: a\n    args: [x]\n    resources: {licences: 1}\n", 6,
			[]string{`unknown key "licences" (did you mean "licenses"?)`, "scheduling.resources (licenses)"}, false},
		{"a misspelt key", "tasks:\n  - id: a\n    args: [x]\n    resources: {cpu: 2}\n", 4,
			[]string{`unknown key "cpu" (did you mean "cpus"?)`}, false},
		{"more units than declared", "scheduling:\n  resources:\n    licenses: 2\ntasks:\n  - id: a\n    args: [x]\n    resources: {licenses: 3}\n", 7,
			[]string{`task "a": resources.licenses: asks for 3 of "licenses", which has 2 in all`}, true},
		{"a default that names no resource, said once", "defaults:\n  resources: {tokens: 1}\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n", 2,
			[]string{`unknown key "tokens"`}, false},
		{"negative cpus", "tasks:\n  - id: a\n    args: [x]\n    resources: {cpus: -1}\n", 4,
			[]string{"resources.cpus must not be negative"}, false},
		{"host memory not a number", "tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_host: lots\n", 5,
			[]string{"memory_mib_host", `"lots"`}, false},
		{"no unit of a resource", "scheduling:\n  resources: {licenses: 2}\ntasks:\n  - id: a\n    args: [x]\n    resources: {licenses: 0}\n", 6,
			[]string{"resources.licenses: must be at least 1 (got 0)"}, true},
		{"scheduling.resources not a mapping", "scheduling:\n  resources: [licenses]\ntasks:\n  - id: a\n    args: [x]\n", 2,
			[]string{"scheduling.resources must be a mapping of resource names to units"}, false},
		{"scheduling.resources with no unit", "scheduling:\n  resources: {licenses: 0}\ntasks:\n  - id: a\n    args: [x]\n", 2,
			[]string{"scheduling.resources.licenses must be at least 1 (got 0)"}, false},
		{"scheduling.resources named as a key", "scheduling:\n  resources:\n    cpus: 4\ntasks:\n  - id: a\n    args: [x]\n", 3,
			[]string{`scheduling.resources: "cpus" is a key of resources`}, false},
		{"negative scheduling.cpus", "scheduling:\n  cpus: -2\ntasks:\n  - id: a\n    args: [x]\n", 2,
			[]string{"scheduling.cpus must not be negative"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse(resPath, []byte(tt.src))
			var list *workflow.ErrorList
			if !errors.As(err, &list) || len(list.Errs) != 1 {
				t.Fatalf("Parse = %v; want one error", err)
			}
			we := list.Errs[0]
			msg := we.Error()
			if !strings.HasPrefix(msg, resPath+":"+strconv.Itoa(tt.line)+": ") {
				t.Errorf("error %q is not on line %d", msg, tt.line)
			}
			for _, s := range tt.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
			var te *gpusched.TaskError
			if tt.task != errors.As(err, &te) || tt.task && !errors.Is(err, gpusched.ErrInvalidTask) {
				t.Errorf("error %q: a task error %v, want %v", msg, !tt.task, tt.task)
			}
		})
	}
}
