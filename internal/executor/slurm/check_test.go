package slurm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Check against the fake Slurm: each problem it must find, and a
// cluster where all is well.

// checkConfig is a check of f's cluster with fast rounds; its run
// directory does not exist yet.
func checkConfig(t *testing.T, cmds Commands, tasks ...CheckTask) CheckConfig {
	t.Helper()
	return CheckConfig{
		Executor: Config{Commands: cmds, PollMin: 50 * time.Millisecond, PollMax: 200 * time.Millisecond, LostGrace: 500 * time.Millisecond},
		RunDir:   filepath.Join(t.TempDir(), "made", "run"),
		Tasks:    tasks,
		Wait:     30 * time.Second,
	}
}

// findings returns the findings of rep at step and level.
func findings(rep Report, step string, l Level) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Step == step && f.Level == l {
			out = append(out, f)
		}
	}
	return out
}

// wantFinding fails t unless rep has a finding at step and level whose
// message holds every one of parts; it returns it.
func wantFinding(t *testing.T, rep Report, step string, l Level, parts ...string) Finding {
	t.Helper()
	for _, f := range findings(rep, step, l) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(f.Message, p) }) {
			return f
		}
	}
	t.Fatalf("no %s finding of step %q with %q in:\n%s", l, step, parts, dump(rep))
	return Finding{}
}

func dump(rep Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString("  " + f.Level.String() + " " + f.Step + ": " + f.Message)
		if f.Fix != "" {
			b.WriteString(" [fix: " + f.Fix + "]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// wantCleaned fails t if the check left anything: the run directory it
// made, and the folders above it that it made, are gone.
func wantCleaned(t *testing.T, cfg CheckConfig) {
	t.Helper()
	if _, err := os.Lstat(filepath.Dir(cfg.RunDir)); err == nil {
		t.Errorf("the check left %s", filepath.Dir(cfg.RunDir))
	}
}

// lookingFake is the fake that can say where its programs are, and lacks
// some.
type lookingFake struct {
	*fake
	missing []string
}

func (f lookingFake) LookPath(name string) (string, error) {
	if slices.Contains(f.missing, name) {
		return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	return "/fake/bin/" + name, nil
}

// TestCheckAllWell: on a cluster where all is well, the probe job runs
// through the executor's path (held, released, 1 CPU, --time=1, the
// tasks' partition), reads the marker, writes back; nothing is a
// problem, accounting off is a note, and nothing is left behind.
func TestCheckAllWell(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	taskDir := t.TempDir()
	cfg := checkConfig(t, lookingFake{fake: f}, CheckTask{ID: "train", GPUs: 1, Dir: taskDir,
		Slurm: &task.SlurmSettings{Partition: "debug", Mem: "4G", CPUsPerTask: 2, Account: "lab"}})
	rep := Check(context.Background(), cfg)
	if rep.Problems() != 0 {
		t.Fatalf("%d problems:\n%s", rep.Problems(), dump(rep))
	}
	wantFinding(t, rep, StepPrograms, LevelOK, "sbatch", "sinfo")
	wantFinding(t, rep, StepController, LevelOK, "UP")
	wantFinding(t, rep, StepPartition, LevelOK, "debug (default): up", "gres gpu:2")
	wantFinding(t, rep, StepPartition, LevelOK, "gpu:1", "task train")
	wantFinding(t, rep, StepProbe, LevelOK, "ran on node fake1", "read the marker")
	wantFinding(t, rep, StepAccounting, LevelNote, "off")
	if len(rep.Probes) != 1 {
		t.Fatalf("probes = %+v", rep.Probes)
	}
	p := rep.Probes[0]
	if !p.Ran || !p.SawRunDir || p.JobID == "" || p.Node != "fake1" || p.Host == "" || !slices.Equal(p.Tasks, []string{"train"}) {
		t.Errorf("probe = %+v", p)
	}
	var sbatch string
	for _, c := range f.calls() {
		if strings.HasPrefix(c, "sbatch ") {
			if sbatch != "" {
				t.Errorf("a second sbatch: %s", c)
			}
			sbatch = c
		}
	}
	for _, want := range []string{"--hold", "--partition=debug", "--account=lab", "--cpus-per-task=1", "--time=1", "--output=" + cfg.RunDir + "/"} {
		if !strings.Contains(sbatch, want) {
			t.Errorf("sbatch %q lacks %s", sbatch, want)
		}
	}
	for _, not := range []string{"--mem", "--gres"} {
		if strings.Contains(sbatch, not) {
			t.Errorf("sbatch %q has %s: a probe is tiny", sbatch, not)
		}
	}
	if f.count("scontrol release") != 1 {
		t.Errorf("calls %q: want one release", f.calls())
	}
	wantCleaned(t, cfg)
}

// TestCheckNoSbatch: a missing program is a problem; without sbatch no
// probe is submitted.
func TestCheckNoSbatch(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := checkConfig(t, lookingFake{fake: f, missing: []string{"sbatch"}})
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepPrograms, LevelProblem, "sbatch not found")
	if fd.Fix == "" {
		t.Error("no fix for a missing program")
	}
	wantFinding(t, rep, StepProbe, LevelNote, "no sbatch")
	if rep.Problems() != 1 {
		t.Errorf("%d problems, want 1:\n%s", rep.Problems(), dump(rep))
	}
	if n := f.count("sbatch"); n != 0 {
		t.Errorf("%d sbatch calls", n)
	}
}

// TestCheckControllerDown: a controller that does not answer is the
// problem; nothing else is asked of it.
func TestCheckControllerDown(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "down", "")
	cfg := checkConfig(t, f)
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepController, LevelProblem, "is DOWN")
	if !strings.Contains(fd.Fix, "SLURM_CONF") {
		t.Errorf("fix %q does not name SLURM_CONF", fd.Fix)
	}
	wantFinding(t, rep, StepProbe, LevelNote, "not submitted")
	for _, p := range []string{"sbatch", "sinfo"} {
		if n := f.count(p); n != 0 {
			t.Errorf("%d %s calls to a controller that is down", n, p)
		}
	}
	wantCleaned(t, cfg)
}

// TestCheckUnknownPartition: a partition the cluster does not have is a
// problem naming the closest one; no probe is sent to it.
func TestCheckUnknownPartition(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := checkConfig(t, f, CheckTask{ID: "a", Slurm: &task.SlurmSettings{Partition: "debgu"}})
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepPartition, LevelProblem, `"debgu" is not a partition you can use (task a names it)`, "debug")
	if !strings.Contains(fd.Fix, `did you mean "debug"`) {
		t.Errorf("fix = %q", fd.Fix)
	}
	wantFinding(t, rep, StepProbe, LevelNote, "not submitted to debgu")
	if n := f.count("sbatch"); n != 0 {
		t.Errorf("%d sbatch calls", n)
	}
}

