package cli_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// Attempts' logs are logs/TASK.attempt-N.log, all in one folder; a run
// directory written with a folder per task (logs/TASK/attempt-N.log, before
// issue 14) still reads: logs, status and the next run follow the path
// saved with each attempt.
func TestLogLayoutOldAndNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "w.yaml"), "tasks:\n  - id: t\n    args: "+sh(`echo "attempt $GPUSCHED_ATTEMPT"`)+"\n")
	gs(t, "", "run", wf).want(t, 0)
	rd := filepath.Join(dir, ".gpusched", "w")
	logs := filepath.Join(rd, "logs")
	if got := listTree(t, logs); len(got) != 1 || got[0] != "t.attempt-1.log" {
		t.Fatalf("logs/ holds %q, want just t.attempt-1.log", got)
	}

	// Make it a run directory of the old layout.
	if err := os.Mkdir(filepath.Join(logs, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(logs, "t", "attempt-1.log")
	if err := os.Rename(filepath.Join(logs, "t.attempt-1.log"), old); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(rd, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE attempts SET log_path = 'logs/t/attempt-1.log'"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	gs(t, "", "run", wf, "--force", "t").want(t, 0)
	if got := readFile(t, filepath.Join(logs, "t.attempt-2.log")); got != "attempt 2\n" {
		t.Errorf("the new attempt's log holds %q", got)
	}
	for attempt, want := range map[string]string{"1": "attempt 1\n", "2": "attempt 2\n"} {
		r := gs(t, "", "logs", wf, "t", "--attempt", attempt)
		r.want(t, 0)
		if r.stdout != want {
			t.Errorf("logs --attempt %s: %q, want %q", attempt, r.stdout, want)
		}
	}
	h := checkTask(t, status(t, wf), "t", "complete", 2, "0").History
	if len(h) != 2 || h[0].LogPath != old || h[1].LogPath != filepath.Join(logs, "t.attempt-2.log") {
		t.Errorf("status --json history: %+v; want attempt 1 at %s, 2 at logs/t.attempt-2.log", h, old)
	}
}
