package slurm

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/task"
)

// What people see of a Slurm task, through the real gpusched binary on
// the fake Slurm: status (table and --json), the plain output, --events,
// logs -f, report and plan.

// statusJSON is what the tests read of "gpusched status --json".
type statusJSON struct {
	Tasks []struct {
		ID          string          `json:"id"`
		State       string          `json:"state"`
		Waiting     string          `json:"waiting"`
		WaitingKind string          `json:"waiting_kind"`
		Job         *task.RemoteJob `json:"job"`
		History     []task.Attempt  `json:"history"`
	} `json:"tasks"`
}

// status runs "gpusched status --json" on run; nothing while the run has
// not made its run directory yet.
func (c *cluster) status(t *testing.T, dir, run string) statusJSON {
	t.Helper()
	var s statusJSON
	// Looked at before status runs: a state.db the run creates while status
	// is failing to find one is no failure of status.
	_, serr := os.Stat(filepath.Join(run, "state.db"))
	out, err := c.gpusched(t, dir, "status", "--json", "--run-dir", run).Output()
	if err != nil && serr != nil {
		return s
	}
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("status --json: %v: %s", err, stderr)
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return s
}

// startRun starts "gpusched run" of wf on run in the background, its
// output in out; the caller waits for it.
func (c *cluster) startRun(t *testing.T, dir, run string, out *bytes.Buffer, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := c.gpusched(t, dir, append([]string{"run", "wf.yaml", "--run-dir", run, "--no-progress"}, extra...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd
}

// TestViewsOfAQueuedJob: while its job waits in Slurm's queue, the task
// is running, and status says why it waits (Slurm's reason), with the
// job; logs -f waits for the log; once the job runs, status names the
// node; the plain output and --events told each change; logs -f printed
// the whole log; the report names the job and node.
func TestViewsOfAQueuedJob(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.set(t, "start-delay", "1h")
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: train
    args: [sh, -c, "echo first; while [ ! -e `+gate+` ]; do sleep 0.05; done; echo last"]
`)
	run := filepath.Join(dir, "run")
	var out bytes.Buffer
	cmd := c.startRun(t, dir, run, &out, "--events", filepath.Join(dir, "events.jsonl"))

	var st statusJSON
	waitFor(t, "status says the job waits for Priority", func() bool {
		st = c.status(t, dir, run)
		return len(st.Tasks) == 1 && st.Tasks[0].Job != nil && st.Tasks[0].Job.Reason == "Priority"
	})
	tr := st.Tasks[0]
	id := tr.Job.ID
	wantJob := task.RemoteJob{System: "Slurm", ID: id, State: "PENDING", Reason: "Priority", Queued: true}
	if tr.State != "running" || tr.WaitingKind != "queued" || tr.Waiting != "queued in Slurm as job "+id+": Priority" ||
		*tr.Job != wantJob || len(tr.History) != 1 || tr.History[0].Job == nil || *tr.History[0].Job != wantJob {
		t.Errorf("status --json while queued: %+v (job %+v); want running, queued in Slurm as job %s: Priority", tr, tr.Job, id)
	}
	table, _ := c.gpusched(t, dir, "status", "--run-dir", run).CombinedOutput()
	if !strings.Contains(string(table), "queued in Slurm as job "+id+": Priority") {
		t.Errorf("status while queued:\n%s\nwant the note: queued in Slurm as job %s: Priority", table, id)
	}
	report, err := c.gpusched(t, dir, "report", "--run-dir", run, "-o", "-").Output()
	if err != nil || !strings.Contains(string(report), "queued in Slurm as job "+id+": Priority") {
		t.Errorf("report while queued (%v): no reason the task waits", err)
	}

	follow := c.gpusched(t, dir, "logs", "-f", "train", "--run-dir", run)
	var followed bytes.Buffer
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	c.set(t, "start-delay", "0s") // the job runs
	waitFor(t, "status names the node", func() bool {
		st = c.status(t, dir, run)
		return st.Tasks[0].Job != nil && st.Tasks[0].Job.Node == "fake1"
	})
	if tr := st.Tasks[0]; tr.WaitingKind != "" || tr.Waiting != "" || tr.Job.Queued || tr.Job.State != "RUNNING" {
		t.Errorf("status --json once it runs: %+v (job %+v); want running on fake1, not waiting", tr, tr.Job)
	}
	table, _ = c.gpusched(t, dir, "status", "--run-dir", run).CombinedOutput()
	if !strings.Contains(string(table), "Slurm job "+id+" RUNNING on fake1") {
		t.Errorf("status once it runs:\n%s\nwant the note: Slurm job %s RUNNING on fake1", table, id)
	}
	writeFile(t, gate, "")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out.String())
	}
	if err := follow.Wait(); err != nil || followed.String() != "first\nlast\n" {
		t.Errorf("logs -f: %v, printed %q; want the whole log", err, followed.String())
	}
	for _, want := range []string{"job       train: Slurm job " + id + " PENDING (Priority)", "job       train: Slurm job " + id + " RUNNING on fake1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("gpusched run's output lacks %q:\n%s", want, out.String())
		}
	}
	var pending, running, ended bool
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "events.jsonl"))), "\n") {
		var ev struct {
			Event string          `json:"event"`
			Job   *task.RemoteJob `json:"job"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events line %q: %v", line, err)
		}
		switch {
		case ev.Event == "job" && *ev.Job == wantJob:
			pending = true
		case ev.Event == "job" && ev.Job.Node == "fake1" && ev.Job.ID == id:
			running = true
		case ev.Event == "attempt-ended" && ev.Job != nil && ev.Job.ID == id:
			ended = true
		}
	}
	if !pending || !running || !ended {
		t.Errorf("--events: job pending %v, running %v, attempt-ended with it %v; want all", pending, running, ended)
	}
	// Ended, its job is no longer shown as last seen running.
	st = c.status(t, dir, run)
	if h := st.Tasks[0].History; len(h) != 1 || h[0].Job == nil || h[0].Job.State != "COMPLETED" || h[0].Job.Node != "fake1" {
		t.Errorf("status --json once it ended: history %+v; want its job COMPLETED on fake1", h)
	}
	report, err = c.gpusched(t, dir, "report", "--run-dir", run, "-o", "-").Output()
	if err != nil || !strings.Contains(string(report), "Slurm job "+id+" on fake1") {
		t.Errorf("report (%v): does not name the job and its node", err)
	}
}

