package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon's databases and their companions are its user's alone,
// whatever the umask, whether the daemon created them or an earlier one
// left them readable.
func TestDatabasesArePrivate(t *testing.T) {
	dir := shortDir(t)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// What an earlier version left: runs.db readable by everyone.
	if err := os.WriteFile(filepath.Join(state, RunsFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(state, RunsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newTestDaemon(t, Config{StateDir: state, Socket: filepath.Join(dir, "s")})
	ctx := context.Background()
	sub, err := d.client.Submit(ctx, cmd("sh", "-c", "echo secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Wait(ctx, []string{sub.Run}, nil); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "state.db") && !strings.HasPrefix(name, RunsFile) {
			continue // logs/ (its owners'), the locks
		}
		fi, err := os.Lstat(filepath.Join(state, name))
		if err != nil {
			t.Fatal(err)
		}
		seen[name] = true
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others may read every user's commands", name, fi.Mode())
		}
	}
	for _, want := range []string{"state.db", "state.db-wal", "runs.db", "runs.db-wal"} {
		if !seen[want] {
			t.Errorf("no %s in the state directory (%v): the test looked at nothing", want, seen)
		}
	}
}
