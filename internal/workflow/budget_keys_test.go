package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// memory_mib: auto and memory_mib_max land in their Go fields, in a
// task's resources and through the defaults; a task that sets its own
// number takes no maximum from the defaults.
func TestAutoBudgetKeys(t *testing.T) {
	t.Parallel()
	doc := `defaults:
  resources: {device: cuda, memory_mib: auto, memory_mib_max: 20000}
tasks:
  - id: learned
    args: [x]
  - id: capped
    args: [x]
    resources: {memory_mib_max: 9000}
  - id: fixed
    args: [x]
    resources: {memory_mib: 8000}
  - id: own
    args: [x]
    resources: {device: cuda, memory_mib: auto}
  - id: cpu
    args: [x]
    resources: {device: cpu}
`
	w, err := workflow.Parse("/flows/auto.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]gpusched.ResourceRequest{
		"learned": {Device: gpusched.CUDA, MemoryAuto: true, MemoryMaxMiB: 20000},
		"capped":  {Device: gpusched.CUDA, MemoryAuto: true, MemoryMaxMiB: 9000},
		"fixed":   {Device: gpusched.CUDA, MemoryMiB: 8000},
		"own":     {Device: gpusched.CUDA, MemoryAuto: true, MemoryMaxMiB: 20000},
		"cpu":     {Device: gpusched.CPU},
	}
	for _, tk := range w.Tasks {
		if got := tk.Resources; !reflect.DeepEqual(got, want[tk.ID]) {
			t.Errorf("%s: resources %+v, want %+v", tk.ID, got, want[tk.ID])
		}
	}
}

// The mistakes, each named at its line.
func TestAutoBudgetKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, want string }{
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib: auto\n",
			"/f.yaml:5: task \"a\": resources.memory_mib: is a GPU memory budget; set resources.device to \"cuda\" to use it"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      device: cuda\n      memory_mib: automatic\n",
			"/f.yaml:6: task \"a\": resources.memory_mib must be a whole number of MiB or auto, not \"automatic\""},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      device: cuda\n      memory_mib: 100\n      memory_mib_max: 200\n",
			"/f.yaml:7: task \"a\": resources.memory_mib_max: caps a budget learned from history: set memory_mib to auto, or drop memory_mib_max"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      device: cuda\n      memory_mib: auto\n      memory_mib_max: -5\n",
			"/f.yaml:7: task \"a\": resources.memory_mib_max: must not be negative (got -5)"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_max: 100\n",
			"/f.yaml:5: task \"a\": resources.memory_mib_max: caps a GPU memory budget learned from history; set resources.device to \"cuda\" and memory_mib to auto"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      device: cuda\n      memory_mib: auto\n      memory_mib_max: lots\n",
			"/f.yaml:7: task \"a\": resources.memory_mib_max must be a whole number, not \"lots\""},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant prefix %s", tt.doc, err, tt.want)
		}
	}
}

// memory_mib_host: auto and memory_mib_host_max land in their Go fields,
// for CPU and GPU tasks alike, in a task's resources and through the
// defaults; a task that sets its own number takes no maximum from them.
func TestAutoHostBudgetKeys(t *testing.T) {
	t.Parallel()
	doc := `defaults:
  resources: {memory_mib_host: auto, memory_mib_host_max: 16000}
tasks:
  - id: learned
    args: [x]
  - id: capped
    args: [x]
    resources: {memory_mib_host_max: 4000}
  - id: fixed
    args: [x]
    resources: {memory_mib_host: 3000}
  - id: gpu
    args: [x]
    resources: {device: cuda, memory_mib: auto, memory_mib_host: auto}
`
	w, err := workflow.Parse("/flows/host.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]gpusched.ResourceRequest{
		"learned": {MemoryHostAuto: true, MemoryHostMaxMiB: 16000},
		"capped":  {MemoryHostAuto: true, MemoryHostMaxMiB: 4000},
		"fixed":   {MemoryMiBHost: 3000},
		"gpu":     {Device: gpusched.CUDA, MemoryAuto: true, MemoryHostAuto: true, MemoryHostMaxMiB: 16000},
	}
	for _, tk := range w.Tasks {
		if got := tk.Resources; !reflect.DeepEqual(got, want[tk.ID]) {
			t.Errorf("%s: resources %+v, want %+v", tk.ID, got, want[tk.ID])
		}
	}
}

// The host keys' mistakes, each named at its line.
func TestAutoHostBudgetKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, want string }{
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_host: automatic\n",
			"/f.yaml:5: task \"a\": resources.memory_mib_host must be a whole number of MiB or auto, not \"automatic\""},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_host: -3\n",
			"/f.yaml:5: task \"a\": resources.memory_mib_host must not be negative (got -3)"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_host: 100\n      memory_mib_host_max: 200\n",
			"/f.yaml:6: task \"a\": resources.memory_mib_host_max: caps a host memory budget learned from history: set memory_mib_host to auto, or drop memory_mib_host_max"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_host: auto\n      memory_mib_host_max: -5\n",
			"/f.yaml:6: task \"a\": resources.memory_mib_host_max: must not be negative (got -5)"},
		{"tasks:\n  - id: a\n    args: [x]\n    resources:\n      memory_mib_host: auto\n      memory_mib_host_max: lots\n",
			"/f.yaml:6: task \"a\": resources.memory_mib_host_max must be a whole number, not \"lots\""},
		{"scheduling:\n  resources:\n    memory_mib_host_max: 4\ntasks:\n  - id: a\n    args: [x]\n",
			"/f.yaml:3: scheduling.resources: \"memory_mib_host_max\" is a key of resources"},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant prefix %s", tt.doc, err, tt.want)
		}
	}
}
