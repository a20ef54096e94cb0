package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/testbin"
)

// cluster is the fake Slurm as gpusched's command finds it: its
// programs first in PATH, its state folder in FAKE_SLURM_DIR.
type cluster struct {
	*fake
	env []string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	f := newFake(t)
	bin := t.TempDir()
	for _, p := range []string{"sbatch", "squeue", "scontrol", "scancel", "sacct"} {
		if err := os.Symlink(fakeSlurm, filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + bin + string(filepath.ListSeparator) + os.Getenv("PATH"), "FAKE_SLURM_DIR=" + f.dir, "HOME=" + t.TempDir()}
	return &cluster{fake: f, env: env}
}

// gpusched returns the command gpusched args, on c.
func (c *cluster) gpusched(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := testbin.Build("cmd/gpusched")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, c.env
	return cmd
}

// TestRunWorkflow: "executor: slurm" in a workflow runs its tasks as
// batch jobs, in dependency order, with the workflow's and the task's
// slurm: settings, and the run completes.
func TestRunWorkflow(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
slurm:
  partition: debug
  mem: 1G
tasks:
  - id: prep
    args: [sh, -c, "echo prepared > out.txt"]
    executor: slurm
    artifacts: [out.txt]
  - id: train
    args: [sh, -c, "cat out.txt; echo trained"]
    dependencies: [prep]
    executor: slurm
    slurm:
      mem: 2G
      cpus_per_task: 2
`)
	run := filepath.Join(dir, "run")
	if out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out)
	}
	out, err := c.gpusched(t, dir, "status", "--run-dir", run).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 tasks: 2 complete") {
		t.Errorf("status: %v\n%s", err, out)
	}
	if log := readFile(t, filepath.Join(run, "logs", "train.attempt-1.log")); log != "prepared\ntrained\n" {
		t.Errorf("train's log = %q: want prep's file, then its own line", log)
	}
	var sbatch []string
	for _, call := range c.calls() {
		if strings.HasPrefix(call, "sbatch ") {
			sbatch = append(sbatch, call)
		}
	}
	if len(sbatch) != 2 || !strings.Contains(sbatch[0], "prep") || !strings.Contains(sbatch[1], "train") {
		t.Fatalf("sbatch calls %q: want prep's, then train's", sbatch)
	}
	for _, want := range []string{"--partition=debug", "--mem=2G", "--cpus-per-task=2", "--export=NONE"} {
		if !strings.Contains(sbatch[1], want) {
			t.Errorf("train's sbatch %q lacks %s", sbatch[1], want)
		}
	}
	if !strings.Contains(sbatch[0], "--mem=1G") {
		t.Errorf("prep's sbatch %q lacks the workflow's --mem=1G", sbatch[0])
	}
}

// TestRunAsksHostResources: a Slurm task's resources.cpus and
// memory_mib_host reach its job as --cpus-per-task and --mem (a learned
// budget as chosen: memory_mib_host_max on a first run), as the job's
// SLURM_CPUS_PER_TASK and SLURM_MEM_PER_NODE show; a task that says
// neither asks neither.
func TestRunAsksHostResources(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	show := "[" + sleeper + ", -env, SLURM_CPUS_PER_TASK, -env, SLURM_MEM_PER_NODE]"
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: sized
    args: `+show+`
    resources: {cpus: 2, memory_mib_host: 512}
  - id: learned
    args: `+show+`
    resources: {memory_mib_host: auto, memory_mib_host_max: 700}
  - id: plain
    args: `+show+`
`)
	run := filepath.Join(dir, "run")
	if out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out)
	}
	for id, want := range map[string]string{
		"sized":   "SLURM_CPUS_PER_TASK=2\nSLURM_MEM_PER_NODE=512\n",
		"learned": "SLURM_CPUS_PER_TASK=<unset>\nSLURM_MEM_PER_NODE=700\n",
		"plain":   "SLURM_CPUS_PER_TASK=<unset>\nSLURM_MEM_PER_NODE=<unset>\n",
	} {
		if log := readFile(t, filepath.Join(run, "logs", id+".attempt-1.log")); log != want {
			t.Errorf("%s's job saw %q, want %q", id, log, want)
		}
	}
}

// TestRunKilledThenAgain: gpusched is killed (-9) while a job runs; run
// again, it adopts the job by its handle instead of submitting another.
func TestRunKilledThenAgain(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	killedThenAgain(t, c)
	n := 0
	for _, call := range c.calls() {
		if strings.HasPrefix(call, "sbatch ") && strings.Contains(call, ".long.") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d jobs submitted for the task, want 1", n)
	}
}

// killedThenAgain runs, through c, a workflow whose task long waits for a
// gate, kills gpusched (-9) once long's command runs, runs it again, opens
// the gate, and checks that the second run completes with long's command
// run once. It returns the run directory.
func killedThenAgain(t *testing.T, c *cluster) string {
	t.Helper()
	dir := t.TempDir()
	gate, ran := filepath.Join(dir, "go"), filepath.Join(dir, "ran")
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: long
    args: [`+sleeper+`, -pidfile, `+ran+`, -wait, `+gate+`, -exit, "0"]
  - id: after
    args: ["true"]
    dependencies: [long]
`)
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) }) // no job left waiting
	run := filepath.Join(dir, "run")
	first := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress")
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job runs", func() bool { return countLines(ran) == 1 })
	syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
	first.Wait()
	second := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress")
	var out strings.Builder
	second.Stdout, second.Stderr = &out, &out
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, gate, "")
	if err := second.Wait(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if n := countLines(ran); n != 1 {
		t.Errorf("the job's command ran %d times, want once", n)
	}
	return run
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunKilledBetweenSbatchAndCommit: gpusched's scheduler dies (-9)
// after sbatch made the job, before it saved the job id. Run again, it
// finds the held job by its name and runs it: one job, run once.
func TestRunKilledBetweenSbatchAndCommit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: once
    args: [`+sleeper+`, -pidfile, `+ran+`, -exit, "0"]
`)
	run := filepath.Join(dir, "run")
	c.set(t, "sbatch-kill-caller", "")
	first := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress")
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := first.CombinedOutput()
	if err == nil {
		t.Fatalf("the first run succeeded though its scheduler was killed:\n%s", out)
	}
	syscall.Kill(-first.Process.Pid, syscall.SIGKILL) // whatever is left of it
	if n := countLines(ran); n != 0 {
		t.Fatalf("the held job ran %d times before anyone released it", n)
	}
	if out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if n := countLines(ran); n != 1 {
		t.Errorf("the command ran %d times, want once", n)
	}
	if n := c.count("sbatch"); n != 1 {
		t.Errorf("%d sbatch calls, want 1: the job made before the crash is the one that ran", n)
	}
}
