package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// A database at schema version 9 keeps its completion events through the
// rebuild of the events table: they read back as completion events, the
// pending one still pending, and new event ids continue after theirs.
func TestSQLiteMigratesEventsFromVersion9(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	execSQL(t, path, strings.Join(migrations[:9], ";\n")+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=9;", ApplicationID)+
		`INSERT INTO tasks (id, seq, kind, spec, state, updated_at) VALUES ('a', 1, 'command', '{"id":"a"}', 'complete', 0);
		INSERT INTO events (id, task_id, attempt, created_at, acked_at, tries, last_error) VALUES (1, 'a', 1, 5, 6, 0, '');
		INSERT INTO events (id, task_id, attempt, created_at, tries, last_error, next_try) VALUES (2, 'a', 2, 7, 3, 'exit code 1', 9);`)
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pending, maxID, err := s.PendingEvents()
	if err != nil {
		t.Fatal(err)
	}
	if maxID != 2 || len(pending) != 1 {
		t.Fatalf("PendingEvents = %+v, max %d; want event 2 pending, max 2", pending, maxID)
	}
	ev := pending[0]
	if ev.ID != 2 || ev.Kind != EventComplete || ev.TaskID != "a" || ev.Attempt != 2 || ev.Tries != 3 ||
		ev.LastError != "exit code 1" || ev.NextTry != time.Unix(0, 9) || ev.Payload != nil || ev.GaveUp {
		t.Errorf("pending event after migration = %+v", ev)
	}
	all, err := s.Events()
	if err != nil || len(all) != 2 || all[0].Acked != time.Unix(0, 6) || all[0].Kind != EventComplete {
		t.Errorf("Events after migration = %+v, %v", all, err)
	}
	// The foreign key still holds for events that name a task.
	err = s.Apply(&Batch{Events: []EventWrite{{ID: 3, Kind: EventFailure, TaskID: "nosuch", Created: time.Unix(1, 0)}}})
	if err == nil {
		t.Error("an event naming a task that does not exist was written")
	}
}

// Events of every kind round-trip, with their payload; an event about the
// run names no task; a delivery given up reads back acknowledged and
// given up.
func TestSQLiteEventKindsAndPayloads(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSQLite(filepath.Join(dir, "state.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1700000000, 0)
	b := &Batch{
		Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{"id":"a"}`), State: task.Failed}},
		Events: []EventWrite{
			{ID: 1, Kind: EventFailure, TaskID: "a", Attempt: 2, Created: t0, Payload: []byte(`{"exit_code":3}`)},
			{ID: 2, Kind: EventWebhook, TaskID: "a", Created: t0, Payload: []byte(`{"url":"http://x"}`)},
			{ID: 3, Kind: EventRunEnd, Created: t0, Payload: []byte(`{"total":1}`)},
			{ID: 4, TaskID: "a", Attempt: 1, Created: t0}, // no kind: a completion event
		},
	}
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	// The webhook gives up: acknowledged, marked so.
	given := b.Events[1]
	given.Acked, given.Tries, given.GaveUp, given.LastError = t0.Add(time.Minute), 10, true, "HTTP 500"
	if err := s.Apply(&Batch{Events: []EventWrite{given}}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Events()
	if err != nil || len(all) != 4 {
		t.Fatalf("Events = %+v, %v", all, err)
	}
	want := []struct {
		kind, task, payload string
		gaveUp              bool
	}{
		{EventFailure, "a", `{"exit_code":3}`, false},
		{EventWebhook, "a", `{"url":"http://x"}`, true},
		{EventRunEnd, "", `{"total":1}`, false},
		{EventComplete, "a", "", false},
	}
	for i, w := range want {
		ev := all[i]
		if ev.Kind != w.kind || ev.TaskID != w.task || string(ev.Payload) != w.payload || ev.GaveUp != w.gaveUp {
			t.Errorf("event %d = %+v; want kind %s, task %q, payload %s, gave up %v", ev.ID, ev, w.kind, w.task, w.payload, w.gaveUp)
		}
	}
	pending, _, err := s.PendingEvents()
	if err != nil || len(pending) != 3 || pending[0].ID != 1 || pending[1].ID != 3 || pending[2].ID != 4 {
		t.Errorf("PendingEvents = %+v, %v; want 1, 3, 4 (2 was given up)", pending, err)
	}
}
