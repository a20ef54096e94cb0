package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// retryStatus is what these tests read of status --json.
type retryStatus struct {
	Tasks []struct {
		ID       string     `json:"id"`
		State    string     `json:"state"`
		Attempts int        `json:"attempts"`
		Error    string     `json:"error"`
		Waiting  string     `json:"waiting"`
		RetryAt  *time.Time `json:"retry_at"`
		History  []struct {
			Start      time.Time `json:"start"`
			End        time.Time `json:"end"`
			NotCharged bool      `json:"not_charged"`
			Error      string    `json:"error"`
		} `json:"history"`
	} `json:"tasks"`
}

// readRetryStatus returns the run's status, or false while there is none
// yet.
func readRetryStatus(t *testing.T, wf string) (retryStatus, bool) {
	t.Helper()
	var s retryStatus
	r := gs(t, "", "status", "--json", wf)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
		return s, false
	}
	return s, true
}

func (s retryStatus) task(id string) (i int, ok bool) {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return i, true
		}
	}
	return 0, false
}

// The retry policy, end to end: a failed attempt waits out its retry delay
// (status shows until when and why), an exit code that retry_on_exit_codes
// does not list is final, a timeout is final without retry_on_timeout, and
// a program that does not exist fails once whatever the retries.
func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "retry.yaml"), `
scheduling:
  retries: 3
tasks:
  - id: flaky
    args: `+sh(`n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ "$n" -ge 1 ] || exit 75`)+`
    retry_delay: 2s
    retry_on_exit_codes: [75]
  - id: wrong-code
    args: `+sh("exit 4")+`
    retry_on_exit_codes: [75]
  - id: slow
    args: [sleep, "30"]
    timeout: 200ms
  - id: missing
    args: [gpusched-no-such-program]
`)
	run := startRun(t, "--no-progress", wf)
	var waiting string
	var retryAt *time.Time
	waitFor(t, 30*time.Second, "flaky to wait out its retry delay", func() bool {
		s, ok := readRetryStatus(t, wf)
		if i, found := s.task("flaky"); ok && found && s.Tasks[i].RetryAt != nil {
			waiting, retryAt = s.Tasks[i].Waiting, s.Tasks[i].RetryAt
			return true
		}
		return run.exited()
	})
	if retryAt == nil || !strings.HasPrefix(waiting, "retry at ") || !strings.Contains(waiting, "exit code 75") {
		t.Errorf("while flaky waited: retry_at %v, waiting %q", retryAt, waiting)
	}
	r := run.wait(t)
	r.want(t, 1)
	s, _ := readRetryStatus(t, wf)
	get := func(id string) int {
		i, ok := s.task(id)
		if !ok {
			t.Fatalf("no task %s in status", id)
		}
		return i
	}
	flaky := s.Tasks[get("flaky")]
	if flaky.State != "complete" || flaky.Attempts != 2 {
		t.Fatalf("flaky: %s after %d attempts", flaky.State, flaky.Attempts)
	}
	if gap := flaky.History[1].Start.Sub(flaky.History[0].End); gap < 2*time.Second {
		t.Errorf("flaky's retry started %s after its failure, before its 2s retry delay", gap)
	}
	for id, want := range map[string]string{
		"wrong-code": "exit code 4; not retried: retry_on_exit_codes does not list exit code 4",
		"slow":       "timed out after 200ms; not retried after a timeout (retry_on_timeout is off)",
		"missing":    "not retried: the command cannot run as given",
	} {
		tk := s.Tasks[get(id)]
		if tk.State != "failed" || tk.Attempts != 1 || !strings.Contains(tk.Error, want) {
			t.Errorf("%s: %s after %d attempts, error %q; want failed after 1 with %q", id, tk.State, tk.Attempts, tk.Error, want)
		}
	}
	if !strings.Contains(r.stdout, "retry     flaky: attempt 1 exit code 75; log ") || !strings.Contains(r.stdout, "; next attempt at ") {
		t.Errorf("no retry line saying when the next attempt comes:\n%s", r.stdout)
	}
}

// A fault of the environment is not the task's: with a file where its log
// folder goes, a task without retries is not failed; it backs off, status
// says why and that it is not counted, and once the fault is mended it
// runs and completes.
func TestEnvironmentFaultIsNotChargedToTheTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "env.yaml"), `
tasks:
  - id: victim
    retries: 0
    args: [true]
`)
	rd := filepath.Join(dir, ".gpusched", "env")
	if err := os.MkdirAll(rd, 0o755); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(rd, "logs") // every task's log folder
	if err := os.WriteFile(planted, []byte("not a folder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startRun(t, "--no-progress", wf)
	var waiting string
	waitFor(t, 30*time.Second, "victim to back off after a fault of the environment", func() bool {
		s, ok := readRetryStatus(t, wf)
		if i, found := s.task("victim"); ok && found && s.Tasks[i].State == "pending" && s.Tasks[i].Attempts >= 1 {
			waiting = s.Tasks[i].Waiting
			return true
		}
		return run.exited()
	})
	if !strings.Contains(waiting, "not counted against its retries") || !strings.Contains(waiting, planted) {
		t.Errorf("victim waits %q; want the back-off, that it is not counted, and the path at fault", waiting)
	}
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}
	r := run.wait(t)
	r.want(t, 0)
	s, _ := readRetryStatus(t, wf)
	i, _ := s.task("victim")
	tk := s.Tasks[i]
	last := tk.History[len(tk.History)-1]
	if tk.State != "complete" || !tk.History[0].NotCharged || last.NotCharged {
		t.Errorf("victim: %s after %d attempts; history %+v", tk.State, tk.Attempts, tk.History)
	}
}
