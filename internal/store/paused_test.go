package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/task"
)

// A database at schema version 7 gains the paused flag, false for its
// tasks; a paused task written after reads back paused, and unpaused once
// written so.
func TestSQLiteMigratesFromVersion7AndKeepsPaused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	execSQL(t, path, strings.Join(migrations[:7], ";\n")+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=7;", ApplicationID)+
		`INSERT INTO tasks (id, seq, kind, spec, state, updated_at) VALUES ('old', 1, 'command', '{"id":"old"}', 'pending', 0);`)
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	paused := TaskWrite{ID: "p", Seq: 2, Kind: "command", Spec: []byte(`{"id":"p"}`), State: task.Pending, WaitKind: task.WaitPaused, Paused: true}
	if err := s.Apply(&Batch{Tasks: []TaskWrite{paused}}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	if err != nil || len(rows) != 2 {
		t.Fatalf("Load = %+v, %v", rows, err)
	}
	if rows[0].Paused || !rows[1].Paused || rows[1].Waiting.Kind != task.WaitPaused {
		t.Errorf("old paused %v, p paused %v waiting %v; want false, true, paused", rows[0].Paused, rows[1].Paused, rows[1].Waiting)
	}
	paused.Paused, paused.WaitKind = false, task.WaitSlot
	if err := s.Apply(&Batch{Tasks: []TaskWrite{paused}}); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := s.LookupTask("p"); err != nil || !ok || r.Paused {
		t.Errorf("p after resume: %+v, %v, %v", r.Paused, ok, err)
	}
}
