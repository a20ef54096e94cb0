package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// The pure parts of Check: reading sinfo and scontrol ping, and judging
// partitions and probe jobs.

// TestParseSinfoCapture reads sinfo output captured from Slurm 22.05.
func TestParseSinfoCapture(t *testing.T) {
	parts, err := parseSinfo(readTestdata(t, "sinfo-node.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("partitions = %+v", parts)
	}
	p := parts[0]
	if p.Name != "debug" || !p.Default || p.Avail != "up" || p.TimeLimit != "infinite" || len(p.Nodes) != 1 {
		t.Errorf("partition = %+v", p)
	}
	n := p.Nodes[0]
	if n.Name != "vm" || n.CPUs != 2 || n.MemoryMB != 21694 || n.State != "idle" || n.Features != nil ||
		!slices.Equal(n.Gres, []Gres{{Name: "gpu", Count: 2}}) {
		t.Errorf("node = %+v", n)
	}
	if _, err := parseSinfo([]byte("debug|debug*|up\n")); err == nil {
		t.Error("a line of three fields was read")
	}
}

func TestParseGres(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Gres
	}{
		{"(null)", nil},
		{"", nil},
		{"gpu:2", []Gres{{Name: "gpu", Count: 2}}},
		{"gpu:a100:4(S:0-1)", []Gres{{Name: "gpu", Type: "a100", Count: 4}}},
		{"gpu:a100:2(S:0,2),gpu:v100:1,mps:400", []Gres{{"gpu", "a100", 2}, {"gpu", "v100", 1}, {"mps", "", 400}}},
		{"gpu:tesla:x", nil},
	} {
		if got := parseGres(c.in); !slices.Equal(got, c.want) {
			t.Errorf("parseGres(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseTimeLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"infinite", 0, false},
		{"UNLIMITED", 0, false},
		{"30", 30 * time.Minute, true},
		{"30:00", 30 * time.Minute, true},
		{"2:00:00", 2 * time.Hour, true},
		{"1-00:00:00", 24 * time.Hour, true},
		{"1-12", 36 * time.Hour, true},
		{"2-01:30", 49*time.Hour + 30*time.Minute, true},
	} {
		if got, ok := parseTimeLimit(c.in); got != c.want || ok != c.ok {
			t.Errorf("parseTimeLimit(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestParsePing reads scontrol ping as captured, up and down.
func TestParsePing(t *testing.T) {
	if up, said := parsePing(readTestdata(t, "scontrol-ping-up.txt")); !up || said != "Slurmctld(primary) at vm is UP" {
		t.Errorf("up capture: %v, %q", up, said)
	}
	if up, said := parsePing(readTestdata(t, "scontrol-ping-down.txt")); up || said != "Slurmctld(primary) at vm is DOWN" {
		t.Errorf("down capture: %v, %q", up, said)
	}
	if up, _ := parsePing([]byte("Slurmctld(primary) at a is DOWN\nSlurmctld(backup) at b is UP\n")); !up {
		t.Error("a backup that answers is not up")
	}
}

// TestJudgePartitions: what no node of a partition offers is a problem;
// a partition that starts no jobs is not probed.
func TestJudgePartitions(t *testing.T) {
	node := func(name, state, gres, features string) NodeInfo {
		n := NodeInfo{Name: name, CPUs: 32, MemoryMB: 256000, State: state, Gres: parseGres(gres)}
		if features != "" {
			n.Features = strings.Split(features, ",")
		}
		return n
	}
	parts := []PartitionInfo{
		{Name: "cpu", Default: true, Avail: "up", TimeLimit: "2:00:00", Nodes: []NodeInfo{node("c1", "idle", "(null)", "skylake")}},
		{Name: "gpu", Avail: "up", TimeLimit: "infinite", Nodes: []NodeInfo{node("g1", "mix", "gpu:v100:2", ""), node("g2", "down*", "gpu:a100:8", "")}},
		{Name: "old", Avail: "inact", TimeLimit: "infinite", Nodes: []NodeInfo{node("o1", "idle", "", "")}},
		{Name: "dead", Avail: "up", TimeLimit: "infinite", Nodes: []NodeInfo{node("d1", "drain", "", ""), node("d2", "down*", "", "")}},
		{Name: "v100", Avail: "up", TimeLimit: "infinite", Nodes: []NodeInfo{node("v1", "idle", "gpu:v100:2", "")}},
	}
	on := func(p string, t CheckTask) CheckTask {
		if t.Slurm == nil {
			t.Slurm = &task.SlurmSettings{}
		}
		t.Slurm.Partition = p
		return t
	}
	for _, c := range []struct {
		name    string
		parts   []PartitionInfo
		tasks   []CheckTask
		problem string // in the one problem; "" none
		usable  map[string]bool
	}{
		{name: "no tasks: the default", parts: parts, usable: map[string]bool{"": true}},
		{name: "no default", parts: parts[1:], problem: "the cluster has no default partition", usable: map[string]bool{}},
		{name: "inactive", parts: parts, tasks: []CheckTask{on("old", CheckTask{ID: "a"})}, problem: "is INACT: it starts no jobs (task a uses it)",
			usable: map[string]bool{"old": false}},
		{name: "no node up", parts: parts, tasks: []CheckTask{on("dead", CheckTask{ID: "a"})}, problem: "none of its nodes can start jobs",
			usable: map[string]bool{"dead": false}},
		{name: "GPUs on a CPU partition", parts: parts, tasks: []CheckTask{{ID: "a", GPUs: 1}}, problem: "cpu: no node offers gpu:1 (task a asks it); its nodes offer no GPU (1 node)",
			usable: map[string]bool{"": true}},
		{name: "a type on a node that is down still counts", parts: parts, tasks: []CheckTask{on("gpu", CheckTask{ID: "a", GPUs: 4, GPUType: "a100"})},
			usable: map[string]bool{"gpu": true}},
		{name: "too many GPUs of a type", parts: parts, tasks: []CheckTask{on("gpu", CheckTask{ID: "a", GPUs: 3, GPUType: "v100"})},
			problem: "no node offers gpu:v100:3", usable: map[string]bool{"gpu": true}},
		{name: "a type asked after running out of memory", parts: parts,
			tasks:   []CheckTask{on("v100", CheckTask{ID: "a", GPUs: 1, GPUType: "v100", LaterGPUTypes: []string{"a100"}})},
			problem: "v100: no node offers gpu:a100:1, which task a asks after running out of GPU memory", usable: map[string]bool{"v100": true}},
		{name: "types asked now and later", parts: parts,
			tasks:  []CheckTask{on("gpu", CheckTask{ID: "a", GPUs: 1, GPUType: "v100", LaterGPUTypes: []string{"a100"}})},
			usable: map[string]bool{"gpu": true}},
		{name: "CPUs", parts: parts, tasks: []CheckTask{{ID: "a", Slurm: &task.SlurmSettings{CPUsPerTask: 64}}, {ID: "b", Slurm: &task.SlurmSettings{CPUsPerTask: 64}}},
			problem: "tasks a and b ask 64 CPUs per task, and its largest node has 32", usable: map[string]bool{"": true}},
		{name: "memory", parts: parts, tasks: []CheckTask{{ID: "a", Slurm: &task.SlurmSettings{Mem: "1T"}}},
			problem: "task a asks 1048576 MB of memory, and its largest node has 256000 MB", usable: map[string]bool{"": true}},
		{name: "resources.cpus, as sbatch is given it", parts: parts, tasks: []CheckTask{{ID: "a", CPUs: 48}},
			problem: "task a asks 48 CPUs per task, and its largest node has 32", usable: map[string]bool{"": true}},
		{name: "slurm.cpus_per_task wins over resources.cpus", parts: parts, tasks: []CheckTask{{ID: "a", CPUs: 48, Slurm: &task.SlurmSettings{CPUsPerTask: 16}}},
			usable: map[string]bool{"": true}},
		{name: "resources.memory_mib_host, as sbatch is given it", parts: parts, tasks: []CheckTask{{ID: "a", MemoryMiBHost: 300000}},
			problem: "task a asks 300000 MB of memory, and its largest node has 256000 MB", usable: map[string]bool{"": true}},
		{name: "slurm.mem wins over resources.memory_mib_host", parts: parts, tasks: []CheckTask{{ID: "a", MemoryMiBHost: 300000, Slurm: &task.SlurmSettings{Mem: "200G"}}},
			usable: map[string]bool{"": true}},
		{name: "a feature", parts: parts, tasks: []CheckTask{{ID: "a", Slurm: &task.SlurmSettings{Constraint: "icelake"}}},
			problem: `no node has the feature "icelake" that task a asks for (features here: skylake)`, usable: map[string]bool{"": true}},
		{name: "a feature expression is left to sbatch", parts: parts, tasks: []CheckTask{{ID: "a", Slurm: &task.SlurmSettings{Constraint: "icelake|zen"}}},
			usable: map[string]bool{"": true}},
		{name: "time", parts: parts, tasks: []CheckTask{{ID: "a", Time: 3 * time.Hour}, {ID: "b", Time: time.Hour}},
			problem: "its time limit is 2:00:00, and task a asks longer", usable: map[string]bool{"": true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, _, usable := judgePartitions(c.parts, c.tasks)
			var problems []string
			for _, f := range fs {
				if f.Level == LevelProblem {
					problems = append(problems, f.Message)
					if f.Fix == "" {
						t.Errorf("problem %q has no fix", f.Message)
					}
				}
			}
			switch {
			case c.problem == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case c.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.problem)):
				t.Errorf("problems %q, want one with %q", problems, c.problem)
			}
			for k, v := range c.usable {
				if usable[k] != v {
					t.Errorf("usable[%q] = %v, want %v", k, usable[k], v)
				}
			}
		})
	}
}

// TestJudgeProbe: what a probe job left says what is wrong.
func TestJudgeProbe(t *testing.T) {
	g := probeGroups([]CheckTask{{ID: "a", Slurm: &task.SlurmSettings{Partition: "p"}}})[0]
	base := probeFacts{group: g, binary: "/opt/gpusched", runDir: "/shared/run", token: "tok", wait: 2 * time.Minute, jobID: "7"}
	seen := &probeAnswer{V: 1, Token: "tok", Host: "n1.cluster", Node: "n1", SawMarker: true}
	exited := executor.Result{Reason: executor.Exited}
	lost := executor.Result{Reason: executor.Lost, Err: errors.New("slurm job 7 ended FAILED without a result file")}
	for _, c := range []struct {
		name  string
		f     func(f *probeFacts)
		level Level
		want  string
		fix   string
	}{
		{"all well", func(f *probeFacts) {
			f.result, f.answer, f.state = exited, seen, jobState{State: "COMPLETED", Node: "n1"}
		},
			LevelOK, "job 7 (--partition=p) ran on node n1 (host n1.cluster)", ""},
		{"refused", func(f *probeFacts) {
			f.jobID, f.result = "", executor.Result{Reason: executor.Unrunnable, Err: executor.CommandFault(&CommandError{Name: "sbatch",
				Stderr: "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"})}
		}, LevelProblem, "sbatch refused it: sbatch: error: Batch job submission failed: Invalid account", "slurm.account"},
		{"pending", func(f *probeFacts) { f.timedOut, f.state = true, jobState{State: "PENDING", Reason: "Priority"} },
			LevelProblem, "still PENDING after 2m0s (Slurm's reason: Priority); cancelled", "longer --wait"},
		{"cancel unconfirmed", func(f *probeFacts) {
			f.timedOut, f.unconfirmed, f.state = true, true, jobState{State: "PENDING", Reason: "ReqNodeNotAvail, UnavailableNodes:n1"}
		}, LevelProblem, "scancel 7", "down, drained or reserved"},
		{"running, nothing back", func(f *probeFacts) { f.timedOut, f.state = true, jobState{State: "RUNNING", Node: "n1"} },
			LevelProblem, "RUNNING on node n1, and nothing it wrote came back to /shared/run within 2m0s", fixShared},
		{"another folder", func(f *probeFacts) {
			f.result, f.answer = exited, &probeAnswer{V: 1, Token: "tok", Host: "n1", SawMarker: false, MarkerError: "open /shared/run/x/marker: no such file"}
		}, LevelProblem, "did not see the marker written in /shared/run: open", fixShared},
		{"another check's answer", func(f *probeFacts) {
			f.result, f.answer, f.state = lost, &probeAnswer{V: 1, Token: "old", SawMarker: true}, jobState{State: "COMPLETED"}
		}, LevelProblem, "ended COMPLETED, and nothing it wrote came back", fixShared},
		{"launch failure", func(f *probeFacts) {
			f.result, f.state = lost, jobState{State: "FAILED", Reason: "JobLaunchFailure", Node: "n1", Exit: "0:53"}
		}, LevelProblem, "Slurm could not start it on node n1 (JobLaunchFailure)", fixShared},
		{"no helper", func(f *probeFacts) { f.result, f.state = lost, jobState{State: "FAILED", Node: "n1", Exit: "127:0"} },
			LevelProblem, "the helper /opt/gpusched does not run on node n1", fixBinary},
		{"old helper", func(f *probeFacts) {
			f.result, f.state, f.logTail = executor.Result{Reason: executor.Exited, ExitCode: 2}, jobState{State: "FAILED", Node: "n1"}, `gpusched: unknown command "__gpusched-slurm-probe"`
		}, LevelProblem, "the helper's probe did not answer (exit 2); its log ends: gpusched: unknown command", fixBinary},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := base
			c.f(&f)
			fs, p := judgeProbe(f)
			if len(fs) == 0 || fs[0].Level != c.level || !strings.Contains(fs[0].Message, c.want) || !strings.Contains(fs[0].Fix, c.fix) {
				t.Fatalf("findings %+v\nwant %s with %q, fix with %q", fs, c.level, c.want, c.fix)
			}
			if (c.level == LevelOK) != (p.Ran && p.SawRunDir) {
				t.Errorf("probe = %+v", p)
			}
		})
	}
	// A folder of a task the node does not see is a problem of its own.
	f := base
	f.result, f.state = exited, jobState{State: "COMPLETED", Node: "n1"}
	a := *seen
	a.Missing = []string{"/home/u/proj"}
	f.answer = &a
	fs, _ := judgeProbe(f)
	if len(fs) != 2 || fs[0].Level != LevelOK || fs[1].Level != LevelProblem || !strings.Contains(fs[1].Message, "task a: /home/u/proj") {
		t.Errorf("findings = %+v", fs)
	}
}

// TestRunProbe: the probe job's command reports what it saw, and fails
// when it did not see the marker.
func TestRunProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(args ...string) (int, probeAnswer, string) {
		t.Helper()
		var out strings.Builder
		code := runProbe(args, &out)
		a, ok, err := readProbeAnswer(dir)
		if !ok || err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return code, a, out.String()
	}
	if code, a, out := run("tok", dir); code != 1 || a.SawMarker || !strings.Contains(a.MarkerError, "no such file") || !strings.Contains(out, "marker seen: false") {
		t.Errorf("no marker: code %d, %+v, %q", code, a, out)
	}
	writeFile(t, filepath.Join(dir, probeMarker), "other\n")
	if code, a, _ := run("tok", dir); code != 1 || a.SawMarker || !strings.Contains(a.MarkerError, "another folder") {
		t.Errorf("another check's marker: code %d, %+v", code, a)
	}
	writeFile(t, filepath.Join(dir, probeMarker), "tok\n")
	host, _ := os.Hostname()
	if code, a, _ := run("tok", dir, dir, filepath.Join(dir, "nope")); code != 0 || !a.SawMarker || a.Token != "tok" || a.Host != host ||
		!slices.Equal(a.Missing, []string{filepath.Join(dir, "nope")}) {
		t.Errorf("marker: code %d, %+v", code, a)
	}
	if code := runProbe([]string{"tok"}, &strings.Builder{}); code != 2 {
		t.Errorf("one argument: code %d, want 2", code)
	}
}

func FuzzParseSinfo(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "sinfo-node.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("gpu|gpu|up|1-00:00:00|g1|64|512000|gpu:a100:4(S:0,1),mps:100|mix|a100,ib\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parts, err := parseSinfo(b)
		if err != nil {
			return
		}
		for _, p := range parts {
			if p.Name == "" || len(p.Nodes) == 0 {
				t.Errorf("partition without name or nodes: %+v", p)
			}
			for _, n := range p.Nodes {
				for _, g := range n.Gres {
					if g.Name == "" || g.Count < 0 {
						t.Errorf("gres %+v", g)
					}
				}
			}
		}
	})
}

