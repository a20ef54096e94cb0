package store

import (
	"bytes"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/task"
)

// Handles are data: any executor's, of any version and bytes, read back as
// written; a later whole-row write without one removes it; what Load
// returns is the caller's to change.
func TestHandlesRoundTrip(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"sqlite": func(t *testing.T) Store {
			s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "")
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			t0 := time.Unix(1700000000, 0)
			fake := executor.Handle{Executor: "fake", Version: 3, Data: []byte{0, 1, 0, 0xff, '{', 0}}
			loc := local.EncodeHandle(executor.Process{PID: 7, PGID: 7, StartTicks: 99})
			b := &Batch{
				Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Running}},
				Attempts: []AttemptWrite{
					{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, End: t0, EndReason: "lost"}, Handle: loc},
					{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0, Adopted: true}, Handle: fake},
					{TaskID: "a", Attempt: task.Attempt{Number: 3, Start: t0}},
				},
			}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			fakeData := slices.Clone(fake.Data)
			fake.Data[0] = 'X' // the batch's bytes, reused by the caller: the store kept its own
			rows, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			r := rows[0]
			if got := r.Handles[1]; got.Executor != local.Name || got.Version != local.HandleVersion || !bytes.Equal(got.Data, loc.Data) {
				t.Errorf("local handle = %+v (%s), want %+v (%s)", got, got.Data, loc, loc.Data)
			}
			if got := r.Handles[2]; got.Executor != "fake" || got.Version != 3 || !bytes.Equal(got.Data, fakeData) {
				t.Errorf("fake handle = %+v, want data %v", got, fakeData)
			}
			if _, ok := r.Handles[3]; ok || len(r.Handles) != 2 {
				t.Errorf("handles = %+v, want attempts 1 and 2 only", r.Handles)
			}
			if a := r.Attempts; a[0].EndReason != "lost" || a[0].Adopted || !a[1].Adopted || a[1].EndReason != "" || a[2].Adopted {
				t.Errorf("attempts = %+v", a)
			}
			// The caller's copy: changing it changes nothing stored.
			r.Handles[2].Data[0] = 'X'
			delete(r.Handles, 1)
			rows, _ = s.Load()
			if got := rows[0].Handles; len(got) != 2 || got[2].Data[0] != 0 {
				t.Errorf("handles after changing a loaded copy = %+v", got)
			}
			// A whole-row write without a handle leaves none.
			b = &Batch{Attempts: []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0, End: t0, Adopted: true, EndReason: "exited"}}}}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			rows, _ = s.Load()
			if _, ok := rows[0].Handles[2]; ok {
				t.Errorf("attempt 2 kept its handle after a write without one: %+v", rows[0].Handles)
			}
			if a := rows[0].Attempts[1]; a.EndReason != "exited" || !a.Adopted {
				t.Errorf("attempt 2 = %+v", a)
			}
		})
	}
}

// A run directory written at schema version 5, with an attempt's pid,
// pgid and start time in columns of their own: readers refuse it until a
// writer upgrades it; then the numbers are the local executor's handle of
// version 1, byte for byte what it writes, and pid stays for people.
func TestSQLiteMigratesFromVersion5(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	execSQL(t, path, strings.Join(migrations[:5], ";\n")+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=5;", ApplicationID)+
		`INSERT INTO tasks (id, seq, kind, spec, state, updated_at) VALUES ('old', 1, 'command', '{"id":"old"}', 'running', 0);
		INSERT INTO attempts (task_id, number, started_at, ended_at, exit_code, log_path, pid, pgid, proc_start)
			VALUES ('old', 1, 10, 20, 1, 'logs/old/attempt-1.log', 4242, 4241, 123456789012);
		INSERT INTO attempts (task_id, number, started_at, log_path) VALUES ('old', 2, 30, 'logs/old/attempt-2.log');`)

	if r, err := OpenSQLiteReadOnly(path, dir); err == nil {
		r.Close()
		t.Fatal("a reader opened a version 5 database")
	} else if !strings.Contains(err.Error(), "schema version 5 is older") || !strings.Contains(err.Error(), "run the workflow once to upgrade it") {
		t.Errorf("reader's error = %v", err)
	}

	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || len(rows[0].Attempts) != 2 {
		t.Fatalf("rows after migration = %+v", rows)
	}
	want := executor.Process{PID: 4242, PGID: 4241, StartTicks: 123456789012}
	r := rows[0]
	h, ok := r.Handles[1]
	if !ok {
		t.Fatalf("attempt 1 has no handle after migration: %+v", r.Handles)
	}
	if enc := local.EncodeHandle(want); h.Executor != enc.Executor || h.Version != enc.Version || !bytes.Equal(h.Data, enc.Data) {
		t.Errorf("handle = %q v%d %s, want %q v%d %s", h.Executor, h.Version, h.Data, enc.Executor, enc.Version, enc.Data)
	}
	if p, err := local.DecodeHandle(h); err != nil || p != want {
		t.Errorf("decoded handle = %+v, %v; want %+v", p, err, want)
	}
	if _, ok := r.Handles[2]; ok || len(r.Handles) != 1 {
		t.Errorf("handles = %+v, want only attempt 1's (attempt 2 never recorded a process)", r.Handles)
	}
	a1, a2 := r.Attempts[0], r.Attempts[1]
	if a1.PID != 4242 || a1.Adopted || a1.EndReason != "" || *a1.ExitCode != 1 || a1.LogPath != filepath.Join(dir, "logs/old/attempt-1.log") {
		t.Errorf("attempt 1 = %+v", a1)
	}
	if a2.PID != 0 || a2.Adopted || a2.EndReason != "" {
		t.Errorf("attempt 2 = %+v", a2)
	}

	// The local-process columns are gone; pid stays.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cols, err := db.Query("SELECT name FROM pragma_table_info('attempts')")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for cols.Next() {
		var n string
		cols.Scan(&n)
		names = append(names, n)
	}
	cols.Close()
	for _, gone := range []string{"pgid", "proc_start"} {
		if slices.Contains(names, gone) {
			t.Errorf("column %s still there: %v", gone, names)
		}
	}
	for _, kept := range []string{"pid", "handle_executor", "handle_version", "handle", "adopted", "end_reason"} {
		if !slices.Contains(names, kept) {
			t.Errorf("no column %s: %v", kept, names)
		}
	}

	// Upgraded, it opens for reading and reads the same.
	ro, err := OpenSQLiteReadOnly(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rows, err = ro.Load()
	if err != nil || len(rows) != 1 || !bytes.Equal(rows[0].Handles[1].Data, h.Data) {
		t.Errorf("reader's rows = %+v, %v", rows, err)
	}
}
