package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/sqlitec"
)

// Creating the schema waits, under the busy timeout, for a write lock
// another connection holds, instead of failing with SQLITE_BUSY at once. A
// reader takes that lock too, for a moment: the first to open a new WAL
// database rebuilds its shared-memory index under it (gpusched status
// polling a run that is starting). A transaction that read before writing
// cannot wait for it (SQLite returns BUSY at once rather than risk a
// deadlock), so the schema's transaction takes the lock at its BEGIN.
func TestCreateWaitsForAnotherWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	other, err := sqlitec.Open(path, sqlitec.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Exec("PRAGMA journal_mode=WAL; BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const hold = 300 * time.Millisecond
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(hold)
		other.Exec("ROLLBACK")
		released <- time.Now()
	}()
	start := time.Now()
	s, err := OpenSQLite(path, dir)
	if err != nil {
		<-released
		t.Fatalf("creating the state db while another connection holds the write lock: %v", err)
	}
	defer s.Close()
	if waited := time.Since(start); waited < hold/2 {
		t.Errorf("opened after %v, before the other connection let go of its write lock", waited)
	}
	<-released
	if _, err := s.Load(); err != nil {
		t.Errorf("the new state db: %v", err)
	}
}
