package slurm

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/task"
)

// TestGresFor: a GPU job asks for the smallest of its gpu_types that
// holds its budget; without types or without a budget, any GPU; a budget
// no type holds asks for the largest and says so.
func TestGresFor(t *testing.T) {
	t.Parallel()
	types := &task.SlurmSettings{GPUTypes: map[string]int64{"v100": 16384, "a40": 49152, "a100": 81920, "h100": 81920}}
	for _, tc := range []struct {
		name   string
		gpus   int
		mib    int64
		slurm  *task.SlurmSettings
		gres   string
		noting string // a part of the note; "" for none
	}{
		{"cpu", 0, 0, types, "", ""},
		{"no types", 1, 20000, nil, "gpu:1", ""},
		{"empty settings", 1, 20000, &task.SlurmSettings{Partition: "gpu"}, "gpu:1", ""},
		{"no budget", 1, 0, types, "gpu:1", ""},
		{"smallest", 1, 8000, types, "gpu:v100:1", ""},
		{"exactly", 1, 16384, types, "gpu:v100:1", ""},
		{"next", 1, 16385, types, "gpu:a40:1", ""},
		{"tie by name", 1, 60000, types, "gpu:a100:1", ""},
		{"two", 2, 60000, types, "gpu:a100:2", ""},
		{"eight, any type", 8, 0, types, "gpu:8", ""},
		{"too big", 1, 90000, types, "gpu:a100:1", "90000 MiB is more than any type in slurm.gpu_types has: asking for the largest, a100 (81920 MiB)"},
	} {
		job := executor.Job{GPUs: tc.gpus, GPUMiB: tc.mib, Slurm: tc.slurm}
		gres, note := gresFor(job)
		if gres != tc.gres || (note == "") != (tc.noting == "") || !strings.Contains(note, tc.noting) {
			t.Errorf("%s: gres %q, note %q; want %q, a note with %q", tc.name, gres, note, tc.gres, tc.noting)
		}
		args := sbatchArgs(job, filesOf(job))
		if has := slices.Contains(args, "--gres="+tc.gres); has != (tc.gres != "") {
			t.Errorf("%s: sbatch args %q, want --gres=%s", tc.name, args, tc.gres)
		}
	}
}

// TestHostAsk: a job asks its task's resources.cpus (above 1) as
// --cpus-per-task and its memory_mib_host as --mem in MiB, unless its
// slurm: keys say otherwise; nothing when none says anything.
func TestHostAsk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cpus    int
		hostMiB int64
		slurm   *task.SlurmSettings
		want    []string // the options
	}{
		{"nothing", 0, 0, nil, nil},
		{"one core is Slurm's default", 1, 0, nil, nil},
		{"cores", 8, 0, nil, []string{"--cpus-per-task=8"}},
		{"memory", 0, 24000, &task.SlurmSettings{Partition: "p"}, []string{"--mem=24000M"}},
		{"both", 4, 512, nil, []string{"--cpus-per-task=4", "--mem=512M"}},
		{"slurm keys win", 4, 512, &task.SlurmSettings{CPUsPerTask: 2, Mem: "1G"}, []string{"--cpus-per-task=2", "--mem=1G"}},
		{"slurm keys alone", 0, 0, &task.SlurmSettings{CPUsPerTask: 2, Mem: "1G"}, []string{"--cpus-per-task=2", "--mem=1G"}},
	} {
		job := executor.Job{CPUs: tc.cpus, MemoryMiBHost: tc.hostMiB, Slurm: tc.slurm}
		var got []string
		for _, a := range sbatchArgs(job, filesOf(job)) {
			if strings.HasPrefix(a, "--cpus-per-task=") || strings.HasPrefix(a, "--mem=") {
				got = append(got, a)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: sbatch options %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestGPUTypeInHandleAndLog: the handle records the gres the job asked
// for; a budget no type holds is said in the attempt's log, and the job
// asks for the largest type.
func TestGPUTypeInHandleAndLog(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	j := executortest.NewJob(t, sleeper, "-env", "CUDA_VISIBLE_DEVICES")
	j.GPUs, j.GPUMiB = 1, 30000
	j.Slurm = &task.SlurmSettings{GPUTypes: map[string]int64{"small": 8192, "big": 24576}}
	rec := newRecorder()
	r := newExecutor(t, testConfig(f)).Execute(context.Background(), j, rec.hooks())
	if r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	rec.mu.Lock()
	h := rec.handles[0]
	rec.mu.Unlock()
	d, err := decodeHandle(h)
	if err != nil || d.Gres != "gpu:big:1" {
		t.Errorf("handle %+v (%v): want gres gpu:big:1", d, err)
	}
	sbatch := f.calls()[0]
	if !strings.HasPrefix(sbatch, "sbatch ") || !strings.Contains(sbatch, "--gres=gpu:big:1 ") {
		t.Errorf("first call %q: want sbatch with --gres=gpu:big:1", sbatch)
	}
	log := readFile(t, j.LogPath)
	first, rest, _ := strings.Cut(log, "\n")
	if !strings.HasPrefix(first, "gpusched: a GPU memory budget of 30000 MiB is more than any type") || !strings.Contains(first, "big (24576 MiB)") {
		t.Errorf("log's first line %q: want the note that the budget is larger than every type", first)
	}
	if rest != "CUDA_VISIBLE_DEVICES=0\n" {
		t.Errorf("the task printed %q, want one GPU from Slurm", rest)
	}
}
