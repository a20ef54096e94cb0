package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/task"
)

// recorder keeps the handles and Running calls of one attempt.
type recorder struct {
	mu      sync.Mutex
	handles []executor.Handle
	started chan struct{}
	once    sync.Once
}

func newRecorder() *recorder { return &recorder{started: make(chan struct{})} }

func (r *recorder) hooks() executor.Hooks {
	return executor.Hooks{
		Submitted: func(h executor.Handle) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.handles = append(r.handles, h)
			return nil
		},
		Running: func(executor.Running) { r.once.Do(func() { close(r.started) }) },
	}
}

func (r *recorder) id(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.handles) == 0 {
		t.Fatal("no handle was saved")
	}
	return jobID(t, r.handles[0])
}

// start runs j on ex in the background.
func start(ex *Executor, ctx context.Context, j executor.Job, r *recorder) <-chan executor.Result {
	done := make(chan executor.Result, 1)
	go func() { done <- ex.Execute(ctx, j, r.hooks()) }()
	return done
}

func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("nothing a minute after %s", what)
		var zero T
		return zero
	}
}

// waitFor polls cond until it holds, for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 20s", what)
		}
	}
}

// TestOneQueryPerRound: the jobs of an executor are asked about in one
// squeue call per round, never one call per job.
func TestOneQueryPerRound(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	ex := newExecutor(t, testConfig(f))
	gate := filepath.Join(t.TempDir(), "go")
	const n = 5
	var dones []<-chan executor.Result
	var recs []*recorder
	for range n {
		r := newRecorder()
		recs = append(recs, r)
		dones = append(dones, start(ex, context.Background(), executortest.NewJob(t, sleeper, "-wait", gate), r))
	}
	for _, r := range recs {
		await(t, r.started, "the jobs were submitted")
	}
	before := len(f.calls())
	waitFor(t, "two more rounds", func() bool { return f.count("squeue") >= 2 && len(f.calls()) >= before+2 })
	for _, c := range f.calls()[before:] {
		if !strings.HasPrefix(c, "squeue ") {
			continue
		}
		if !strings.Contains(c, "--jobs=") || strings.Count(c, ",") != n-1 {
			t.Errorf("call %q: want one squeue for all %d jobs", c, n)
		}
	}
	os.WriteFile(gate, nil, 0o644)
	for _, d := range dones {
		if r := await(t, d, "the gate opened"); r.Reason != executor.Exited || r.ExitCode != 0 {
			t.Errorf("result = %+v, want exited 0", r)
		}
	}
	if got := f.count("scontrol show"); got > 0 {
		t.Errorf("%d scontrol calls: the result files should have told", got)
	}
}