// TestCheckPendingForever: a probe job that never leaves PENDING is
// reported with Slurm's reason and cancelled, and its files removed.
func TestCheckPendingForever(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "pending-reason", "PartitionConfig")
	cfg := checkConfig(t, f)
	cfg.Wait = time.Second
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepProbe, LevelProblem, "still PENDING", "PartitionConfig", "cancelled")
	if !strings.Contains(fd.Fix, "more than the partition's nodes have") {
		t.Errorf("fix = %q", fd.Fix)
	}
	if len(rep.Probes) != 1 || rep.Probes[0].State != "PENDING" || rep.Probes[0].Reason != "PartitionConfig" {
		t.Fatalf("probes = %+v", rep.Probes)
	}
	id := rep.Probes[0].JobID
	out, err := f.Run(context.Background(), "scontrol", "show", "job", id)
	if s, perr := parseShowJob(out); err != nil || perr != nil || s.State != "CANCELLED" {
		t.Errorf("job %s after the check: %+v, %v %v: want CANCELLED", id, s, err, perr)
	}
	wantCleaned(t, cfg)
}

// TestCheckRunDirNotShared: a node that cannot open the job's log in the
// run directory (Slurm fails the job: JobLaunchFailure) is reported as a
// run directory the nodes do not share.
func TestCheckRunDirNotShared(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "unshared", "")
	cfg := checkConfig(t, f)
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepProbe, LevelProblem, "JobLaunchFailure", cfg.RunDir)
	if fd.Fix != fixShared {
		t.Errorf("fix = %q", fd.Fix)
	}
	if p := rep.Probes[0]; p.Ran || p.SawRunDir {
		t.Errorf("probe = %+v", p)
	}
	wantCleaned(t, cfg)
}

// TestCheckHelperMissing: a helper binary the node does not have is
// reported as such, with the shell's words from the job's log.
func TestCheckHelperMissing(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := checkConfig(t, f)
	cfg.Executor.Binary = "/nonexistent/gpusched"
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepProbe, LevelProblem, "the helper /nonexistent/gpusched does not run", "not found")
	if fd.Fix != fixBinary {
		t.Errorf("fix = %q", fd.Fix)
	}
}

