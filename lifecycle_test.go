package gpusched_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// workflow of three tasks writing files into dir; each appends its id to
// ran so tests can tell what executed.
func artifactTasks(dir, ran string) []gpusched.TaskSpec {
	sh := func(script string) []string {
		return []string{"sh", "-c", "echo $GPUSCHED_TASK_ID >> " + ran + "; " + script}
	}
	return []gpusched.TaskSpec{
		{ID: "prepare", Dir: dir, Payload: sh("mkdir -p out && echo data > out/data.txt"), Artifacts: []string{"out/data.txt"}},
		{ID: "train", Dir: dir, Dependencies: []string{"prepare"}, Payload: sh("cat out/data.txt > out/model.pt"), Artifacts: []string{"out/model.pt"}},
		{ID: "evaluate", Dir: dir, Dependencies: []string{"train"}, Payload: sh("wc -c < out/model.pt > out/eval.txt"), Artifacts: []string{"out/eval.txt"}},
	}
}

func runTasks(t *testing.T, runDir string, tasks []gpusched.TaskSpec, opts ...gpusched.Option) map[string]gpusched.Record {
	t.Helper()
	s, err := gpusched.New(runDir, gpusched.Scheduling{MaxParallelTasks: 2}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SubmitMany(tasks); err != nil {
		t.Fatal(err)
	}
	return run(t, s)
}

func executions(t *testing.T, ran string) []string {
	t.Helper()
	b, _ := os.ReadFile(ran)
	os.Remove(ran)
	return strings.Fields(string(b))
}

func TestResumeRerunsInvalidatedTasksAndDownstream(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	tasks := artifactTasks(dir, ran)

	recs := runTasks(t, runDir, tasks)
	if got := executions(t, ran); !slices.Equal(got, []string{"prepare", "train", "evaluate"}) {
		t.Fatalf("first run executed %v", got)
	}
	a := recs["train"].Artifacts
	if len(a) != 1 || a[0].Path != "out/model.pt" || a[0].Size != 5 || a[0].ModTime.IsZero() {
		t.Errorf("train's artifacts = %+v", a)
	}

	steps := []struct {
		name   string
		change func()
		want   []string
		plan   map[string]string
	}{
		{"nothing changed", func() {}, nil,
			map[string]string{"prepare": "complete, kept", "train": "complete, kept", "evaluate": "complete, kept"}},
		{"model deleted", func() { os.Remove(filepath.Join(dir, "out/model.pt")) }, []string{"train", "evaluate"},
			map[string]string{"prepare": "complete, kept", "train": "artifact missing: out/model.pt", "evaluate": "upstream train reruns"}},
		{"input rewritten", func() { os.WriteFile(filepath.Join(dir, "out/data.txt"), []byte("more data\n"), 0o644) },
			[]string{"prepare", "train", "evaluate"},
			map[string]string{"prepare": "artifact changed: out/data.txt (size 5 -> 10)", "train": "upstream prepare reruns", "evaluate": "upstream train reruns"}},
		{"definition changed", func() { tasks[2].Env = map[string]string{"X": "1"} }, []string{"evaluate"},
			map[string]string{"prepare": "complete, kept", "train": "complete, kept", "evaluate": "definition changed: env"}},
	}
	for _, st := range steps {
		st.change()
		plan, err := gpusched.Plan(runDir, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range plan {
			if want := st.plan[it.ID]; it.Why != want || it.Run != (want != "complete, kept") {
				t.Errorf("%s: plan for %s = %+v, want %q", st.name, it.ID, it, want)
			}
		}
		if got := executions(t, ran); len(got) != 0 {
			t.Fatalf("%s: Plan executed %v", st.name, got)
		}
		recs := runTasks(t, runDir, tasks)
		if got := executions(t, ran); !slices.Equal(got, st.want) {
			t.Errorf("%s: executed %v, want %v", st.name, got, st.want)
		}
		for id, r := range recs {
			if r.State != gpusched.StateComplete {
				t.Errorf("%s: %s is %s", st.name, id, r.State)
			}
		}
	}
}

func TestHashedArtifactSurvivesTouch(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	tasks := artifactTasks(dir, ran)[:1]
	tasks[0].HashArtifacts = true
	recs := runTasks(t, runDir, tasks)
	if h := recs["prepare"].Artifacts[0].SHA256; len(h) != 64 {
		t.Fatalf("sha256 = %q", h)
	}
	executions(t, ran)
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "out/data.txt"), later, later)
	runTasks(t, runDir, tasks)
	if got := executions(t, ran); len(got) != 0 {
		t.Errorf("a touched but unchanged hashed artifact reran %v", got)
	}
	tasks[0].HashArtifacts = false // also a definition change
	os.WriteFile(filepath.Join(dir, "out/data.txt"), []byte("DATA\n"), 0o644)
	tasks[0].HashArtifacts = true
	plan, _ := gpusched.Plan(runDir, tasks)
	if plan[0].Why != "artifact changed: out/data.txt (content changed)" {
		t.Errorf("plan = %+v", plan)
	}
}

func TestMissingArtifactFailsTheAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	// The first attempt exits 0 without its file; the retry makes it.
	task := gpusched.TaskSpec{ID: "t", Dir: dir, Retries: 1, Artifacts: []string{"out.bin"},
		Payload: []string{"sh", "-c", "echo x >> n; if [ $(wc -l < n) -ge 2 ]; then echo ok > out.bin; fi"}}
	recs := runTasks(t, t.TempDir(), []gpusched.TaskSpec{task})
	r := recs["t"]
	if r.State != gpusched.StateComplete || len(r.Attempts) != 2 || r.Attempts[0].Error != "artifact missing: out.bin" || *r.Attempts[0].ExitCode != 0 {
		t.Errorf("record = %+v", r)
	}
	_ = counter
}