// TestCheckCaptures: Slurm's answers as captured lead to the right
// finding and fix.
func TestCheckCaptures(t *testing.T) {
	for file, fix := range map[string]string{
		"sbatch-invalid-partition.stderr": "slurm.partition",
		"sbatch-bad-constraint.stderr":    "slurm.constraint",
		"sbatch-gres-unavailable.stderr":  "no node of the partition can give what the options ask",
		"sbatch-down.stderr":              "the controller did not answer",
	} {
		if got := sbatchFix(oneLine(string(readTestdata(t, file)))); !strings.Contains(got, fix) {
			t.Errorf("%s: fix %q, want one about %q", file, got, fix)
		}
	}
	jobs, err := parseQueue(readTestdata(t, "squeue-pending.txt"))
	if err != nil || len(jobs) != 2 {
		t.Fatalf("squeue-pending.txt: %+v, %v", jobs, err)
	}
	for i, fix := range []string{"remove --begin", "more than the partition's nodes have"} {
		if got := pendingFix(jobs[i].Reason); !strings.Contains(got, fix) {
			t.Errorf("reason %s: fix %q, want one with %q", jobs[i].Reason, got, fix)
		}
	}
	s, err := parseShowJob(readTestdata(t, "scontrol-launch-failure.txt"))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := judgeProbe(probeFacts{group: probeGroups(nil)[0], runDir: "/nonexistent/dir", token: "t", jobID: s.ID, state: s,
		result: executor.Result{Reason: executor.Lost}})
	if len(fs) != 1 || !strings.Contains(fs[0].Message, "job 912: Slurm could not start it on node vm (JobLaunchFailure)") || fs[0].Fix != fixShared {
		t.Errorf("findings = %+v", fs)
	}
}

