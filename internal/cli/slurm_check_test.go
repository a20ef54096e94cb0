package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/testbin"
)

// "gpusched slurm check", the binary, against the fake Slurm (its
// programs in PATH) and against the real one SLURM_CONF names.

// checkJSON is what --json prints.
type checkJSON struct {
	OK       bool   `json:"ok"`
	Problems int    `json:"problems"`
	RunDir   string `json:"run_dir"`
	Findings []struct {
		Step, Level, Message, Fix string
	} `json:"findings"`
	Probes []struct {
		JobID     string `json:"job_id"`
		Node      string `json:"node"`
		Host      string `json:"host"`
		Ran       bool   `json:"ran"`
		SawRunDir bool   `json:"saw_run_dir"`
	} `json:"probes"`
}

// fakeSlurmPath returns an environment whose PATH has the fake Slurm's
// programs (all but those in without) first, on a fake controller of
// its own.
func fakeSlurmPath(t *testing.T, without ...string) []string {
	t.Helper()
	fake, err := testbin.Build("cmd/fake-slurm")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, p := range []string{"sbatch", "squeue", "scontrol", "scancel", "sinfo", "sacct"} {
		if slices.Contains(without, p) {
			continue
		}
		if err := os.Symlink(fake, filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	// Only the fake's folder, and no SLURM_CONF: no real Slurm program
	// stands in for one left out.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "SLURM_CONF=") {
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+bin, "FAKE_SLURM_DIR="+t.TempDir())
}

// slurmCheck runs "gpusched slurm check args..." in dir with env.
func slurmCheck(t *testing.T, env []string, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuschedBin, append([]string{"slurm", "check"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	return finish(t, ctx, cmd, args)
}

// TestSlurmCheckFake: a workflow whose tasks run on Slurm, on a cluster
// where all is well: exit 0, a line per step, the probe ran through the
// run directory, which the check made and removed.
func TestSlurmCheckFake(t *testing.T) {
	t.Parallel()
	env := fakeSlurmPath(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "flow.yaml"), `
scheduling:
  executor: slurm
slurm:
  partition: debug
tasks:
  - id: train
    args: [python3, train.py]
    resources: {device: cuda, memory_mib: 1000}
`)
	r := slurmCheck(t, env, dir, "flow.yaml")
	r.want(t, 0)
	for _, want := range []string{
		"gpusched slurm check: flow.yaml (1 task on Slurm), run directory " + filepath.Join(dir, ".gpusched", "flow") + "\n",
		"ok       programs      sbatch, squeue, scontrol, scancel, sinfo in ",
		"ok       partition     debug: 1 of 1 nodes offer gpu:1 (task train asks it)\n",
		"ok       probe         job 1 (--partition=debug) ran on node fake1",
		"note     accounting    off",
		"\nnothing wrong.\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if exists(filepath.Join(dir, ".gpusched")) {
		t.Errorf("the check left %s: %q", filepath.Join(dir, ".gpusched"), listTree(t, dir))
	}
	r = slurmCheck(t, env, dir, "flow.yaml", "--json")
	r.want(t, 0)
	var out checkJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	var steps []string
	for _, f := range out.Findings {
		if !slices.Contains(steps, f.Step) {
			steps = append(steps, f.Step)
		}
	}
	if !out.OK || out.Problems != 0 || !slices.Equal(steps, []string{"programs", "controller", "partition", "probe", "accounting"}) ||
		len(out.Probes) != 1 || !out.Probes[0].SawRunDir || out.Probes[0].Node != "fake1" {
		t.Errorf("--json: %s", r.stdout)
	}
}

// TestSlurmCheckHostResources: a task's resources.cpus and
// memory_mib_host are judged as its job asks them (--cpus-per-task,
// --mem): more than the fake's node (2 CPUs, 21694 MB) is a problem, and
// a learned host budget counts at its memory_mib_host_max.
func TestSlurmCheckHostResources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "flow.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: wide
    args: ["true"]
    resources: {cpus: 4}
  - id: hungry
    args: ["true"]
    resources: {memory_mib_host: auto, memory_mib_host_max: 30000}
  - id: fits
    args: ["true"]
    resources: {cpus: 2, memory_mib_host: 20000}
`)
	r := slurmCheck(t, fakeSlurmPath(t), dir, "flow.yaml", "--run-dir", filepath.Join(dir, "run"))
	r.want(t, 1)
	for _, want := range []string{
		"problem  partition     debug: task wide asks 4 CPUs per task, and its largest node has 2",
		"fix: lower slurm.cpus_per_task or resources.cpus",
		"problem  partition     debug: task hungry asks 30000 MB of memory, and its largest node has 21694 MB",
		"\n2 problems.\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestSlurmCheckGPUTypes: a GPU task's type (slurm.gpu_types, the
// smallest that holds its budget), and the larger one it may ask after
// running out of memory, are problems when no node has them (the fake's
// node has untyped GPUs).
func TestSlurmCheckGPUTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "flow.yaml"), `
scheduling:
  executor: slurm
slurm:
  gpu_types: {v100: 16384, a100: 81920, b100: 81920, h100: 94208}
tasks:
  - id: train
    args: [python3, train.py]
    resources: {device: cuda, memory_mib: 20000}
  - id: prep
    args: [python3, prep.py]
`)
	r := slurmCheck(t, fakeSlurmPath(t), dir, "flow.yaml")
	r.want(t, 1)
	for _, want := range []string{
		"problem  partition     debug: no node offers gpu:a100:1 (task train asks it); its nodes offer gpu:2 (1 node)\n",
		"fix: its GPUs have no type in Slurm: remove slurm.gpu_types, or choose a partition with a100 GPUs\n",
		"problem  partition     debug: no node offers gpu:h100:1, which task train asks after running out of GPU memory on a smaller type (slurm.gpu_types)",
		"fix: remove h100 from slurm.gpu_types, or choose a partition with h100 GPUs\n",
		"\n2 problems.\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, not := range []string{"v100", "b100"} { // smaller than the budget; a100's size, after it by name
		if strings.Contains(r.stdout, not) {
			t.Errorf("%s, which the task never asks, is named:\n%s", not, r.stdout)
		}
	}
}

// TestSlurmCheckProblems: what is wrong is a line with its fix, and
// exit 1, with nothing more on stderr.
func TestSlurmCheckProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := slurmCheck(t, fakeSlurmPath(t, "sbatch"), dir)
	r.want(t, 1)
	for _, want := range []string{
		"gpusched slurm check: the default partition, no settings, run directory " + dir + "\n",
		"problem  programs      sbatch not found in PATH\n",
		"                       fix: run gpusched on a machine where Slurm's client programs work",
		"note     probe         not submitted: there is no sbatch\n",
		"\n1 problem.\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check left %q", listTree(t, dir))
	}
}

// TestSlurmCheckNoSlurmTasks: a workflow none of whose tasks runs on
// Slurm is checked as --executor slurm would run it, saying so.
func TestSlurmCheckNoSlurmTasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "flow.yaml"), "tasks:\n  - id: a\n    args: [\"true\"]\n    slurm: {partition: nope}\n")
	r := slurmCheck(t, fakeSlurmPath(t), dir, "flow.yaml", "--run-dir", filepath.Join(dir, "run"))
	r.want(t, 1)
	for _, want := range []string{
		"note     workflow      no task has executor slurm: all are checked",
		`problem  partition     "nope" is not a partition you can use (task a names it)`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestSlurmCheckBadInput: a workflow that cannot be read, or a bad
// flag, is exit 2 and checks nothing.
func TestSlurmCheckBadInput(t *testing.T) {
	t.Parallel()
	env := fakeSlurmPath(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"missing.yaml"}, "gpusched: missing.yaml: cannot read the workflow"},
		{[]string{"--wait", "0s"}, "gpusched: --wait: 0s is not a positive duration"},
		{[]string{"a.yaml", "b.yaml"}, "takes at most one workflow file"},
	} {
		r := slurmCheck(t, env, dir, c.args...)
		r.want(t, 2)
		if !strings.Contains(r.stderr, c.msg) || r.stdout != "" {
			t.Errorf("%q: stdout %q, stderr %q; want %q", c.args, r.stdout, r.stderr, c.msg)
		}
	}
	r := gs(t, dir, "slurm", "chek")
	r.want(t, 2)
	if !strings.Contains(r.stderr, `unknown command "chek" (did you mean "check"?)`) {
		t.Errorf("slurm chek: %q", r.stderr)
	}
}

var (
	slurmUp    sync.Once
	slurmUpErr error
)

// TestSlurmCheckRealSlurm: against the Slurm that SLURM_CONF names (the
// local one-node cluster: ../shared/slurm-local.sh up), all is well and
// the probe ran on this machine. It is skipped only outside CI when
// SLURM_CONF is unset; under CI a controller that does not answer fails
// it at once.
func TestSlurmCheckRealSlurm(t *testing.T) {
	if os.Getenv("SLURM_CONF") == "" {
		if os.Getenv("CI") == "" {
			t.Skip("SLURM_CONF is not set: no Slurm cluster to test against")
		}
		t.Fatal("CI is set, and SLURM_CONF is not: the Slurm tests must run under CI")
	}
	slurmUp.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "scontrol", "ping").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "UP") {
			slurmUpErr = err
			if slurmUpErr == nil {
				slurmUpErr = os.ErrNotExist
			}
		}
	})
	if slurmUpErr != nil {
		t.Fatalf("the Slurm controller of SLURM_CONF=%s does not answer: %v", os.Getenv("SLURM_CONF"), slurmUpErr)
	}
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "flow.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: train
    args: [python3, train.py]
    resources: {device: cuda, memory_mib: 1000}
    timeout: 10m
`)
	// The cluster is shared with the other tests: the probe may wait
	// its turn.
	r := slurmCheck(t, os.Environ(), dir, "flow.yaml", "--json", "--wait", "4m")
	var out checkJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("--json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	r.want(t, 0)
	host, _ := os.Hostname()
	if !out.OK || len(out.Probes) != 1 || !out.Probes[0].Ran || !out.Probes[0].SawRunDir || out.Probes[0].Host != host || out.Probes[0].JobID == "" {
		t.Errorf("want the probe to have run here (%s): %s", host, r.stdout)
	}
	if exists(filepath.Join(dir, ".gpusched")) {
		t.Errorf("the check left %q", listTree(t, dir))
	}
}