// TestCrashBetweenSbatchAndCommit: the scheduler dies after sbatch, before
// the handle is saved; the next one finds the held job by its name,
// releases and adopts it: the command runs once, and one job was
// submitted.
func TestCrashBetweenSbatchAndCommit(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	old := newExecutor(t, testConfig(f))
	ran := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-pidfile", ran, "-exit", "4")
	r := old.Execute(context.Background(), j, executor.Hooks{Submitted: func(executor.Handle) error {
		old.Close() // the crash: nothing was saved
		return nil
	}})
	if r.Reason != executor.Lost {
		t.Fatalf("result of the dead scheduler's Execute = %+v, want lost", r)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the held job ran before anyone released it")
	}
	ex := newExecutor(t, testConfig(f))
	rec := ex.Recover([]executor.Orphan{{Job: j}})[0]
	if rec.Wait == nil {
		t.Fatalf("recovery = %+v, want the held job adopted", rec.Result)
	}
	res := rec.Wait(context.Background())
	if res.Reason != executor.Exited || res.ExitCode != 4 {
		t.Errorf("result = %+v, want exited 4", res)
	}
	if n := countLines(ran); n != 1 {
		t.Errorf("the command ran %d times, want once", n)
	}
	if n := f.count("sbatch"); n != 1 {
		t.Errorf("%d sbatch calls, want 1", n)
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// TestControllerDown: while the controller does not answer, submission
// waits (the executor says why) and the task does not fail; when it
// answers again, the job runs. A call that failed is never taken for a
// job that was not submitted: one job in the end.
func TestControllerDown(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	ex := newExecutor(t, testConfig(f))
	f.set(t, "down", "")
	done := start(ex, context.Background(), executortest.NewJob(t, sleeper, "-exit", "0"), newRecorder())
	waitFor(t, "a failed sbatch", func() bool { return f.count("sbatch") >= 1 })
	waitFor(t, "the executor to say the controller is down", func() bool { d, _, _ := ex.Unreachable(); return d })
	if _, _, why := ex.Unreachable(); !errors.Is(why, ErrUnreachable) || !strings.Contains(why.Error(), "Unable to contact") {
		t.Errorf("why = %v, want Slurm's message", why)
	}
	select {
	case r := <-done:
		t.Fatalf("the attempt ended while the controller was down: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	f.unset(t, "down")
	if r := await(t, done, "the controller came back"); r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Errorf("result = %+v, want exited 0", r)
	}
	if down, _, _ := ex.Unreachable(); down {
		t.Error("the controller is still said to be down")
	}
	if n := len(jobFiles(t, f)); n != 1 {
		t.Errorf("%d jobs submitted, want 1", n)
	}
}

func jobFiles(t *testing.T, f *fake) []string {
	m, _ := filepath.Glob(filepath.Join(f.dir, "jobs", "*.json"))
	return m
}

// TestSbatchRefused: a refusal is retried with backoff; one that lasts
// fails the attempt as the command's fault, saying why.
func TestSbatchRefused(t *testing.T) {
	t.Parallel()
	t.Run("Passes", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		f.set(t, "sbatch-fail", "1 Batch job submission failed: Job violates accounting/QOS policy")
		r := newExecutor(t, testConfig(f)).Execute(context.Background(), executortest.NewJob(t, sleeper, "-exit", "0"), executor.Hooks{})
		if r.Reason != executor.Exited || r.ExitCode != 0 || f.count("sbatch") != 2 {
			t.Errorf("result = %+v after %d sbatch calls, want exited 0 after 2", r, f.count("sbatch"))
		}
	})
	t.Run("Lasts", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		cfg := testConfig(f)
		cfg.SubmitRetries = 1
		j := executortest.NewJob(t, sleeper, "-exit", "0")
		j.Slurm = &task.SlurmSettings{Partition: "nope"}
		r := newExecutor(t, cfg).Execute(context.Background(), j, executor.Hooks{})
		if r.Reason != executor.Unrunnable || !errors.Is(r.Err, executor.ErrCommand) || !strings.Contains(r.Err.Error(), "Invalid partition") {
			t.Errorf("result = %+v, want unrunnable, saying the partition is invalid", r)
		}
		if n := f.count("sbatch"); n != 2 {
			t.Errorf("%d sbatch calls, want 2 (one retry)", n)
		}
	})
}

// TestInterruptions: what Slurm does to a running job, as gpusched
// records it; none of the interruptions is charged to the task.
func TestInterruptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		admin   string // fake-slurm admin ..., or "scancel" by someone else
		want    executor.EndReason
		charged bool
		says    string
	}{
		{"preempt", executor.Preempted, false, "preempted"},
		{"nodefail", executor.NodeFailure, false, "node"},
		{"oom", executor.Signalled, true, "OUT_OF_MEMORY"},
		{"scancel", executor.Cancelled, false, "outside gpusched"},
		{"vanish", executor.Lost, false, "left Slurm without a result file"},
	} {
		t.Run(tc.admin, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			ex := newExecutor(t, testConfig(f))
			rec := newRecorder()
			done := start(ex, context.Background(), executortest.NewJob(t, sleeper, "-sleep", "1h"), rec)
			await(t, rec.started, "it was submitted")
			if tc.admin == "scancel" {
				if _, err := f.Run(context.Background(), "scancel", rec.id(t)); err != nil {
					t.Fatal(err)
				}
			} else {
				f.admin(t, tc.admin, rec.id(t))
			}
			r := await(t, done, tc.admin)
			if r.Reason != tc.want || r.Reason.Charged() != tc.charged {
				t.Fatalf("result = %+v, want %v (charged %v)", r, tc.want, tc.charged)
			}
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.says) {
				t.Errorf("error %v, want it to say %q", r.Err, tc.says)
			}
		})
	}
}

// TestGPUs: --gres=gpu:N reaches Slurm, and the task sees the GPUs Slurm
// gave it, whatever its own environment said.
func TestGPUs(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	j := executortest.NewJob(t, sleeper, "-env", "CUDA_VISIBLE_DEVICES", "-env", "SLURM_JOB_ID", "-env", "HOME")
	j.GPUs = 2
	r := newExecutor(t, testConfig(f)).Execute(context.Background(), j, executor.Hooks{})
	if r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	log, _ := os.ReadFile(j.LogPath)
	if want := "CUDA_VISIBLE_DEVICES=0,1\nSLURM_JOB_ID=1\nHOME=<unset>\n"; string(log) != want {
		t.Errorf("log = %q, want %q: Slurm's GPUs and job id, not its login variables", log, want)
	}
}

