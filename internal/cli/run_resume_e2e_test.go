package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
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

// Resuming, the scheduler reads the run directory's state while it reads
// the workflow (loadReserving). An invalid workflow must still leave that
// state exactly as it was: here a crash image, whose committed rows are
// only in the WAL (a writer's close would checkpoint them into state.db)
// and whose pending task holds a saved waiting reason (a scheduler's
// Open marks those stale). Both ways a run resumes: through a front and
// its scheduler, and in one process (no supervisor).
func TestResumeInvalidWorkflowLeavesStateUnchanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	image := filepath.Join(dir, "image")
	if err := os.MkdirAll(image, 0o755); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live")
	sched, err := gpusched.New(live, gpusched.Scheduling{MaxParallelTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = sched.SubmitMany([]gpusched.TaskSpec{
		{ID: "a", Payload: []string{"true"}},
		{ID: "b", Payload: []string{"true"}, Dependencies: []string{"a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The files as a crash would leave them, copied while the scheduler
	// still has them open.
	for _, name := range []string{gpusched.StateFile, gpusched.StateFile + "-wal"} {
		b, err := os.ReadFile(filepath.Join(live, name))
		if err != nil {
			t.Fatal(err)
		}
		if name != gpusched.StateFile && len(b) == 0 {
			t.Fatalf("%s is empty: no crash image to test", name)
		}
		writeFile(t, filepath.Join(image, name), string(b))
	}
	if err := sched.Close(); err != nil {
		t.Fatal(err)
	}
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    args: [true]\n  - id: b\n    args: [true]\n    dependencies: [nope]\n")
	for _, env := range []string{"", gpusched.NoSupervisorVar + "=1"} {
		runDir := filepath.Join(dir, "rd"+strconv.Itoa(len(env)))
		if err := os.CopyFS(runDir, os.DirFS(image)); err != nil {
			t.Fatal(err)
		}
		before := map[string]string{}
		for _, name := range []string{gpusched.StateFile, gpusched.StateFile + "-wal"} {
			before[name] = readFile(t, filepath.Join(runDir, name))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := command(ctx, "", "run", wf, "--run-dir", runDir)
		if env != "" {
			cmd.Env = append(cmd.Env, env)
		}
		r := finish(t, ctx, cmd, cmd.Args)
		cancel()
		r.want(t, 2)
		if msg := oneLineError(t, r); !strings.Contains(msg, `"nope"`) {
			t.Errorf("%s: error %q does not name the unknown dependency", env, msg)
		}
		for name, b := range before {
			if got := readFile(t, filepath.Join(runDir, name)); got != b {
				t.Errorf("%s: %s changed (%d bytes, %d before) by a run refused as invalid", env, name, len(got), len(b))
			}
		}
		// The image is whole: a valid workflow resumes it, b's saved
		// reason no longer shown once the new scheduler has decided.
		writeFile(t, filepath.Join(runDir, "ok.yaml"), "tasks:\n  - id: a\n    args: [true]\n  - id: b\n    args: [true]\n    dependencies: [a]\n")
		ok := gs(t, "", "run", filepath.Join(runDir, "ok.yaml"), "--run-dir", runDir)
		ok.want(t, 0)
		if !strings.Contains(ok.stdout, "2 complete") {
			t.Errorf("%s: the valid resume says:\n%s\nwant both tasks complete", env, ok.stdout)
		}
	}
}

// While another scheduler holds the run directory, resuming it says what
// it said before the directory was taken while the workflow is read: an
// invalid workflow is refused as invalid (exit 2), a valid one with the
// run directory in use (exit 1, naming the holder); neither disturbs the
// run going on.
func TestResumeLockedDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	pidfile := filepath.Join(dir, "pid")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    args: "+sleeper("-pidfile", pidfile, "-sleep", "60s")+"\n")
	holder := startRun(t, wf, "--run-dir", runDir)
	waitFor(t, 30*time.Second, "the first run's task to start", func() bool {
		_, err := os.Stat(pidfile)
		return err == nil
	})
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "tasks:\n  - id: a\n    args: [true]\n    dependencies: [nope]\n")
	r := gs(t, "", "run", bad, "--run-dir", runDir)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, `"nope"`) {
		t.Errorf("invalid workflow on a directory in use: %q; want the workflow's error", msg)
	}
	r = gs(t, "", "run", wf, "--run-dir", runDir)
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "is in use by another gpusched (pid ") {
		t.Errorf("valid workflow on a directory in use: %q; want the lock's error", msg)
	}
	if holder.exited() {
		t.Fatalf("the run holding the directory ended: %+v", holder.wait(t))
	}
}
