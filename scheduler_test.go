package gpusched_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/testbin"
)

var sleeper string

func TestMain(m *testing.M) {
	sleeper = testbin.MustBuild("cmd/sleeper")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

func newScheduler(t *testing.T, s gpusched.Scheduling, opts ...gpusched.Option) *gpusched.Scheduler {
	t.Helper()
	sc, err := gpusched.New(t.TempDir(), s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

func run(t *testing.T, s *gpusched.Scheduler) map[string]gpusched.Record {
	t.Helper()
	recs, err := s.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	m := map[string]gpusched.Record{}
	for _, r := range recs {
		m[r.ID] = r
	}
	return m
}

func readPIDs(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		f := strings.Fields(string(b))
		if len(f) >= n {
			pids := make([]int, len(f))
			for i := range f {
				pids[i], _ = strconv.Atoi(f[i])
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d PIDs, want %d", path, len(f), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for executortest.Alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d survived its task", pid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestTimeoutKillsGrandchildIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	s := newScheduler(t, gpusched.Scheduling{KillGrace: 200 * time.Millisecond})
	err := s.Submit(gpusched.TaskSpec{ID: "stuck", Timeout: 500 * time.Millisecond,
		Payload: []string{sleeper, "-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h"}})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["stuck"]
	a := r.LastAttempt()
	if r.State != gpusched.StateFailed || !a.TimedOut || a.Signal != "SIGKILL" || !strings.HasPrefix(r.Error, "timed out after 500ms") {
		t.Errorf("record = %+v, attempt %+v; want failed by timeout, killed by SIGKILL", r, a)
	}
	if d := a.End.Sub(a.Start); d < 500*time.Millisecond {
		t.Errorf("the attempt ended after %v, before its 500ms timeout", d)
	}
	assertGone(t, readPIDs(t, pidfile, 2))
}

func TestRetriesKeepEveryAttemptAndLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	counter := filepath.Join(dir, "count")
	// Fails on attempts 1 and 2, succeeds on 3; prints its attempt number.
	script := fmt.Sprintf(`echo "attempt $GPUSCHED_ATTEMPT of $GPUSCHED_TASK_ID"; echo x >> %s; [ $(wc -l < %s) -ge 3 ]`, counter, counter)
	s := newScheduler(t, gpusched.Scheduling{})
	if err := s.Submit(gpusched.TaskSpec{ID: "flaky", Retries: 2, Payload: []string{"sh", "-c", script}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["flaky"]
	if r.State != gpusched.StateComplete || len(r.Attempts) != 3 {
		t.Fatalf("flaky: %s after %d attempts", r.State, len(r.Attempts))
	}
	for i, a := range r.Attempts {
		want := 1
		if i == 2 {
			want = 0
		}
		if a.ExitCode == nil || *a.ExitCode != want {
			t.Errorf("attempt %d exit code %v, want %d", a.Number, a.ExitCode, want)
		}
		b, err := os.ReadFile(a.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if got, w := string(b), fmt.Sprintf("attempt %d of flaky\n", a.Number); got != w {
			t.Errorf("log of attempt %d = %q, want %q", a.Number, got, w)
		}
		if !strings.HasPrefix(a.LogPath, s.RunDir()) {
			t.Errorf("log %s is not under the run directory", a.LogPath)
		}
	}
}

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	s := newScheduler(t, gpusched.Scheduling{KillGrace: 100 * time.Millisecond})
	err := s.SubmitMany([]gpusched.TaskSpec{
		{ID: "long", Payload: []string{sleeper, "-grandchild", "-pidfile", pidfile, "-sleep", "1h"}},
		{ID: "after", Dependencies: []string{"long"}, Payload: []string{"true"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		readPIDs(t, pidfile, 2)
		if err := s.Cancel("long"); err != nil {
			t.Error(err)
		}
	}()
	recs := run(t, s)
	if r := recs["long"]; r.State != gpusched.StateCancelled || !r.LastAttempt().Cancelled {
		t.Errorf("long = %+v", r)
	}
	if r := recs["after"]; r.State != gpusched.StateBlocked || r.BlockedBy != "long" {
		t.Errorf("after = %+v", r)
	}
	assertGone(t, readPIDs(t, pidfile, 2))
}

func TestRunContextCancelStopsTasks(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	s := newScheduler(t, gpusched.Scheduling{MaxParallelTasks: 1, KillGrace: 100 * time.Millisecond})
	err := s.SubmitMany([]gpusched.TaskSpec{
		{ID: "long", Payload: []string{sleeper, "-ignore-term", "-pidfile", pidfile, "-sleep", "1h"}},
		{ID: "next", Payload: []string{"true"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { readPIDs(t, pidfile, 1); cancel() }()
	recs, err := s.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if recs[0].State != gpusched.StateCancelled || recs[1].State != gpusched.StatePending {
		t.Errorf("states = %s, %s; want cancelled, pending", recs[0].State, recs[1].State)
	}
	assertGone(t, readPIDs(t, pidfile, 1))
}

func TestEnvironmentAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newScheduler(t, gpusched.Scheduling{})
	err := s.Submit(gpusched.TaskSpec{ID: "env", Dir: dir, Env: map[string]string{"SEED": "7", "GPUSCHED_TASK_ID": "spoofed"},
		Payload: []string{sleeper, "-env", "SEED", "-env", "GPUSCHED_TASK_ID", "-env", "GPUSCHED_ATTEMPT", "-env", "PATH", "-touch", "here"}})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["env"]
	b, _ := os.ReadFile(r.LastAttempt().LogPath)
	for _, want := range []string{"SEED=7\n", "GPUSCHED_TASK_ID=env\n", "GPUSCHED_ATTEMPT=1\n", "PATH=" + os.Getenv("PATH") + "\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("log %q lacks %q", b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "here")); err != nil {
		t.Errorf("task did not run in its Dir: %v", err)
	}
}

func TestStartFailureIsRecorded(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, gpusched.Scheduling{})
	if err := s.Submit(gpusched.TaskSpec{ID: "missing", Payload: []string{"gpusched-no-such-program"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["missing"]
	if r.State != gpusched.StateFailed || r.ExitCode != nil || !strings.Contains(r.Error, "gpusched-no-such-program") {
		t.Errorf("record = %+v", r)
	}
	b, _ := os.ReadFile(r.LastAttempt().LogPath)
	if !strings.Contains(string(b), "gpusched-no-such-program") {
		t.Errorf("log %q does not explain the failure", b)
	}
}

func TestOneSchedulerPerRunDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := gpusched.New(dir, gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gpusched.New(dir, gpusched.Scheduling{})
	var le *gpusched.LockedError
	if !errors.As(err, &le) || !errors.Is(err, gpusched.ErrRunDirLocked) || le.PID != os.Getpid() {
		t.Fatalf("second New = %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("message %q should name the directory and the pid", err)
	}
	first.Close()
	again, err := gpusched.New(dir, gpusched.Scheduling{})
	if err != nil {
		t.Fatalf("New after Close: %v", err)
	}
	again.Close()
}

func TestResumeOnSameRunDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marks := filepath.Join(t.TempDir(), "ran")
	flag := filepath.Join(t.TempDir(), "fail")
	os.WriteFile(flag, nil, 0o644)
	tasks := []gpusched.TaskSpec{
		{ID: "a", Payload: []string{"sh", "-c", "echo a >> " + marks}},
		{ID: "b", Dependencies: []string{"a"}, Payload: []string{"sh", "-c", "echo b >> " + marks + "; test ! -e " + flag}},
		{ID: "c", Dependencies: []string{"b"}, Payload: []string{"sh", "-c", "echo c >> " + marks}},
	}
	runOnce := func() map[string]gpusched.Record {
		s, err := gpusched.New(dir, gpusched.Scheduling{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.SubmitMany(tasks); err != nil {
			t.Fatal(err)
		}
		return run(t, s)
	}
	first := runOnce()
	if first["b"].State != gpusched.StateFailed || first["c"].State != gpusched.StateBlocked {
		t.Fatalf("first run: b %s, c %s", first["b"].State, first["c"].State)
	}
	os.Remove(flag)
	second := runOnce()
	for _, id := range []string{"a", "b", "c"} {
		if second[id].State != gpusched.StateComplete {
			t.Errorf("%s: %s after resume", id, second[id].State)
		}
	}
	if b := second["b"]; len(b.Attempts) != 2 || b.Attempts[1].Number != 2 {
		t.Errorf("b attempts = %+v, want numbering to continue at 2", b.Attempts)
	}
	if got, _ := os.ReadFile(marks); string(got) != "a\nb\nb\nc\n" {
		t.Errorf("executions = %q, want a once, b twice, c once", got)
	}
}

// echoKind is a user-defined kind: the payload is a string to print, and a
// task whose text ends in "+" submits a follow-up task from Judge.
type echoKind struct {
	s    **gpusched.Scheduler
	mu   sync.Mutex
	errs []error
}

func (*echoKind) Command(_ context.Context, t *gpusched.TaskSpec, attempt int) (gpusched.Command, error) {
	text, ok := t.Payload.(string)
	if !ok {
		return gpusched.Command{}, fmt.Errorf("payload is %T", t.Payload)
	}
	return gpusched.Command{Args: []string{"echo", text}}, nil
}

func (k *echoKind) Judge(t *gpusched.TaskSpec, r gpusched.AttemptResult) error {
	if r.ExitCode != 0 {
		return fmt.Errorf("echo exited %d", r.ExitCode)
	}
	if text := t.Payload.(string); strings.HasSuffix(text, "+") {
		err := (*k.s).Submit(gpusched.TaskSpec{ID: t.ID + "-next", Kind: "echo", Dependencies: []string{t.ID}, Payload: strings.TrimSuffix(text, "+")})
		k.mu.Lock()
		k.errs = append(k.errs, err)
		k.mu.Unlock()
	}
	return nil
}

func (*echoKind) ValidatePayload(t *gpusched.TaskSpec) error {
	if _, ok := t.Payload.(string); !ok {
		return &gpusched.TaskError{TaskID: t.ID, Field: "payload", Reason: "echo takes a string", Kind: gpusched.ErrInvalidTask}
	}
	return nil
}

func TestCustomKindSubmitsFromHandler(t *testing.T) {
	t.Parallel()
	var s *gpusched.Scheduler
	kind := &echoKind{s: &s}
	s = newScheduler(t, gpusched.Scheduling{}, gpusched.WithHandler("echo", kind))
	if err := s.Submit(gpusched.TaskSpec{ID: "bad", Kind: "echo", Payload: 42}); !errors.Is(err, gpusched.ErrInvalidTask) {
		t.Errorf("bad payload: %v", err)
	}
	if err := s.Submit(gpusched.TaskSpec{ID: "x", Kind: "nope", Payload: "hi"}); !errors.Is(err, gpusched.ErrUnknownKind) {
		t.Errorf("unknown kind: %v", err)
	}
	if err := s.Submit(gpusched.TaskSpec{ID: "hello", Kind: "echo", Payload: "hi+"}); err != nil {
		t.Fatal(err)
	}
	recs := run(t, s)
	next, ok := recs["hello-next"]
	if !ok || next.State != gpusched.StateComplete {
		t.Fatalf("follow-up = %+v (present %v)", next, ok)
	}
	if b, _ := os.ReadFile(next.LastAttempt().LogPath); string(b) != "hi\n" {
		t.Errorf("follow-up printed %q", b)
	}
	if len(kind.errs) != 1 || kind.errs[0] != nil {
		t.Errorf("Submit from Judge returned %v", kind.errs)
	}
}

func TestSchedulingValidate(t *testing.T) {
	tests := []struct {
		s     gpusched.Scheduling
		field string
	}{
		{gpusched.Scheduling{}, ""},
		{gpusched.Scheduling{MaxParallelTasks: 4, DefaultTimeout: time.Hour, DefaultRetries: 2, KillGrace: time.Second}, ""},
		{gpusched.Scheduling{MaxParallelTasks: -1}, "max_parallel_tasks"},
		{gpusched.Scheduling{DefaultTimeout: -1}, "timeout"},
		{gpusched.Scheduling{DefaultRetries: -1}, "retries"},
		{gpusched.Scheduling{KillGrace: -time.Second}, "kill_grace"},
		{gpusched.Scheduling{FairShareHalfLife: -time.Second}, "fair_share_half_life"},
		{gpusched.Scheduling{UserMaxRunning: -1}, "user_max_running"},
		{gpusched.Scheduling{UserMaxGPUMiB: -1}, "user_max_gpu_mib"},
		{gpusched.Scheduling{FairShareHalfLife: time.Minute, UserMaxRunning: 2, UserMaxGPUMiB: 40000}, ""},
		{gpusched.Scheduling{Webhook: "https://hooks.example.com/T0/B1/secret", OnRunEnd: []string{"notify-send", "done"}}, ""},
		{gpusched.Scheduling{Webhook: "http://127.0.0.1:8080/hook"}, ""},
		{gpusched.Scheduling{Webhook: "hooks.example.com/x"}, "webhook"},
		{gpusched.Scheduling{Webhook: "ftp://example.com/x"}, "webhook"},
		{gpusched.Scheduling{Webhook: "https:///x"}, "webhook"},
		{gpusched.Scheduling{Webhook: "http://exa mple.com/"}, "webhook"},
		{gpusched.Scheduling{OnRunEnd: []string{" "}}, "on_run_end"},
		{gpusched.Scheduling{OnRunEnd: []string{"sh", "a\x00b"}}, "on_run_end"},
	}
	for _, tt := range tests {
		err := tt.s.Validate()
		var se *gpusched.SchedulingError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%+v: %v", tt.s, err)
		case tt.field != "" && (!errors.As(err, &se) || se.Field != tt.field || !errors.Is(err, gpusched.ErrInvalidScheduling)):
			t.Errorf("%+v: %v, want an error on %s", tt.s, err, tt.field)
		}
		if tt.field != "" {
			if _, err := gpusched.New(t.TempDir(), tt.s); err == nil {
				t.Errorf("New accepted %+v", tt.s)
			}
		}
	}
	s := newScheduler(t, gpusched.Scheduling{})
	if got := s.Settings(); got.MaxParallelTasks < 1 || got.KillGrace != gpusched.DefaultKillGrace {
		t.Errorf("defaults = %+v", got)
	}
}

func TestSubmitManyErrors(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{})
	if err := s.Submit(gpusched.TaskSpec{ID: "prepare", Payload: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		batch []gpusched.TaskSpec
		want  error
	}{
		{"empty argv", []gpusched.TaskSpec{{ID: "x", Payload: []string{}}}, gpusched.ErrInvalidTask},
		{"no payload", []gpusched.TaskSpec{{ID: "x"}}, gpusched.ErrInvalidTask},
		{"argv of the wrong type", []gpusched.TaskSpec{{ID: "x", Payload: "echo hi"}}, gpusched.ErrInvalidTask},
		{"NUL byte in an argument", []gpusched.TaskSpec{{ID: "x", Payload: []string{"echo", "a\x00b"}}}, gpusched.ErrInvalidTask},
		{"duplicate of submitted", []gpusched.TaskSpec{{ID: "prepare", Payload: []string{"true"}}}, gpusched.ErrDuplicateTask},
		{"unknown dependency", []gpusched.TaskSpec{{ID: "train", Dependencies: []string{"prep"}, Payload: []string{"true"}}}, gpusched.ErrUnknownDependency},
		{"invalid resources", []gpusched.TaskSpec{{ID: "x", Payload: []string{"true"}, Resources: gpusched.ResourceRequest{Device: "tpu"}}}, gpusched.ErrInvalidTask},
		{"cycle", []gpusched.TaskSpec{{ID: "a", Dependencies: []string{"b"}, Payload: []string{"true"}}, {ID: "b", Dependencies: []string{"a"}, Payload: []string{"true"}}}, gpusched.ErrCycle},
	}
	for _, tt := range tests {
		err := s.SubmitMany(append([]gpusched.TaskSpec{{ID: "fine", Payload: []string{"true"}}}, tt.batch...))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if n := len(s.Records()); n != 1 {
		t.Errorf("%d tasks after rejected batches, want 1: SubmitMany must be all or nothing", n)
	}
	if err := s.Cancel("nope"); !errors.Is(err, gpusched.ErrUnknownTask) {
		t.Errorf("Cancel(unknown) = %v", err)
	}
}

// SubmitManyContext stops when its context is done: nothing is submitted.
func TestSubmitManyContextCancelled(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.SubmitManyContext(ctx, []gpusched.TaskSpec{{ID: "a", Payload: []string{"true"}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("SubmitManyContext with a cancelled context = %v", err)
	}
	if n := len(s.Records()); n != 0 {
		t.Errorf("%d tasks submitted by a cancelled SubmitManyContext", n)
	}
}

// While a task runs, the scheduler says why the others wait: the one that
// depends on it for it, the one behind it for the single slot; its
// records say the same.
func TestSchedulerSaysWhyTasksWait(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	s := newScheduler(t, gpusched.Scheduling{MaxParallelTasks: 1, KillGrace: 100 * time.Millisecond})
	err := s.SubmitMany([]gpusched.TaskSpec{
		{ID: "long", Payload: []string{sleeper, "-pidfile", pidfile, "-sleep", "1h"}},
		{ID: "after", Dependencies: []string{"long"}, Payload: []string{"true"}},
		{ID: "other", Payload: []string{"true"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []gpusched.Record, 1)
	go func() { recs, _ := s.Run(ctx); done <- recs }()
	readPIDs(t, pidfile, 1)
	want := map[string]gpusched.WaitReason{
		"after": {Kind: gpusched.WaitDependencies, Detail: "long"},
		"other": {Kind: gpusched.WaitSlot},
	}
	got := s.Waiting()
	if len(got) != 2 || got["after"] != want["after"] || got["other"] != want["other"] {
		t.Errorf("Waiting() = %+v, want %+v", got, want)
	}
	if w := s.Waiting("other", "long", "nope"); len(w) != 1 || w["other"].String() != "waiting for a free slot" {
		t.Errorf(`Waiting("other", "long", "nope") = %+v`, w)
	}
	for _, r := range s.Records() {
		if r.Waiting != want[r.ID] {
			t.Errorf("%s's record waits %+v, want %+v", r.ID, r.Waiting, want[r.ID])
		}
	}
	cancel()
	for _, r := range <-done {
		if r.State == gpusched.StatePending && r.Waiting != want[r.ID] {
			t.Errorf("after the run, %s waits %+v, want %+v", r.ID, r.Waiting, want[r.ID])
		}
	}
}
