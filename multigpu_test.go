package gpusched

import (
	"slices"
	"testing"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/task"
)

// A task on several cards sees them all, in the order chosen, numbered as
// nvidia-smi does; a task on one card sees that card alone, as before.
func TestEnvNamesEveryCard(t *testing.T) {
	r := runner{s: &Scheduler{runDir: "/runs/x"}}
	sp := &task.Spec{ID: "train", Resources: task.ResourceRequest{Device: task.CUDA, MemoryMiB: 20000, GPUs: 2}}
	for _, tt := range []struct {
		name string
		gpu  *engine.Assignment
		want []string
	}{
		{"two cards", &engine.Assignment{Index: 3, UUID: "GPU-c", MemoryMiB: 20000,
			More: []engine.AssignedCard{{Index: 3, UUID: "GPU-c"}, {Index: 1, UUID: "GPU-a"}}},
			[]string{"CUDA_VISIBLE_DEVICES=3,1", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "GPUSCHED_GPU_INDEX=3,1",
				"GPUSCHED_GPU_UUID=GPU-c,GPU-a", "GPUSCHED_GPU_MEMORY_MIB=20000"}},
		{"one card", &engine.Assignment{Index: 2, UUID: "GPU-b", MemoryMiB: 500},
			[]string{"CUDA_VISIBLE_DEVICES=2", "GPUSCHED_GPU_INDEX=2", "GPUSCHED_GPU_UUID=GPU-b", "GPUSCHED_GPU_MEMORY_MIB=500"}},
		{"no card", nil, []string{"CUDA_VISIBLE_DEVICES="}},
	} {
		env := r.env(engine.AttemptRequest{Spec: sp, Number: 1, GPU: tt.gpu}, nil)
		for _, kv := range tt.want {
			if !slices.Contains(env, kv) {
				t.Errorf("%s: environment lacks %s", tt.name, kv)
			}
		}
	}
}

// An executor that places work itself is asked for as many GPUs as the
// task takes (Slurm's --gres=gpu:N).
func TestGPUsAskedOfAPlacer(t *testing.T) {
	for _, tt := range []struct {
		r    task.ResourceRequest
		want int
	}{
		{task.ResourceRequest{Device: task.CPU}, 0},
		{task.ResourceRequest{Device: task.CUDA, MemoryMiB: 1}, 1},
		{task.ResourceRequest{Device: task.CUDA, MemoryMiB: 1, GPUs: 4}, 4},
	} {
		if got := gpus(&task.Spec{Resources: tt.r}); got != tt.want {
			t.Errorf("gpus(%+v) = %d, want %d", tt.r, got, tt.want)
		}
	}
}
