package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
)

// progressLog records what an executor tells Hooks.Progress.
type progressLog struct {
	mu  sync.Mutex
	all []executor.Progress
}

func (l *progressLog) add(p executor.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, p)
}

func (l *progressLog) get() []executor.Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]executor.Progress(nil), l.all...)
}

// has reports whether some progress told satisfies ok.
func (l *progressLog) has(ok func(executor.Progress) bool) bool {
	for _, p := range l.get() {
		if ok(p) {
			return true
		}
	}
	return false
}

// TestProgress: the job id once released, Slurm's pending reason while
// it waits, the node once it runs, and how it ended once its result file
// is read; each change told once, not once per tracking round.
func TestProgress(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "start-delay", "1h")
	ex := newExecutor(t, testConfig(f))
	gate := filepath.Join(t.TempDir(), "go")
	var log progressLog
	rec := newRecorder()
	hooks := rec.hooks()
	hooks.Progress = log.add
	done := make(chan executor.Result, 1)
	go func() {
		done <- ex.Execute(context.Background(), executortest.NewJob(t, sleeper, "-wait", gate, "-exit", "0"), hooks)
	}()
	waitFor(t, "Slurm's pending reason", func() bool {
		return log.has(func(p executor.Progress) bool { return p.Reason == "Priority" })
	})
	id := rec.id(t)
	rounds := f.count("squeue")
	waitFor(t, "five more rounds", func() bool { return f.count("squeue") >= rounds+5 })
	f.set(t, "start-delay", "0s") // the job runs
	await(t, rec.started, "the job started")
	waitFor(t, "the node", func() bool { return log.has(func(p executor.Progress) bool { return p.Node == "fake1" }) })
	os.WriteFile(gate, nil, 0o644)
	if r := await(t, done, "the gate opened"); r.Reason != executor.Exited || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	all := log.get()
	want := []executor.Progress{
		{System: "Slurm", Job: id, State: "PENDING", Queued: true},
		{System: "Slurm", Job: id, State: "PENDING", Reason: "Priority", Queued: true},
		{System: "Slurm", Job: id, State: "RUNNING", Node: "fake1"},
	}
	if end := (executor.Progress{System: "Slurm", Job: id, State: "COMPLETED", Node: "fake1"}); all[len(all)-1] != end {
		t.Errorf("last progress = %+v, want %+v: the result file says the job ended", all[len(all)-1], end)
	}
	if len(all) < len(want) {
		t.Fatalf("progress told: %+v, want at least %+v", all, want)
	}
	for i, w := range want {
		if all[i] != w {
			t.Errorf("progress %d = %+v, want %+v", i, all[i], w)
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Errorf("progress %d told twice in a row: %+v", i, all[i])
		}
	}
	if n := f.count("squeue"); len(all) > len(want)+1 || len(all) >= n {
		t.Errorf("%d progress calls over %d rounds: want one per change (%+v)", len(all), n, all)
	}
}

// TestProgressEndState: once the result file is read, the job is told
// ended as Slurm ends it by the helper's exit code: COMPLETED for a
// command that exited 0, FAILED for one that did not, or did not run.
func TestProgressEndState(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	ex := newExecutor(t, testConfig(f))
	for _, tc := range []struct {
		args  []string
		state string
	}{
		{[]string{sleeper, "-exit", "0"}, "COMPLETED"},
		{[]string{sleeper, "-exit", "3"}, "FAILED"},
		{[]string{filepath.Join(t.TempDir(), "missing")}, "FAILED"},
	} {
		var log progressLog
		ex.Execute(context.Background(), executortest.NewJob(t, tc.args[0], tc.args[1:]...), executor.Hooks{Progress: log.add})
		all := log.get()
		if len(all) == 0 || all[len(all)-1].State != tc.state || all[len(all)-1].Queued {
			t.Errorf("%q: progress %+v, want it to end %s", tc.args, all, tc.state)
		}
	}
}

// TestProgressControllerDown: while sbatch cannot reach the controller,
// the attempt is told why it waits, before any job exists; then its job.
func TestProgressControllerDown(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	ex := newExecutor(t, testConfig(f))
	f.set(t, "down", "")
	var log progressLog
	hooks := executor.Hooks{Progress: log.add}
	done := make(chan executor.Result, 1)
	go func() { done <- ex.Execute(context.Background(), executortest.NewJob(t, sleeper, "-exit", "0"), hooks) }()
	waitFor(t, "the reason submission waits", func() bool { return len(log.get()) > 0 })
	p := log.get()[0]
	if p.Job != "" || !p.Queued || !strings.HasPrefix(p.Reason, "Slurm controller unreachable since ") ||
		!strings.HasSuffix(p.Reason, ": submission waits") {
		t.Errorf("progress = %+v, want no job, queued, the controller unreachable", p)
	}
	waitFor(t, "another failed sbatch call", func() bool { return f.count("sbatch") >= 2 })
	if n := len(log.get()); n != 1 {
		t.Errorf("%d progress calls while the controller stayed down, want 1: %+v", n, log.get())
	}
	f.unset(t, "down")
	if r := await(t, done, "the controller came back"); r.Reason != executor.Exited {
		t.Fatalf("result = %+v", r)
	}
	if !log.has(func(p executor.Progress) bool { return p.Job != "" && p.State != "" }) {
		t.Errorf("progress %+v: want the job once submitted", log.get())
	}
}

// TestProgressRecovered: an adopted job's progress goes to the orphan's
// Progress while Wait follows it.
func TestProgressRecovered(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "start-delay", "1h")
	old := newExecutor(t, testConfig(f))
	j := executortest.NewJob(t, sleeper, "-exit", "0")
	var saved executor.Handle
	old.Execute(context.Background(), j, executor.Hooks{Submitted: func(h executor.Handle) error {
		saved = h
		old.Close()
		return nil
	}})
	var log progressLog
	rec := newExecutor(t, testConfig(f)).Recover([]executor.Orphan{{Job: j, Handle: saved, Progress: log.add}})[0]
	if rec.Wait == nil {
		t.Fatalf("recovery = %+v, want the job adopted", rec.Result)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan executor.Result, 1)
	go func() { done <- rec.Wait(ctx) }()
	id := jobID(t, saved)
	waitFor(t, "the pending job's reason", func() bool {
		return log.has(func(p executor.Progress) bool { return p.Job == id && p.Reason == "Priority" && p.Queued })
	})
	cancel()
	if r := await(t, done, "cancel"); r.Reason != executor.Cancelled {
		t.Errorf("result = %+v, want cancelled", r)
	}
}