// TestCheckGPUType: a GPU type no node of the partition has is a
// problem naming the types it has; an untyped GPU task fits.
func TestCheckGPUType(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "nodes", "gpu|gpu*|up|1-00:00:00|g1|64|512000|gpu:v100:4(S:0-1)|mix|v100,ib\n"+
		"gpu|gpu*|up|1-00:00:00|g2|64|512000|gpu:v100:4(S:0-1)|idle|v100,ib\n")
	cfg := checkConfig(t, f,
		CheckTask{ID: "big", GPUs: 1, GPUType: "a100"},
		CheckTask{ID: "any", GPUs: 2})
	rep := Check(context.Background(), cfg)
	fd := wantFinding(t, rep, StepPartition, LevelProblem, "no node offers gpu:a100:1", "task big", "gpu:v100:4 (2 nodes)")
	if !strings.Contains(fd.Fix, "v100") {
		t.Errorf("fix = %q", fd.Fix)
	}
	wantFinding(t, rep, StepPartition, LevelOK, "2 of 2 nodes offer gpu:2", "task any")
	wantFinding(t, rep, StepProbe, LevelOK, "ran on node fake1")
}

// TestCheckAccounting: sacct that answers is ok.
func TestCheckAccounting(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "accounting", "")
	rep := Check(context.Background(), checkConfig(t, f))
	wantFinding(t, rep, StepAccounting, LevelOK, "sacct answers")
	if !slices.ContainsFunc(f.calls(), func(c string) bool {
		return strings.HasPrefix(c, "sacct ") && strings.Contains(c, "--jobs="+rep.Probes[0].JobID)
	}) {
		t.Errorf("calls %q: sacct was not asked about the probe's job", f.calls())
	}
}

// TestPathCommandsLookPath: programs are looked for in Dir when set.
func TestPathCommandsLookPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sbatch"), "#!/bin/sh\n")
	os.Chmod(filepath.Join(dir, "sbatch"), 0o755)
	writeFile(t, filepath.Join(dir, "squeue"), "not executable")
	p := PathCommands{Dir: dir}
	if got, err := p.LookPath("sbatch"); err != nil || got != filepath.Join(dir, "sbatch") {
		t.Errorf("LookPath(sbatch) = %q, %v", got, err)
	}
	for _, name := range []string{"squeue", "scontrol"} {
		if _, err := p.LookPath(name); err == nil {
			t.Errorf("LookPath(%s) found it", name)
		}
	}
}

// splitFake sends sbatch and scancel to one fake controller and every
// other call to another: as when sbatch is a real Slurm's and squeue a
// fake's (seen when a test's PATH mixed them).
type splitFake struct{ submit, ask *fake }

func (s splitFake) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name == "sbatch" || name == "scancel" {
		return s.submit.Run(ctx, name, args...)
	}
	return s.ask.Run(ctx, name, args...)
}

// TestCheckLeavesNoJob: a probe job that Slurm no longer answers about
// is reported as gone, and cancelled: it is not left held in a queue.
func TestCheckLeavesNoJob(t *testing.T) {
	t.Parallel()
	a, b := newFake(t), newFake(t)
	cfg := checkConfig(t, splitFake{submit: a, ask: b})
	rep := Check(context.Background(), cfg)
	wantFinding(t, rep, StepProbe, LevelProblem, "left Slurm")
	id := rep.Probes[0].JobID
	out, err := a.Run(context.Background(), "scontrol", "show", "job", id)
	if s, perr := parseShowJob(out); err != nil || perr != nil || s.State != "CANCELLED" {
		t.Errorf("job %s after the check: %+v, %v %v: want CANCELLED", id, s, err, perr)
	}
	wantCleaned(t, cfg)
}

// TestCheckInterrupted: a check whose context is done while its probe
// waits cancels the job, says so, asks nothing more, and cleans up.
func TestCheckInterrupted(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "pending-reason", "Priority")
	cfg := checkConfig(t, f)
	cfg.Wait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // once the probe is released (at most 20 s: then the test fails)
		for deadline := time.Now().Add(20 * time.Second); f.count("scontrol release") == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	rep := Check(ctx, cfg)
	wantFinding(t, rep, StepProbe, LevelProblem, "interrupted before it ended; cancelled")
	wantFinding(t, rep, StepAccounting, LevelNote, "interrupted")
	if n := f.count("sacct"); n != 0 {
		t.Errorf("%d sacct calls after the interrupt", n)
	}
	out, err := f.Run(context.Background(), "scontrol", "show", "job", rep.Probes[0].JobID)
	if s, perr := parseShowJob(out); err != nil || perr != nil || s.State != "CANCELLED" {
		t.Errorf("the probe job after the check: %+v, %v %v: want CANCELLED", s, err, perr)
	}
	wantCleaned(t, cfg)
}
