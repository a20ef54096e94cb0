package cli_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// A failure of gpusched's own (here the state database cannot be written:
// another process holds its write lock) is not invalid input: exit 1.
func TestInternalFailureExits1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "w.yaml"), "tasks:\n  - id: a\n    args: [true]\n")
	gs(t, "", "run", wf).want(t, 0)
	writeFile(t, wf, "tasks:\n  - id: a\n    args: [true]\n  - id: b\n    args: [true]\n")

	db, err := sql.Open("sqlite", filepath.Join(dir, ".gpusched", "w", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK") //nolint:errcheck

	r := gs(t, "", "run", wf) // waits out SQLite's busy timeout (10s)
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "state.db") || !strings.Contains(msg, "locked") {
		t.Errorf("error %q does not say the state database is locked", msg)
	}
}
