package cli_test

import (
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// envFile reads the KEY=VALUE lines a command wrote with env.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// storedEvent is an outbox row as the state database holds it.
type storedEvent struct {
	id     int64
	kind   string
	task   string
	acked  bool
	tries  int
	gaveUp bool
}

func storedEvents(t *testing.T, runDir string) []storedEvent {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(runDir, "state.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id, kind, coalesce(task_id, ''), acked_at IS NOT NULL, tries, gave_up FROM events ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		if err := rows.Scan(&e.id, &e.kind, &e.task, &e.acked, &e.tries, &e.gaveUp); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// on_failure runs once for a task that failed for good, with the failure
// in its environment and its output beside the task's logs; not for a
// task blocked by it, nor for one that completed, nor for a failed
// attempt that was retried.
func TestOnFailureRunsOnceWithItsEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rd := filepath.Join(dir, "run")
	notify := sh(`env | grep '^GPUSCHED_' > failure-$GPUSCHED_TASK_ID.env; echo "$GPUSCHED_TASK_ID" >> failures.log; echo told`)
	wf := writeFile(t, filepath.Join(dir, "fail.yaml"), `
tasks:
  - id: bad
    args: `+sh(`echo boom; exit 3`)+`
    retries: 1
    retry_delay: 0
    on_failure: `+notify+`
  - id: after
    dependencies: [bad]
    args: [true]
    on_failure: `+notify+`
  - id: good
    args: [true]
    on_failure: `+notify+`
`)
	r := gs(t, "", "run", "--no-progress", "--run-dir", rd, wf)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "failures.log"))
	if got := strings.Fields(string(b)); !slices.Equal(got, []string{"bad"}) {
		t.Fatalf("on_failure ran for %v, want bad once\n%s", got, r.stdout)
	}
	env := envFile(t, filepath.Join(dir, "failure-bad.env"))
	abs, _ := filepath.Abs(rd)
	want := map[string]string{"GPUSCHED_TASK_ID": "bad", "GPUSCHED_EXIT_CODE": "3", "GPUSCHED_ATTEMPTS": "2", "GPUSCHED_ATTEMPT": "2",
		"GPUSCHED_ERROR": "exit code 3", "GPUSCHED_SIGNAL": "", "GPUSCHED_RUN_DIR": abs,
		"GPUSCHED_ATTEMPT_LOG": filepath.Join(abs, "logs", "bad.attempt-2.log")}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	id := env["GPUSCHED_EVENT_ID"]
	if id == "" {
		t.Fatal("no GPUSCHED_EVENT_ID")
	}
	if log, err := os.ReadFile(filepath.Join(rd, "logs", "bad.event-"+id+".log")); err != nil || string(log) != "told\n" {
		t.Errorf("on_failure's log: %q, %v", log, err)
	}
	evs := storedEvents(t, rd)
	if len(evs) != 1 || evs[0].kind != "failure" || evs[0].task != "bad" || !evs[0].acked || evs[0].tries != 0 {
		t.Errorf("stored events = %+v, want bad's failure event, delivered at the first try", evs)
	}
}

// runSummary is what these tests read of on_run_end's stdin.
type runSummary struct {
	RunDir      string         `json:"run_dir"`
	Started     time.Time      `json:"started"`
	Ended       time.Time      `json:"ended"`
	Interrupted bool           `json:"interrupted"`
	Total       int            `json:"total"`
	Counts      map[string]int `json:"counts"`
	Failed      []string       `json:"failed"`
}

