package workflow_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// resources.gpus: read as a whole number, taken from defaults like the
// other resources keys, and checked with the line of the key.
func TestResourcesGPUs(t *testing.T) {
	t.Parallel()
	src := `defaults:
  resources: {device: cuda, memory_mib: 20000, gpus: 4}
tasks:
  - id: two
    args: [x]
    resources: {device: cuda, memory_mib: 20000, gpus: 2}
  - id: from-defaults
    args: [x]
  - id: own-memory
    args: [x]
    resources: {memory_mib: 100}
  - id: cpu
    args: [x]
    resources: {device: cpu}
`
	w, err := workflow.Parse(wfPath, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]gpusched.ResourceRequest{
		"two":           {Device: gpusched.CUDA, MemoryMiB: 20000, GPUs: 2},
		"from-defaults": {Device: gpusched.CUDA, MemoryMiB: 20000, GPUs: 4},
		"own-memory":    {Device: gpusched.CUDA, MemoryMiB: 100, GPUs: 4},
		"cpu":           {Device: gpusched.CPU},
	}
	for _, task := range w.Tasks {
		if !reflect.DeepEqual(task.Resources, want[task.ID]) {
			t.Errorf("task %s: resources %+v, want %+v", task.ID, task.Resources, want[task.ID])
		}
	}
}

func TestResourcesGPUsErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		src      string
		line     int
		contains []string
	}{
		{"too many", "tasks:\n  - id: a\n    args: [x]\n    resources:\n      device: cuda\n      memory_mib: 10\n      gpus: 65\n",
			7, []string{`task "a"`, "resources.gpus", "from 1 to 64", "65"}},
		{"negative", "tasks:\n  - id: a\n    args: [x]\n    resources:\n      device: cuda\n      memory_mib: 10\n      gpus: -2\n",
			7, []string{`task "a"`, "resources.gpus", "-2"}},
		{"on a cpu task", "tasks:\n  - id: a\n    args: [x]\n    resources:\n      gpus: 2\n",
			5, []string{`task "a"`, "resources.gpus", `"cuda"`}},
		{"not a number", "tasks:\n  - id: a\n    args: [x]\n    resources: {device: cuda, memory_mib: 10, gpus: two}\n",
			4, []string{`task "a": resources.gpus`, "whole number", `"two"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse(wfPath, []byte(tt.src))
			var we *workflow.Error
			if !errors.As(err, &we) {
				t.Fatalf("Parse error %v, want a *workflow.Error", err)
			}
			if we.Line != tt.line {
				t.Errorf("error %q on line %d, want %d", err, we.Line, tt.line)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}