// phases is a kind that records the order of its lifecycle calls.
type phases struct {
	mu       sync.Mutex
	calls    []string
	checkErr error
	afterErr error
}

func (p *phases) log(s string) { p.mu.Lock(); p.calls = append(p.calls, s); p.mu.Unlock() }

func (p *phases) Prepare(_ context.Context, t *gpusched.TaskSpec, n int) error {
	p.log(fmt.Sprintf("prepare %s#%d", t.ID, n))
	return nil
}

func (p *phases) Command(_ context.Context, t *gpusched.TaskSpec, n int) (gpusched.Command, error) {
	p.log(fmt.Sprintf("command %s#%d", t.ID, n))
	return gpusched.Command{Args: []string{"sh", "-c", t.Payload.(string)}, Dir: t.Dir}, nil
}

func (p *phases) Judge(t *gpusched.TaskSpec, r gpusched.AttemptResult) error {
	p.log(fmt.Sprintf("judge %s#%d exit %d", t.ID, r.Attempt, r.ExitCode))
	if r.ExitCode != 0 {
		return fmt.Errorf("exit %d", r.ExitCode)
	}
	return nil
}

func (p *phases) CheckArtifacts(_ context.Context, t *gpusched.TaskSpec, a []gpusched.Artifact) error {
	p.log(fmt.Sprintf("check %s %d", t.ID, len(a)))
	return p.checkErr
}

func (p *phases) AfterAttempt(_ context.Context, t *gpusched.TaskSpec, r gpusched.AttemptResult) error {
	p.log(fmt.Sprintf("after %s#%d", t.ID, r.Attempt))
	return p.afterErr
}

func (p *phases) OnComplete(_ context.Context, ev gpusched.CompletionEvent) error {
	p.log(fmt.Sprintf("complete %s event %d", ev.TaskID, ev.ID))
	return nil
}

func (p *phases) OnFailure(_ context.Context, t *gpusched.TaskSpec, r gpusched.Record) error {
	p.log(fmt.Sprintf("failure %s after %d", t.ID, len(r.Attempts)))
	return errors.New("pager is down")
}

func TestLifecyclePhasesInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := &phases{}
	tasks := []gpusched.TaskSpec{{ID: "ok", Kind: "phases", Dir: dir, Payload: "echo hi > f", Artifacts: []string{"f"}}}
	runTasks(t, t.TempDir(), tasks, gpusched.WithHandler("phases", p))
	want := []string{"prepare ok#1", "command ok#1", "judge ok#1 exit 0", "check ok 1", "after ok#1", "complete ok event 1"}
	if !slices.Equal(p.calls, want) {
		t.Errorf("calls = %q\nwant    %q", p.calls, want)
	}

	p2 := &phases{afterErr: errors.New("cleanup failed")}
	runDir := t.TempDir()
	recs := runTasks(t, runDir, []gpusched.TaskSpec{{ID: "bad", Kind: "phases", Dir: dir, Retries: 1, Payload: "true"}},
		gpusched.WithHandler("phases", p2))
	r := recs["bad"]
	if r.State != gpusched.StateFailed || r.Error != "after attempt: cleanup failed" || len(r.Attempts) != 2 {
		t.Errorf("an AfterAttempt error must fail a successful attempt: %+v", r)
	}
	// OnFailure runs on its own goroutine, after Run has returned: wait
	// for its error to reach the log.
	var logged []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if logged, _ = os.ReadFile(r.LastAttempt().LogPath); strings.Contains(string(logged), "failure handler: pager is down") {
			break
		}
	}
	if !strings.Contains(string(logged), "failure handler: pager is down") {
		t.Errorf("the failure handler's error is not in the log: %q", logged)
	}
	p2.mu.Lock()
	calls := slices.Clone(p2.calls)
	p2.mu.Unlock()
	if n := slices.Index(calls, "failure bad after 2"); n < 0 || slices.Contains(calls[n+1:], "failure bad after 2") ||
		slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "complete") }) {
		t.Errorf("calls = %q: want OnFailure once, no completion", calls)
	}
}

func TestOnCompleteCommandAtLeastOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got := filepath.Join(dir, "events")
	flag := filepath.Join(dir, "handler-ok")
	task := gpusched.TaskSpec{ID: "t", Payload: []string{"true"},
		OnComplete: []string{"sh", "-c", "test -e " + flag + " && echo $GPUSCHED_TASK_ID $GPUSCHED_EVENT_ID >> " + got}}
	runDir := t.TempDir()
	// The handler fails: not acknowledged. Stop before the retries are over.
	s, err := gpusched.New(runDir, gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(task); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if recs, err := s.Run(ctx); !errors.Is(err, context.DeadlineExceeded) || recs[0].State != gpusched.StateComplete {
		t.Fatalf("Run = %v, %v; want the task complete and Run waiting for its event until stopped", recs, err)
	}
	s.Close()
	if _, err := os.Stat(got); err == nil {
		t.Fatal("the handler wrote although it failed")
	}
	os.WriteFile(flag, nil, 0o644)
	runTasks(t, runDir, []gpusched.TaskSpec{task}) // delivered again on resume
	if b, _ := os.ReadFile(got); string(b) != "t 1\n" {
		t.Errorf("events = %q, want the same event 1 delivered on the next run", b)
	}
	runTasks(t, runDir, []gpusched.TaskSpec{task})
	if b, _ := os.ReadFile(got); string(b) != "t 1\n" {
		t.Errorf("an acknowledged event was delivered again: %q", b)
	}
}
