package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Resuming a run directory, the front leaves reading the workflow to the
// scheduler it hands the run to. An invalid workflow is still refused as
// the front would refuse it: exit 2, the same one-line error, nothing run,
// and an --events file left as it was; a valid one empties the --events
// file before its first event.
func TestResumeInvalidWorkflowRefusedByScheduler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	marker := filepath.Join(dir, "ran")
	events := writeFile(t, filepath.Join(dir, "events"), "kept\n")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    args: [true]\n")
	gs(t, "", "run", wf, "--run-dir", runDir).want(t, 0)
	sup := filepath.Join(runDir, "supervisor.log")
	schedulersBefore := strings.Count(readFile(t, sup), " started for PID ")

	writeFile(t, wf, `tasks:
  - id: a
    args: [true]
  - id: b
    args: `+sh("touch "+q(marker))+`
    dependencies: [nope]
`)
	r := gs(t, "", "run", wf, "--run-dir", runDir, "--events", events)
	r.want(t, 2)
	msg := oneLineError(t, r)
	if !strings.Contains(msg, `"nope"`) {
		t.Errorf("error %q does not name the unknown dependency", msg)
	}
	if got := strings.Count(readFile(t, sup), " started for PID "); got != schedulersBefore+1 {
		t.Errorf("%d schedulers started for the invalid workflow; want 1 (the front leaves the workflow to it)", got-schedulersBefore)
	}
	// The same workflow where no run directory exists: the front reads
	// it, refuses it alike, and makes no run directory.
	fresh := filepath.Join(dir, "fresh")
	r2 := gs(t, "", "run", wf, "--run-dir", fresh)
	r2.want(t, 2)
	if r2.stderr != r.stderr {
		t.Errorf("resuming says %q; a new run says %q", r.stderr, r2.stderr)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a run directory was made for an invalid workflow: %v", err)
	}
	if got := readFile(t, events); got != "kept\n" {
		t.Errorf("--events file %q after an invalid workflow; want it as it was", got)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("b ran although its workflow is invalid")
	}
	st := gs(t, "", "status", "--run-dir", runDir)
	st.want(t, 0)
	if strings.Contains(st.stdout, " b ") {
		t.Errorf("b was submitted although its workflow is invalid:\n%s", st.stdout)
	}

	writeFile(t, wf, "tasks:\n  - id: a\n    args: [true]\n  - id: c\n    args: [true]\n")
	gs(t, "", "run", wf, "--run-dir", runDir, "--events", events).want(t, 0)
	got := readFile(t, events)
	if strings.Contains(got, "kept") || !strings.HasPrefix(got, "{") || !strings.Contains(got, `"task":"c"`) {
		t.Errorf("--events file after a valid resume:\n%s\nwant c's events only", got)
	}
}
