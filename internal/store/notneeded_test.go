package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/task"
)

// A database at schema version 9 gains the not-needed flag, false for
// its blocked tasks (blocked by a failure, the only way before); a task
// blocked as not needed reads back so from Load, LookupTask, Briefs and
// FinishedSummaries, and not so once written otherwise.
func TestSQLiteMigratesFromVersion9AndKeepsNotNeeded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	execSQL(t, path, strings.Join(migrations[:9], ";\n")+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=9;", ApplicationID)+
		`INSERT INTO tasks (id, seq, kind, spec, state, blocked_by, updated_at) VALUES ('old', 1, 'command', '{"id":"old"}', 'blocked', 'x', 0);`)
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	skipped := TaskWrite{ID: "cleanup", Seq: 2, Kind: "command", Spec: []byte(`{"id":"cleanup"}`), State: task.Blocked,
		BlockedBy: "prep", Error: "not needed", NotNeeded: true}
	if err := s.Apply(&Batch{Tasks: []TaskWrite{skipped}}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	if err != nil || len(rows) != 2 {
		t.Fatalf("Load = %+v, %v", rows, err)
	}
	if rows[0].NotNeeded || !rows[1].NotNeeded || !rows[1].OK() || rows[0].OK() {
		t.Errorf("old not needed %v, cleanup not needed %v; want false, true", rows[0].NotNeeded, rows[1].NotNeeded)
	}
	if r, ok, err := s.LookupTask("cleanup"); err != nil || !ok || !r.NotNeeded {
		t.Errorf("LookupTask(cleanup) = not needed %v, %v, %v", r.NotNeeded, ok, err)
	}
	briefs, err := s.Briefs()
	if err != nil || len(briefs) != 2 || briefs[0].NotNeeded || !briefs[1].NotNeeded {
		t.Errorf("Briefs = %+v, %v; want cleanup alone not needed", briefs, err)
	}
	sums, err := s.FinishedSummaries([]string{"old", "cleanup"})
	if err != nil || len(sums) != 2 || sums[0].NotNeeded == sums[1].NotNeeded {
		t.Errorf("FinishedSummaries = %+v, %v; want one not needed", sums, err)
	}
	for _, sum := range sums {
		if sum.NotNeeded != (sum.ID == "cleanup") {
			t.Errorf("summary of %s: not needed %v", sum.ID, sum.NotNeeded)
		}
	}
	skipped.State, skipped.NotNeeded, skipped.BlockedBy, skipped.Error = task.Pending, false, "", ""
	if err := s.Apply(&Batch{Tasks: []TaskWrite{skipped}}); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := s.LookupTask("cleanup"); r.NotNeeded {
		t.Error("cleanup is still not needed once written pending")
	}
}

// The memory store keeps the flag as the SQLite one does.
func TestMemoryKeepsNotNeeded(t *testing.T) {
	s := NewMemory()
	w := TaskWrite{ID: "c", Seq: 1, Kind: "command", Spec: []byte(`{"id":"c"}`), State: task.Blocked, BlockedBy: "p", NotNeeded: true}
	if err := s.Apply(&Batch{Tasks: []TaskWrite{w}}); err != nil {
		t.Fatal(err)
	}
	if r, ok, _ := s.LookupTask("c"); !ok || !r.NotNeeded {
		t.Errorf("c: not needed %v, want true", r.NotNeeded)
	}
}
