package gpusched

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/task"
)

// The tail of the log of an attempt that ran as another user (read to
// tell an out-of-memory failure) is read without following a link the
// user planted in its place: root never reads, for the task's verdict,
// a file the user could not.
func TestLogTailFollowsNoLinkOfTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a task as another user")
	}
	const nobody = 65534
	dir := t.TempDir()
	logs := filepath.Join(dir, LogsDir, "t")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(logs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("RuntimeError: CUDA out of memory. root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runner{s: &Scheduler{runDir: dir}}
	req := engine.AttemptRequest{Spec: &task.Spec{ID: "t", Owner: strconv.Itoa(nobody)}, Number: 1,
		LogPath: filepath.Join(logs, "attempt-1.log")}

	// The owner's own log is read.
	if err := os.WriteFile(req.LogPath, []byte("CUDA out of memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(req.LogPath, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if got := string(r.logTail(req, 1<<10)); got != "CUDA out of memory\n" {
		t.Fatalf("the owner's log: tail %q", got)
	}
	// A link in its place is not followed, nor a file that is not the owner's.
	if err := os.Remove(req.LogPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, req.LogPath); err != nil {
		t.Fatal(err)
	}
	if got := r.logTail(req, 1<<10); got != nil {
		t.Errorf("a link planted as the log: tail %q, want nothing read", got)
	}
	if err := os.Remove(req.LogPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(req.LogPath, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := r.logTail(req, 1<<10); got != nil {
		t.Errorf("a log of root's in the owner's folder: tail %q, want nothing read", got)
	}
}
