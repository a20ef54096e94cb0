package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/task"
)

// Scenarios against the real Slurm that SLURM_CONF names
// (../shared/slurm-local.sh up: one node, two fake GPUs as gres).

// TestRealSlurmGPUs: --gres=gpu:N gives the job N GPUs, named in
// CUDA_VISIBLE_DEVICES by Slurm.
func TestRealSlurmGPUs(t *testing.T) {
	cfg := realSlurm(t)
	t.Parallel()
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			j := executortest.NewJob(t, sleeper, "-env", "CUDA_VISIBLE_DEVICES")
			j.GPUs = n
			r := newExecutor(t, cfg).Execute(context.Background(), j, executor.Hooks{})
			if r.Reason != executor.Exited || r.ExitCode != 0 {
				t.Fatalf("result = %+v", r)
			}
			log := strings.TrimSpace(readFile(t, j.LogPath))
			devs, ok := strings.CutPrefix(log, "CUDA_VISIBLE_DEVICES=")
			if !ok || len(strings.Split(devs, ",")) != n {
				t.Errorf("log = %q, want %d GPUs in CUDA_VISIBLE_DEVICES", log, n)
			}
		})
	}
}

// TestRealSlurmCancelPending: a job that waits in the queue (its begin
// time is an hour away) is cancelled and never runs.
func TestRealSlurmCancelPending(t *testing.T) {
	cfg := realSlurm(t)
	t.Parallel()
	ran := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-touch", ran)
	j.Slurm = &task.SlurmSettings{ExtraArgs: []string{"--begin=now+1hour"}}
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder()
	done := start(newExecutor(t, cfg), ctx, j, rec)
	waitFor(t, "the job was submitted", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.handles) == 1 })
	cancel()
	r := await(t, done, "cancel")
	if r.Reason != executor.Cancelled || r.Started {
		t.Errorf("result = %+v, want cancelled, never started", r)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the job ran")
	}
}

