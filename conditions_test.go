package gpusched_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpusched/gpusched"
)

// Three runs on one run directory, with real processes: prepare fails
// (its clean-up runs, its report is blocked); fixed, it runs again and
// completes (the report runs, the clean-up is not needed); then nothing
// runs. Before each run, Plan says what the run does.
func TestConditionsAcrossRuns(t *testing.T) {
	t.Parallel()
	dir, runDir := t.TempDir(), t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	sh := func(script string) []string {
		return []string{"sh", "-c", "echo $GPUSCHED_TASK_ID >> " + ran + "; " + script}
	}
	tasks := []gpusched.TaskSpec{
		{ID: "prepare", Dir: dir, Payload: sh("test -e fixed")},
		{ID: "cleanup", Dir: dir, Payload: sh("true"), Dependencies: []string{"prepare"},
			DependencyOn: map[string]gpusched.DependencyCondition{"prepare": gpusched.AfterFailure}},
		{ID: "report", Dir: dir, Payload: sh("true"), Dependencies: []string{"prepare"}},
		{ID: "after-cleanup", Dir: dir, Payload: sh("true"), Dependencies: []string{"cleanup"}},
	}
	plan := func(want map[string]string) {
		t.Helper()
		items, err := gpusched.Plan(runDir, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if it.Why != want[it.ID] || it.NotNeeded != (it.Why[:4] == "not ") {
				t.Errorf("plan for %s: %+v, want %q", it.ID, it, want[it.ID])
			}
		}
	}

	plan(map[string]string{"prepare": "never ran", "cleanup": "never ran (only if prepare fails)", "report": "never ran", "after-cleanup": "never ran"})
	recs := runTasks(t, runDir, tasks)
	if got := executions(t, ran); !slices.Equal(got, []string{"prepare", "cleanup", "after-cleanup"}) {
		t.Errorf("run 1 executed %v", got)
	}
	if recs["report"].State != gpusched.StateBlocked || recs["report"].OK() || recs["cleanup"].State != gpusched.StateComplete {
		t.Errorf("run 1: report %s, cleanup %s", recs["report"].State, recs["cleanup"].State)
	}

	if err := os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	plan(map[string]string{"prepare": "failed before", "cleanup": "upstream prepare reruns (only if prepare fails)",
		"report": "blocked before", "after-cleanup": "upstream cleanup reruns"})
	recs = runTasks(t, runDir, tasks)
	if got := executions(t, ran); !slices.Equal(got, []string{"prepare", "report"}) {
		t.Errorf("run 2 executed %v", got)
	}
	for _, id := range []string{"cleanup", "after-cleanup"} {
		if r := recs[id]; r.State != gpusched.StateBlocked || !r.NotNeeded || r.BlockedBy != "prepare" || !r.OK() {
			t.Errorf("run 2: %s %s by %q, not needed %v", id, r.State, r.BlockedBy, r.NotNeeded)
		}
	}
	if n := len(recs["cleanup"].Attempts); n != 1 {
		t.Errorf("cleanup has %d attempts, want its one of run 1", n)
	}

	plan(map[string]string{"prepare": "complete, kept", "cleanup": "not needed: prepare completes, and it runs on its failure",
		"report": "complete, kept", "after-cleanup": "not needed: cleanup is not needed (prepare completes)"})
	recs = runTasks(t, runDir, tasks)
	if got := executions(t, ran); len(got) != 0 {
		t.Errorf("run 3 executed %v", got)
	}
	for id, r := range recs {
		if !r.OK() {
			t.Errorf("run 3: %s is %s (%s)", id, r.State, r.Error)
		}
	}
}