// TestFakeAnswersAsCaptured: the fake Slurm answers what Check asks as
// real Slurm did (its node is fake1 where the captures say vm).
func TestFakeAnswersAsCaptured(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	asFake := func(name string) string { return strings.ReplaceAll(string(readTestdata(t, name)), "vm", "fake1") }
	stderr := func(err error) string {
		var ce *CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not a CommandError", err)
		}
		return ce.Stderr + "\n"
	}
	if out, err := f.Run(context.Background(), "scontrol", "ping"); err != nil || string(out) != asFake("scontrol-ping-up.txt") {
		t.Errorf("ping, up: %q, %v", out, err)
	}
	if out, err := f.Run(context.Background(), "sinfo", "--Node", "--noheader", "--format="+sinfoFormat); err != nil || string(out) != asFake("sinfo-node.txt") {
		t.Errorf("sinfo: %q, %v", out, err)
	}
	if _, err := f.Run(context.Background(), "sacct", "--noheader"); err == nil || stderr(err) != asFake("sacct-disabled.stderr") {
		t.Errorf("sacct: %v", err)
	}
	f.set(t, "down", "")
	if out, err := f.Run(context.Background(), "scontrol", "ping"); err == nil || string(out) != asFake("scontrol-ping-down.txt") {
		t.Errorf("ping, down: %q, %v", out, err)
	}
	if _, err := f.Run(context.Background(), "sinfo", "--Node", "--noheader", "--format="+sinfoFormat); err == nil || stderr(err) != asFake("sinfo-down.stderr") {
		t.Errorf("sinfo, down: %v", err)
	}
}