// TestStatusControllerDown: while the controller does not answer, the
// task's submission waits, and status says so and since when.
func TestStatusControllerDown(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.set(t, "down", "")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: train
    args: ["true"]
`)
	run := filepath.Join(dir, "run")
	var out bytes.Buffer
	cmd := c.startRun(t, dir, run, &out)
	var st statusJSON
	waitFor(t, "status says submission waits", func() bool {
		st = c.status(t, dir, run)
		return len(st.Tasks) == 1 && st.Tasks[0].WaitingKind == "queued"
	})
	tr := st.Tasks[0]
	if tr.State != "running" || !strings.HasPrefix(tr.Waiting, "Slurm controller unreachable since ") ||
		!strings.HasSuffix(tr.Waiting, ": submission waits") || tr.Job == nil || tr.Job.ID != "" {
		t.Errorf("status --json: %+v (job %+v); want running, submission waiting for the controller, no job yet", tr, tr.Job)
	}
	table, _ := c.gpusched(t, dir, "status", "--run-dir", run).CombinedOutput()
	if !strings.Contains(string(table), "Slurm controller unreachable since ") {
		t.Errorf("status:\n%s\nwant why submission waits", table)
	}
	c.unset(t, "down")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gpusched run: %v\n%s", err, out.String())
	}
	if st := c.status(t, dir, run); st.Tasks[0].State != "complete" || st.Tasks[0].Job == nil || st.Tasks[0].Job.ID == "" {
		t.Errorf("after: %+v, want complete, its job named", st.Tasks[0])
	}
}

// TestPlanAfterCrash: gpusched dies (-9) while its job waits in Slurm's
// queue; status and plan, which only look, say the next run adopts the
// job (naming it and what Slurm last said), and it does; once the job's
// result file is there, plan says its result is recorded.
func TestPlanAfterCrash(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.set(t, "start-delay", "1h")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  executor: slurm
tasks:
  - id: train
    args: ["true"]
`)
	run := filepath.Join(dir, "run")
	var out bytes.Buffer
	first := c.startRun(t, dir, run, &out)
	var id string
	waitFor(t, "the job waits for Priority", func() bool {
		st := c.status(t, dir, run)
		if len(st.Tasks) == 1 && st.Tasks[0].Job != nil && st.Tasks[0].Job.Reason == "Priority" {
			id = st.Tasks[0].Job.ID
			return true
		}
		return false
	})
	syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
	first.Wait()

	plan, err := c.gpusched(t, dir, "plan", "wf.yaml", "--run-dir", run).CombinedOutput()
	want := "adopt Slurm job " + id + " (last seen PENDING: Priority)"
	if err != nil || !strings.Contains(string(plan), "train  adopt   "+want) {
		t.Errorf("plan (%v):\n%s\nwant train's action adopt: %s", err, plan, want)
	}
	table, _ := c.gpusched(t, dir, "status", "--run-dir", run).CombinedOutput()
	if !strings.Contains(string(table), want) {
		t.Errorf("status without a scheduler:\n%s\nwant the note %s", table, want)
	}

	c.set(t, "start-delay", "0s")
	// The job runs and ends while no scheduler follows it: its result
	// file tells.
	result := filepath.Join(run, "logs", "train.attempt-1.result")
	waitFor(t, "the job's result file", func() bool { _, err := os.Stat(result); return err == nil })
	plan, _ = c.gpusched(t, dir, "plan", "wf.yaml", "--run-dir", run).CombinedOutput()
	if want := "Slurm job " + id + " ended while no scheduler ran (exit code 0): its result is recorded"; !strings.Contains(string(plan), want) {
		t.Errorf("plan once the job ended:\n%s\nwant %s", plan, want)
	}
	if out, err := c.gpusched(t, dir, "run", "wf.yaml", "--run-dir", run, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if n := c.count("sbatch"); n != 1 {
		t.Errorf("%d sbatch calls, want 1: the job was adopted", n)
	}
}