// TestRealSlurmWorkflow: gpusched run of a workflow whose tasks run on
// Slurm, in order, with their settings.
func TestRealSlurmWorkflow(t *testing.T) {
	realSlurm(t)
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
slurm:
  partition: debug
tasks:
  - id: prep
    args: [sh, -c, "echo prepared > out.txt"]
    artifacts: [out.txt]
  - id: train
    args: [sh, -c, "cat out.txt; echo trained"]
    dependencies: [prep]
    slurm:
      mem: 100M
`)
	c := &cluster{fake: &fake{}, env: append(os.Environ(), "HOME="+t.TempDir())}
	run := filepath.Join(dir, "run")
	if out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out)
	}
	if log := readFile(t, filepath.Join(run, "logs", "train.attempt-1.log")); log != "prepared\ntrained\n" {
		t.Errorf("train's log = %q", log)
	}
}

// TestRealSlurmCrashBetweenSbatchAndCommit: the scheduler dies after
// sbatch, before it saved the job id: the job stays held in Slurm and
// never runs; the next scheduler finds it by its name, releases and
// adopts it: the command runs once, as that one job.
func TestRealSlurmCrashBetweenSbatchAndCommit(t *testing.T) {
	cfg := realSlurm(t)
	t.Parallel()
	old := newExecutor(t, cfg)
	ran := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-pidfile", ran, "-exit", "4")
	r := old.Execute(context.Background(), j, executor.Hooks{Submitted: func(executor.Handle) error {
		old.Close() // the crash: nothing was saved
		return nil
	}})
	if r.Reason != executor.Lost {
		t.Fatalf("result of the dead scheduler's Execute = %+v, want lost", r)
	}
	ids := jobsNamed(t, jobName(j))
	if len(ids) != 1 {
		t.Fatalf("jobs named %s: %v, want the one submitted", jobName(j), ids)
	}
	t.Cleanup(func() { exec.Command("scancel", ids[0]).Run() }) // should the test fail with it held
	out, err := exec.Command("squeue", "--jobs="+ids[0], "--noheader", "--format="+queueFormat).Output()
	if s, perr := parseQueue(out); err != nil || perr != nil || len(s) != 1 || !s[0].held() {
		t.Fatalf("squeue says %q (%v): want the job held", out, err)
	}
	rec := newExecutor(t, cfg).Recover([]executor.Orphan{{Job: j}})[0]
	if rec.Wait == nil {
		t.Fatalf("recovery = %+v, want the held job adopted", rec.Result)
	}
	if res := rec.Wait(context.Background()); res.Reason != executor.Exited || res.ExitCode != 4 {
		t.Errorf("result = %+v, want exited 4", res)
	}
	if n := countLines(ran); n != 1 {
		t.Errorf("the command ran %d times, want once", n)
	}
	if got := jobsNamed(t, jobName(j)); len(got) != 1 || got[0] != ids[0] {
		t.Errorf("jobs named %s: %v, want only %s", jobName(j), got, ids[0])
	}
}

// TestRealSlurmKilledThenAgain: gpusched run is killed (-9) while its
// job runs on Slurm; run again, it adopts the job by its handle: the
// command runs once, as one job, and the run completes.
func TestRealSlurmKilledThenAgain(t *testing.T) {
	realSlurm(t)
	t.Parallel()
	run := killedThenAgain(t, &cluster{fake: &fake{}, env: append(os.Environ(), "HOME="+t.TempDir())})
	// Every job of this run has its batch script (and folder) in it; the
	// comment names the task.
	q, err := exec.Command("squeue", "--states=all", "--noheader", "--format=%i|%Z|%k").Output()
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, l := range strings.Split(string(q), "\n") {
		f := strings.Split(l, "|")
		if len(f) == 3 && f[1] == filepath.Join(run, "logs") && strings.Contains(f[2], "task=long ") {
			jobs = append(jobs, f[0])
		}
	}
	if len(jobs) != 1 {
		t.Errorf("jobs of task long: %v, want one", jobs)
	}
}

// TestRealSlurmGPUTaskWithoutNvidiaSMI: gpusched run, on a machine
// without nvidia-smi, of GPU tasks on Slurm (no gpu_types: the cluster's
// GPUs are untyped): each runs on one GPU Slurm gives it.
func TestRealSlurmGPUTaskWithoutNvidiaSMI(t *testing.T) {
	realSlurm(t)
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: budget
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
    resources: {device: cuda, memory_mib: 1000}
  - id: whole
    args: [sh, -c, 'echo "devices=$CUDA_VISIBLE_DEVICES"']
    resources: {device: cuda, exclusive: true}
`)
	c := &cluster{fake: &fake{}, env: append(os.Environ(), "HOME="+t.TempDir(),
		"GPUSCHED_NVIDIA_SMI="+filepath.Join(t.TempDir(), "no-nvidia-smi"))}
	run := filepath.Join(dir, "run")
	out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput()
	if err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out)
	}
	for _, id := range []string{"budget", "whole"} {
		log := strings.TrimSpace(readFile(t, filepath.Join(run, "logs", id+".attempt-1.log")))
		devs, ok := strings.CutPrefix(log, "devices=")
		if !ok || devs == "" || strings.Contains(devs, ",") {
			t.Errorf("%s's log = %q, want one GPU from Slurm in CUDA_VISIBLE_DEVICES", id, log)
		}
	}
}

// TestRealSlurmPendingReason: a task whose job Slurm holds back (its
// begin time is an hour away) is running with the waiting reason queued,
// and status --json shows Slurm's reason (BeginTime) and the job; Ctrl-C
// of the run cancels the job, and it never runs.
func TestRealSlurmPendingReason(t *testing.T) {
	realSlurm(t)
	t.Parallel()
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: later
    args: [touch, `+ran+`]
    slurm:
      extra_args: ["--begin=now+1hour"]
`)
	c := &cluster{fake: &fake{}, env: append(os.Environ(), "HOME="+t.TempDir())}
	run := filepath.Join(dir, "run")
	var out bytes.Buffer
	cmd := c.startRun(t, dir, run, &out)
	var st statusJSON
	waitFor(t, "status shows Slurm's reason", func() bool {
		st = c.status(t, dir, run)
		return len(st.Tasks) == 1 && st.Tasks[0].Job != nil && st.Tasks[0].Job.Reason == "BeginTime"
	})
	tr := st.Tasks[0]
	if tr.State != "running" || tr.WaitingKind != "queued" || tr.Job.State != "PENDING" || !tr.Job.Queued ||
		tr.Waiting != "queued in Slurm as job "+tr.Job.ID+": BeginTime" {
		t.Errorf("status --json: %+v (job %+v); want running, queued in Slurm: BeginTime", tr, tr.Job)
	}
	id := tr.Job.ID
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait() // interrupted: exits non-zero
	if out, err := exec.Command("squeue", "--jobs="+id, "--states=all", "--noheader", "--format=%T").Output(); err == nil &&
		!strings.Contains(string(out), "CANCELLED") {
		t.Errorf("job %s after Ctrl-C: %q, want cancelled", id, out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the job ran")
	}
}