// TestHostileStrings: arguments, folder and environment reach the task
// byte for byte, whatever a shell would make of them.
func TestHostileStrings(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	nasty := "it's \"$(touch pwned)\" `id` $HOME\\\nGPUSCHED_ATTEMPT_END\n; exit 9"
	j := executortest.NewJob(t, sleeper, "-print", nasty, "-env", "NASTY")
	j.Dir = filepath.Join(t.TempDir(), "a dir with 'quotes' and $x")
	os.Mkdir(j.Dir, 0o755)
	j.Env = append(j.Env, "NASTY="+nasty)
	r := newExecutor(t, testConfig(f)).Execute(context.Background(), j, executor.Hooks{})
	if r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	log, _ := os.ReadFile(j.LogPath)
	if want := nasty + "\nNASTY=" + nasty + "\n"; string(log) != want {
		t.Errorf("log = %q\nwant  %q", log, want)
	}
	if m, _ := filepath.Glob(filepath.Join(j.Dir, "pwned")); len(m) > 0 {
		t.Error("a shell ran part of an argument")
	}
}

// TestCancelPending: a job cancelled while it waits in the queue never
// runs, and ends cancelled, confirmed by Slurm's state.
func TestCancelPending(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "start-delay", "1h")
	ex := newExecutor(t, testConfig(f))
	ran := filepath.Join(t.TempDir(), "ran")
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder()
	done := start(ex, ctx, executortest.NewJob(t, sleeper, "-touch", ran), rec)
	waitFor(t, "the job was released", func() bool { return f.count("scontrol release") == 1 })
	cancel()
	r := await(t, done, "cancel")
	if r.Reason != executor.Cancelled || r.Started {
		t.Errorf("result = %+v, want cancelled, never started", r)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the job ran")
	}
	if !strings.Contains(strings.Join(f.calls(), "\n"), "scancel "+rec.id(t)) {
		t.Errorf("calls %q: want a plain scancel of the job", f.calls())
	}
}

// TestResultFile: the helper writes the result atomically, and a reader
// gets every field back.
func TestResultFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "attempt-1.result")
	now := time.Now().Round(0)
	in := executor.Result{Reason: executor.Unrunnable, Start: now, End: now.Add(time.Second),
		Err: executor.CommandFault(fmt.Errorf("start x: not found"))}
	if err := writeOutcome(p, outcomeOf(in)); err != nil {
		t.Fatal(err)
	}
	o, ok, err := readOutcome(p)
	if err != nil || !ok {
		t.Fatalf("read: %v %v", ok, err)
	}
	got := o.result()
	if got.Reason != in.Reason || !got.Start.Equal(in.Start) || !got.End.Equal(in.End) ||
		!errors.Is(got.Err, executor.ErrCommand) || got.Err.Error() != in.Err.Error() {
		t.Errorf("read back %+v, want %+v", got, in)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
	os.WriteFile(p, []byte("{\"v\":1"), 0o644)
	if _, _, err := readOutcome(p); err == nil {
		t.Error("a torn result file was read")
	}
}

// TestRecoverReleasesHeld: the scheduler died after it saved the handle,
// before it released the job; the next one releases and adopts it.
func TestRecoverReleasesHeld(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	old := newExecutor(t, testConfig(f))
	ran := filepath.Join(t.TempDir(), "ran")
	j := executortest.NewJob(t, sleeper, "-pidfile", ran, "-exit", "6")
	var saved executor.Handle
	r := old.Execute(context.Background(), j, executor.Hooks{Submitted: func(h executor.Handle) error {
		saved = h
		old.Close() // the crash, after the commit
		return nil
	}})
	if r.Reason != executor.Lost || f.count("scontrol release") != 0 {
		t.Fatalf("result = %+v after %d releases, want lost, the job still held", r, f.count("scontrol release"))
	}
	rec := newExecutor(t, testConfig(f)).Recover([]executor.Orphan{{Job: j, Handle: saved}})[0]
	if rec.Wait == nil || !rec.Running.Since.IsZero() {
		t.Fatalf("recovery = %+v, want the held job adopted, not yet running", rec)
	}
	if res := rec.Wait(context.Background()); res.Reason != executor.Exited || res.ExitCode != 6 {
		t.Errorf("result = %+v, want exited 6", res)
	}
	if n := countLines(ran); n != 1 {
		t.Errorf("the command ran %d times, want once", n)
	}
}

// TestSlurmOverridesTaskGPUs: a task's own CUDA_VISIBLE_DEVICES (the
// scheduler's view of this machine) gives way to the GPUs Slurm gave the
// job.
func TestSlurmOverridesTaskGPUs(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	j := executortest.NewJob(t, sleeper, "-env", "CUDA_VISIBLE_DEVICES")
	j.Env = append(j.Env, "CUDA_VISIBLE_DEVICES=GPU-local-card")
	j.GPUs = 1
	if r := newExecutor(t, testConfig(f)).Execute(context.Background(), j, executor.Hooks{}); r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	if log, _ := os.ReadFile(j.LogPath); string(log) != "CUDA_VISIBLE_DEVICES=0\n" {
		t.Errorf("log = %q, want Slurm's GPU alone", log)
	}
}