// on_run_end gets the run's summary as JSON on its stdin and its counts in
// its environment, in the workflow's folder. One killed with its
// scheduler is run again by the next gpusched run, before that run's own.
func TestOnRunEndGetsTheSummary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rd := filepath.Join(dir, "run")
	// The first time, it kills its scheduler (kill -9) before it can
	// acknowledge: the run's end stays owed.
	script := `cat > summary-$GPUSCHED_EVENT_ID.json; env | grep '^GPUSCHED_' > run-$GPUSCHED_EVENT_ID.env
if [ ! -e killed ]; then touch killed; kill -9 $PPID; exit 1; fi`
	wf := writeFile(t, filepath.Join(dir, "end.yaml"), `
scheduling:
  on_run_end: `+sh(script)+`
tasks:
  - id: ok
    args: [true]
  - id: bad
    args: [sh, -c, "exit 2"]
  - id: after
    dependencies: [bad]
    args: [true]
`)
	gs(t, "", "run", "--no-progress", "--run-dir", rd, wf) // its scheduler is killed at the end
	evs := storedEvents(t, rd)
	if len(evs) != 1 || evs[0].kind != "run-end" || evs[0].task != "" || evs[0].acked {
		t.Fatalf("after the killed run, stored events = %+v; want its end owed", evs)
	}
	first := evs[0].id
	var sum runSummary
	b, err := os.ReadFile(filepath.Join(dir, "summary-"+itoa(first)+".json"))
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("on_run_end's stdin: %q, %v", b, err)
	}
	abs, _ := filepath.Abs(rd)
	if sum.RunDir != abs || sum.Total != 3 || sum.Interrupted || !slices.Equal(sum.Failed, []string{"bad"}) ||
		sum.Counts["complete"] != 1 || sum.Counts["failed"] != 1 || sum.Counts["blocked"] != 1 || sum.Counts["pending"] != 0 ||
		sum.Started.IsZero() || sum.Ended.Before(sum.Started) {
		t.Errorf("summary = %+v (%s)", sum, b)
	}
	env := envFile(t, filepath.Join(dir, "run-"+itoa(first)+".env"))
	want := map[string]string{"GPUSCHED_RUN_TOTAL": "3", "GPUSCHED_RUN_COMPLETE": "1", "GPUSCHED_RUN_FAILED": "1", "GPUSCHED_RUN_BLOCKED": "1",
		"GPUSCHED_RUN_CANCELLED": "0", "GPUSCHED_RUN_PENDING": "0", "GPUSCHED_RUN_INTERRUPTED": "0", "GPUSCHED_RUN_DIR": abs}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}

	// The next run delivers the owed end first (the same event), then its
	// own: bad and after run again, ok is kept.
	r := gs(t, "", "run", "--no-progress", "--run-dir", rd, wf)
	if r.code != 1 {
		t.Fatalf("second run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs = storedEvents(t, rd)
	if len(evs) != 2 || !evs[0].acked || evs[0].tries != 0 || !evs[1].acked || evs[1].kind != "run-end" {
		t.Fatalf("after the second run, stored events = %+v; want both ends delivered", evs)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "summary-"+itoa(first)+".json"))
	var again runSummary
	if json.Unmarshal(b, &again) != nil || !again.Started.Equal(sum.Started) || again.Total != 3 {
		t.Errorf("the owed end, delivered again, carried %s; want the first run's summary", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary-"+itoa(evs[1].id)+".json")); err != nil {
		t.Errorf("the second run's own end: %v", err)
	}
	if log, err := os.ReadFile(filepath.Join(rd, "logs", "run-end.event-"+itoa(evs[1].id)+".log")); err != nil || len(log) != 0 {
		t.Errorf("on_run_end's log: %q, %v", log, err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// hookServer is a webhook receiver that fails its first requests.
type hookServer struct {
	*httptest.Server
	mu     sync.Mutex
	fail   int // requests to answer 500 before answering 200
	bodies []map[string]any
	codes  []int
	heads  []http.Header
}

func newHookServer(t *testing.T, fail int) *hookServer {
	h := &hookServer{fail: fail}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		h.mu.Lock()
		defer h.mu.Unlock()
		code := http.StatusOK
		if r.Method != http.MethodPost || r.URL.Path != "/hook/s3cret" {
			code = http.StatusNotFound
		} else if h.fail > 0 {
			h.fail--
			code = http.StatusInternalServerError
		}
		h.bodies, h.codes, h.heads = append(h.bodies, body), append(h.codes, code), append(h.heads, r.Header.Clone())
		w.WriteHeader(code)
	}))
	t.Cleanup(h.Close)
	return h
}

// A webhook gets the task-failed and run-ended events. A receiver that
// fails twice gets the first event a third time, which it accepts: it
// is delivered once accepted and not given up, and the run waits for it.
// A failing webhook fails neither a task nor the run.
func TestWebhookRetriedUntilAccepted(t *testing.T) {
	t.Parallel()
	hook := newHookServer(t, 2)
	dir := t.TempDir()
	rd := filepath.Join(dir, "run")
	wf := writeFile(t, filepath.Join(dir, "hook.yaml"), `
scheduling:
  webhook: `+hook.URL+`/hook/s3cret
tasks:
  - id: bad
    args: [sh, -c, "exit 2"]
  - id: good
    args: [true]
`)
	r := gs(t, "", "run", "--no-progress", "--run-dir", rd, wf)
	if r.code != 1 || !strings.Contains(r.stdout, "1 complete, 1 failed") {
		t.Fatalf("exit %d, want 1 with good complete\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "s3cret") {
		t.Errorf("the webhook's secret path is in the output:\n%s%s", r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, "webhook failed, will retry"); n != 2 {
		t.Errorf("%d failed tries reported, want 2:\n%s", n, r.stdout)
	}
	hook.mu.Lock()
	bodies, codes, heads := hook.bodies, hook.codes, hook.heads
	hook.mu.Unlock()
	if !slices.Equal(codes, []int{500, 500, 200, 200}) {
		t.Fatalf("answers = %v, want 500, 500, 200 (task-failed), 200 (run-ended); bodies %v", codes, bodies)
	}
	for i, b := range bodies[:3] {
		if b["event"] != "task-failed" || b["id"] != bodies[0]["id"] || b["task"] != "bad" || b["exit_code"] != 2.0 ||
			b["attempts"] != 1.0 || b["error"] != "exit code 2" || b["time"] == nil {
			t.Errorf("try %d: body %v", i+1, b)
		}
	}
	abs, _ := filepath.Abs(rd)
	end := bodies[3]
	counts, _ := end["counts"].(map[string]any)
	if end["event"] != "run-ended" || end["run_dir"] != abs || end["total"] != 2.0 || end["interrupted"] != false ||
		counts["complete"] != 1.0 || counts["failed"] != 1.0 || !slices.Equal(toStrings(end["failed"]), []string{"bad"}) {
		t.Errorf("run-ended body = %v", end)
	}
	for _, h := range heads {
		if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "gpusched/dev" {
			t.Errorf("headers = %v", h)
		}
	}
	evs := storedEvents(t, rd)
	if len(evs) != 2 || !evs[0].acked || evs[0].gaveUp || evs[0].tries != 2 || evs[0].task != "bad" ||
		!evs[1].acked || evs[1].gaveUp || evs[1].tries != 0 || evs[1].task != "" {
		t.Errorf("stored events = %+v; want both delivered, none given up", evs)
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := []string{}
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
