package gpusched_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/executor/fakeremote"
)

// GPU tasks of an executor that places its work itself are none of this
// machine's cards' business: a machine without nvidia-smi runs them, and
// a CUDA out-of-memory failure in their log grows their budget.

// TestPlacedGPUTaskWithoutNvidiaSMI: through an executor that places work
// (fakeremote, as Slurm), a GPU task runs where no nvidia-smi exists;
// its first attempt runs out of GPU memory and the retry asks for more.
func TestPlacedGPUTaskWithoutNvidiaSMI(t *testing.T) {
	t.Setenv("GPUSCHED_NVIDIA_SMI", filepath.Join(t.TempDir(), "no-nvidia-smi"))
	s, err := gpusched.New(t.TempDir(), gpusched.Scheduling{},
		gpusched.WithExecutor(fakeremote.New(fakeremote.NewController(0))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	oomOnce := `[ "$GPUSCHED_ATTEMPT" = 1 ] && { echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB"; exit 1; }; echo ok`
	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "placed", Payload: []string{"sh", "-c", oomOnce}, Executor: fakeremote.Name, Retries: 1, RetryDelay: gpusched.NoRetryDelay,
			Resources: gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 1000}},
	})
	if err != nil {
		t.Fatalf("submit a placed GPU task without nvidia-smi: %v", err)
	}
	if err := s.Submit(gpusched.TaskSpec{ID: "local", Payload: []string{"true"},
		Resources: gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 1000}}); err == nil {
		t.Error("a local GPU task was taken without nvidia-smi")
	}
	recs, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if r.State != gpusched.StateComplete || len(r.Attempts) != 2 {
		t.Fatalf("placed: %s after %d attempts (%s), want complete after 2", r.State, len(r.Attempts), r.Error)
	}
	// 1000 + the failed 1024 + the default 512 MiB margin.
	if a := r.Attempts[0]; !strings.Contains(a.Error, "grows from 1000 to 2536 MiB") {
		t.Errorf("attempt 1's error %q: want its budget grown", a.Error)
	}
	if a := r.Attempts[1]; a.MemRequestedMiB != 2536 || a.GPU != nil {
		t.Errorf("attempt 2: budget %d on card %v, want 2536 on none", a.MemRequestedMiB, a.GPU)
	}
}

// TestGPUChecksLeaveSlurmTasks: the checks made before a run (no
// nvidia-smi, a budget larger than every card) concern the GPU tasks that
// run here, not those of the slurm executor.
func TestGPUChecksLeaveSlurmTasks(t *testing.T) {
	t.Setenv("GPUSCHED_NVIDIA_SMI", filepath.Join(t.TempDir(), "no-nvidia-smi"))
	gpuTask := func(id, executor string) gpusched.TaskSpec {
		return gpusched.TaskSpec{ID: id, Payload: []string{"true"}, Executor: executor,
			Resources: gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 1 << 20}}
	}
	onSlurm := []gpusched.TaskSpec{gpuTask("a", "slurm"), gpuTask("b", "slurm"), {ID: "cpu", Payload: []string{"true"}}}
	if err := gpusched.CheckNvidiaSMI(onSlurm); err != nil {
		t.Errorf("CheckNvidiaSMI of slurm GPU tasks: %v", err)
	}
	if err := gpusched.CheckGPUs(context.Background(), gpusched.Scheduling{}, onSlurm); err != nil {
		t.Errorf("CheckGPUs of slurm GPU tasks: %v", err)
	}
	mixed := append(onSlurm, gpuTask("here", ""))
	for name, err := range map[string]error{"CheckNvidiaSMI": gpusched.CheckNvidiaSMI(mixed),
		"CheckGPUs": gpusched.CheckGPUs(context.Background(), gpusched.Scheduling{}, mixed)} {
		if err == nil || !strings.Contains(err.Error(), `"here"`) {
			t.Errorf("%s with a local GPU task: %v, want it refused", name, err)
		}
	}
}
