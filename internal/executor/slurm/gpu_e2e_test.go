package slurm

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/task"
)

// TestRunGPUTasksWithoutNvidiaSMI: on a machine without nvidia-smi, a
// workflow whose GPU tasks all run on Slurm runs (no refusal, no GPU
// state awaited or reported); each asks Slurm for the type its budget
// needs, and sees the GPU Slurm gave it.
func TestRunGPUTasksWithoutNvidiaSMI(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.env = append(c.env, "GPUSCHED_NVIDIA_SMI="+filepath.Join(t.TempDir(), "no-nvidia-smi"))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
slurm:
  gpu_types: {small: 16384, big: 81920}
tasks:
  - id: fits-small
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
    resources: {device: cuda, memory_mib: 8000}
  - id: needs-big
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
    resources: {device: cuda, memory_mib: 20000}
  - id: whole
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
    resources: {device: cuda, exclusive: true}
  - id: untyped
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
    resources: {device: cuda, memory_mib: 20000}
    slurm:
      gpu_types: {}
  - id: cpu
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
`)
	run := filepath.Join(dir, "run")
	events := filepath.Join(dir, "events.ndjson")
	out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress", "--events", events).CombinedOutput()
	if err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); strings.Contains(line, "nvidia-smi") || strings.Contains(line, "card ") || len(f) > 1 && f[1] == "gpu" {
			t.Errorf("run's output speaks of this machine's GPUs: %q", line)
		}
	}
	if ev := readFile(t, events); strings.Contains(ev, "gpu-unknown") {
		t.Errorf("events tell of an unknown GPU state:\n%s", ev)
	}
	want := map[string]string{"fits-small": "gpu:small:1", "needs-big": "gpu:big:1", "whole": "gpu:1", "untyped": "gpu:1", "cpu": ""}
	for id, gres := range want {
		call := sbatchOf(t, c, id)
		if got := optionOf(call, "--gres="); got != gres {
			t.Errorf("%s: sbatch asks --gres=%q, want %q (%s)", id, got, gres, call)
		}
		devices := "devices=0\n"
		if gres == "" {
			devices = "devices=\n"
		}
		if log := readFile(t, filepath.Join(run, "logs", id+".attempt-1.log")); log != devices {
			t.Errorf("%s's log = %q, want %q", id, log, devices)
		}
	}
}

// TestRunGPUOutOfMemoryGrowsTheType: a Slurm GPU task that runs out of
// GPU memory is retried with a grown budget, which asks for a larger
// type; grown past the largest, the retry asks for the largest and the
// attempt's record says so.
func TestRunGPUOutOfMemoryGrowsTheType(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.env = append(c.env, "GPUSCHED_NVIDIA_SMI="+filepath.Join(t.TempDir(), "no-nvidia-smi"))
	dir := t.TempDir()
	// Attempts 1 to 3 run out of memory, naming the allocation that
	// failed (as PyTorch does); the fourth succeeds.
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
slurm:
  gpu_types: {small: 8192, mid: 16384, big: 24576}
tasks:
  - id: train
    executor: slurm
    retries: 5
    retry_delay: 0
    resources: {device: cuda, memory_mib: 7000}
    args:
      - sh
      - -c
      - |
        case $GPUSCHED_ATTEMPT in
        1) echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"; exit 1;;
        2|3) echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.00 GiB"; exit 1;;
        esac
        echo trained
`)
	run := filepath.Join(dir, "run")
	if out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out)
	}
	var gres []string
	for _, call := range c.calls() {
		if strings.HasPrefix(call, "sbatch ") {
			gres = append(gres, optionOf(call, "--gres="))
		}
	}
	// 7000 -> small; +2048+512 = 9560 -> mid; +10240+512 = 20312 -> big;
	// +10240+512 = 31064, more than big: big again, budget 24576.
	if want := []string{"gpu:small:1", "gpu:mid:1", "gpu:big:1", "gpu:big:1"}; !slices.Equal(gres, want) {
		t.Errorf("the attempts asked for %q, want %q", gres, want)
	}
	hist := history(t, c, dir, run, "train")
	if len(hist) != 4 {
		t.Fatalf("%d attempts, want 4: %+v", len(hist), hist)
	}
	for i, want := range []int64{7000, 9560, 20312, 24576} {
		if hist[i].MemRequestedMiB != want {
			t.Errorf("attempt %d's budget = %d MiB, want %d", i+1, hist[i].MemRequestedMiB, want)
		}
	}
	if e := hist[0].Error; !strings.Contains(e, "grows from 7000 to 9560 MiB") {
		t.Errorf("attempt 1's error %q: want its growth", e)
	}
	if e := hist[2].Error; !strings.Contains(e, "grows from 20312 to 24576 MiB, not 31064") || !strings.Contains(e, "largest GPU type") {
		t.Errorf("attempt 3's error %q: want the budget held at the largest type's 24576 MiB", e)
	}
	if hist[3].Error != "" {
		t.Errorf("attempt 4 failed: %s", hist[3].Error)
	}
}

// sbatchOf returns the sbatch call of task id's first attempt.
func sbatchOf(t *testing.T, c *cluster, id string) string {
	t.Helper()
	for _, call := range c.calls() {
		if strings.HasPrefix(call, "sbatch ") && strings.Contains(call, "--comment=gpusched task="+id+" attempt=1 ") {
			return call
		}
	}
	t.Fatalf("no sbatch call for %s in %q", id, c.calls())
	return ""
}

// optionOf returns the value of the option of call that starts with
// prefix ("--gres="); "" when there is none.
func optionOf(call, prefix string) string {
	for _, f := range strings.Fields(call) {
		if v, ok := strings.CutPrefix(f, prefix); ok {
			return v
		}
	}
	return ""
}

// history returns task id's attempts as gpusched status --json tells
// them.
func history(t *testing.T, c *cluster, dir, run, id string) []task.Attempt {
	t.Helper()
	out, err := c.gpusched(t, dir, "status", "--run-dir", run, "--json").Output()
	if err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var st struct {
		Tasks []struct {
			ID      string         `json:"id"`
			History []task.Attempt `json:"history"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, tk := range st.Tasks {
		if tk.ID == id {
			return tk.History
		}
	}
	t.Fatalf("status has no task %s:\n%s", id, out)
	return nil
}
