package slurm

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseQueueCaptures reads squeue output captured from Slurm 22.05.
func TestParseQueueCaptures(t *testing.T) {
	jobs, err := parseQueue(readTestdata(t, "squeue-mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []jobState{
		{ID: "1", State: "FAILED", Reason: "NonZeroExitCode", Node: "vm", Name: "gpusched.cap.t.1"},
		{ID: "2", State: "FAILED", Reason: "JobLaunchFailure", Node: "vm", Name: "cap2.sh"},
		{ID: "4", State: "PENDING", Reason: "Resources", Name: "cap3.sh"},
		{ID: "5", State: "PENDING", Reason: "Priority", Name: "cap3.sh"},
		{ID: "3", State: "RUNNING", Reason: "None", Node: "vm", Name: "cap3.sh"},
	}
	if len(jobs) != len(want) {
		t.Fatalf("got %d jobs, want %d: %+v", len(jobs), len(want), jobs)
	}
	for i, w := range want {
		g := jobs[i]
		if g.ID != w.ID || g.State != w.State || g.Reason != w.Reason || g.Node != w.Node || g.Name != w.Name {
			t.Errorf("job %d = %+v, want %+v", i, g, w)
		}
		// A pending job's StartTime is Slurm's guess: not a start.
		if (g.State == "PENDING") != g.Start.IsZero() {
			t.Errorf("job %s (%s): start %v", g.ID, g.State, g.Start)
		}
	}
	if want := time.Date(2026, 12, 3, 3, 12, 47, 0, time.Local); !jobs[4].Start.Equal(want) {
		t.Errorf("start = %v, want %v", jobs[4].Start, want)
	}
	held, err := parseQueue(readTestdata(t, "squeue-held.txt"))
	if err != nil || len(held) != 1 || !held[0].held() {
		t.Errorf("held job = %+v, %v: want one, held", held, err)
	}
	if _, err := parseQueue([]byte("12|RUNNING\n")); err == nil {
		t.Error("a line of two fields was read")
	}
}

func TestParseShowJobCaptures(t *testing.T) {
	for _, tc := range []struct {
		file, state, exit string
		code              int
		sig               syscall.Signal
	}{
		{"scontrol-exit3.txt", "FAILED", "3:0", 3, 0},
		{"scontrol-signal.txt", "FAILED", "0:11", 0, syscall.SIGSEGV},
		{"scontrol-cancelled.txt", "CANCELLED", "0:0", 0, 0},
	} {
		s, err := parseShowJob(readTestdata(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if s.State != tc.state || s.Exit != tc.exit || s.Node != "vm" || s.Start.IsZero() {
			t.Errorf("%s: %+v, want state %s, exit %s, node vm, a start", tc.file, s, tc.state, tc.exit)
		}
		code, sig, err := decodeExit(s.Exit)
		if err != nil || code != tc.code || sig != tc.sig {
			t.Errorf("%s: exit %d signal %v (%v), want %d %v", tc.file, code, sig, err, tc.code, tc.sig)
		}
	}
	if _, err := parseShowJob([]byte("slurm_load_jobs error: Invalid job id specified\n")); err == nil {
		t.Error("an error message was read as a job")
	}
}

// TestDecodeExit: CODE:SIGNAL, and the raw wait statuses some of Slurm's
// interfaces report.
func TestDecodeExit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		code int
		sig  syscall.Signal
		bad  bool
	}{
		{"0:0", 0, 0, false}, {"3:0", 3, 0, false}, {"0:9", 0, syscall.SIGKILL, false},
		{"768", 3, 0, false}, {"0", 0, 0, false}, {"9", 0, syscall.SIGKILL, false}, {"65280", 255, 0, false},
		{"139", 0, syscall.SIGSEGV, false}, // 11 with the core-dump bit
		{"x:1", 0, 0, true}, {"", 0, 0, true}, {"-1", 0, 0, true},
	} {
		code, sig, err := decodeExit(tc.in)
		if (err != nil) != tc.bad || !tc.bad && (code != tc.code || sig != tc.sig) {
			t.Errorf("decodeExit(%q) = %d, %v, %v; want %d, %v, error %v", tc.in, code, sig, err, tc.code, tc.sig, tc.bad)
		}
	}
}

func TestParseJobID(t *testing.T) {
	for in, want := range map[string]string{"42\n": "42", "42;cluster\n": "42", "sbatch: warning: x\n43\n": "43"} {
		if got, err := parseJobID([]byte(in)); err != nil || got != want {
			t.Errorf("parseJobID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseJobID([]byte("Submitted batch job 42\n")); err == nil {
		t.Error("a non-parsable answer was read")
	}
}

// TestClassify: an unreachable controller (captured messages) is told
// from a refusal.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		file        string
		unreachable bool
	}{
		{"sbatch-down.stderr", true}, {"squeue-down.stderr", true},
		{"sbatch-invalid-partition.stderr", false}, {"squeue-invalid.stderr", false},
	} {
		err := classify(&CommandError{Name: "x", Err: errors.New("exit status 1"), Stderr: string(readTestdata(t, tc.file))})
		if errors.Is(err, ErrUnreachable) != tc.unreachable {
			t.Errorf("%s: unreachable = %v, want %v", tc.file, !tc.unreachable, tc.unreachable)
		}
	}
	if !invalidJob(&CommandError{Name: "squeue", Stderr: string(readTestdata(t, "squeue-invalid.stderr"))}) {
		t.Error("squeue's invalid job id answer is not recognised")
	}
}

func TestSbatchArgs(t *testing.T) {
	job := executor.Job{TaskID: "train", Attempt: 2, Token: "abc.train.2", LogPath: "/run/logs/train/attempt-2.log",
		Timeout: 90 * time.Second, KillGrace: 10 * time.Second, GPUs: 2,
		Slurm: &task.SlurmSettings{Partition: "gpu", Account: "lab", QOS: "high", Constraint: "a100|h100",
			CPUsPerTask: 8, Mem: "64G", ExtraArgs: []string{"--exclusive", "--reservation=maint"}}}
	got := sbatchArgs(job, filesOf(job))
	want := []string{"--parsable", "--hold", "--job-name=gpusched.abc.train.2", "--comment=gpusched task=train attempt=2",
		"--export=NONE", "--output=/run/logs/train/attempt-2.log", "--open-mode=append", "--chdir=/run/logs/train",
		"--time=2", "--gres=gpu:2", "--partition=gpu", "--account=lab", "--qos=high", "--constraint=a100|h100",
		"--cpus-per-task=8", "--mem=64G", "--exclusive", "--reservation=maint", "/run/logs/train/attempt-2.sbatch"}
	if len(got) != len(want) {
		t.Fatalf("args = %q\nwant   %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("arg %d = %q, want %q", i, got[i], want[i])
		}
	}
	for _, tc := range []struct {
		timeout, grace time.Duration
		want           int
	}{{time.Second, 0, 1}, {time.Minute, 0, 1}, {time.Minute, time.Second, 2}, {50 * time.Minute, 10 * time.Minute, 60}} {
		if got := timeLimitMinutes(tc.timeout, tc.grace); got != tc.want {
			t.Errorf("timeLimitMinutes(%v, %v) = %d, want %d", tc.timeout, tc.grace, got, tc.want)
		}
	}
}

// TestByState: Slurm's end states, for a job without a result file.
func TestByState(t *testing.T) {
	for state, want := range map[string]executor.EndReason{
		"TIMEOUT": executor.TimedOut, "OUT_OF_MEMORY": executor.Signalled, "PREEMPTED": executor.Preempted,
		"NODE_FAIL": executor.NodeFailure, "BOOT_FAIL": executor.NodeFailure, "CANCELLED": executor.Cancelled,
		"COMPLETED": executor.Lost, "FAILED": executor.Lost, "": executor.Lost,
	} {
		if got := byState("7", state).Reason; got != want {
			t.Errorf("%s: %v, want %v", state, got, want)
		}
	}
	for _, s := range []string{"PREEMPTED", "NODE_FAIL", "BOOT_FAIL"} {
		if byState("7", s).Reason.Charged() {
			t.Errorf("%s is charged to the task", s)
		}
	}
}

// Fuzz the parsers of Slurm's output, seeded with the captures: they
// never panic, and what they read holds together.
func FuzzParseQueue(f *testing.F) {
	for _, name := range []string{"squeue-mixed.txt", "squeue-held.txt", "squeue-cancelled.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, err := parseQueue(b)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.State == "PENDING" && !j.Start.IsZero() {
				t.Errorf("a pending job has a start: %+v", j)
			}
		}
	})
}

func FuzzParseShowJob(f *testing.F) {
	for _, name := range []string{"scontrol-exit3.txt", "scontrol-signal.txt", "scontrol-cancelled.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := parseShowJob(b); err == nil && (s.ID == "" || s.State == "") {
			t.Errorf("read a job without id or state: %+v", s)
		}
	})
}

func FuzzDecodeExit(f *testing.F) {
	for _, s := range []string{"3:0", "0:11", "768", "9", "0:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, sig, err := decodeExit(s)
		if err == nil && (code < 0 || sig < 0) {
			t.Errorf("decodeExit(%q) = %d, %v", s, code, sig)
		}
	})
}
