package gpusched_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// runResult is what Scheduler.Run returned.
type runResult struct {
	recs map[string]gpusched.Record
	err  error
}

// runReturns runs s and fails the test, instead of hanging, if Run has not
// returned after a generous deadline. The caller closes s once it returns.
func runReturns(t *testing.T, s *gpusched.Scheduler) runResult {
	t.Helper()
	done := make(chan runResult, 1)
	go func() {
		recs, err := s.Run(context.Background())
		m := map[string]gpusched.Record{}
		for _, r := range recs {
			m[r.ID] = r
		}
		done <- runResult{m, err}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
		panic("unreachable")
	}
}

// A run whose state database is deleted while it goes stops with an error
// wrapping store.ErrGone at its next commit, instead of going on and
// reporting success with nothing saved.
func TestRunStopsWhenStateDBDeleted(t *testing.T) {
	t.Parallel()
	runDir := t.TempDir()
	s, err := gpusched.New(runDir, gpusched.Scheduling{MaxParallelTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(runDir, gpusched.StateFile)
	marker := filepath.Join(t.TempDir(), "after-ran")
	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "delete", Payload: []string{"rm", db}},
		{ID: "after", Dependencies: []string{"delete"}, Payload: []string{"touch", marker}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := runReturns(t, s) // no deferred Close: it would wait for a hung Run
	s.Close()
	if !errors.Is(r.err, gpusched.ErrStateGone) {
		t.Fatalf("Run = %v, want an error wrapping gpusched.ErrStateGone", r.err)
	}
	if got := r.recs["after"]; got.State == gpusched.StateComplete {
		t.Errorf("after the state database was gone, a task completed: %+v", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("after the state database was gone, a task still ran")
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a state database was created again at the path")
	}
}

// A task whose artifact is a named pipe fails with a message naming it,
// hashed or not, and the run ends: the pipe is never opened, so nothing
// waits for a writer.
func TestFIFOArtifactFailsTheTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := gpusched.New(t.TempDir(), gpusched.Scheduling{MaxParallelTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "hashed", Dir: dir, Payload: []string{"mkfifo", "hashed.fifo"}, Artifacts: []string{"hashed.fifo"},
			HashArtifacts: true, Retries: gpusched.NoRetries},
		{ID: "plain", Dir: dir, Payload: []string{"mkfifo", "plain.fifo"}, Artifacts: []string{"plain.fifo"},
			Retries: gpusched.NoRetries},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := runReturns(t, s) // no deferred Close: it would wait for a hung Run
	s.Close()
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	for id, want := range map[string]string{
		"hashed": "artifact hashed.fifo: not a regular file (a named pipe)",
		"plain":  "artifact plain.fifo: not a regular file (a named pipe)",
	} {
		rec := r.recs[id]
		if rec.State != gpusched.StateFailed || len(rec.Attempts) != 1 || rec.Attempts[0].Error != want {
			t.Errorf("%s = %+v, want failed after one attempt with %q", id, rec, want)
		}
	}
}
