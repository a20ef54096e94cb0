package store

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

func intp(v int) *int { return &v }

// conformance checks what every Store promises.
func conformance(t *testing.T, open func(t *testing.T) Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		t0 := time.Unix(1700000000, 123456789)
		b := &Batch{
			Tasks: []TaskWrite{
				{ID: "b", Seq: 2, Kind: "command", Spec: []byte(`{"id":"b"}`), State: task.Pending},
				{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{"id":"a"}`), State: task.Running},
			},
			Attempts: []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, LogPath: "/run/logs/a/attempt-1.log"}}},
		}
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
		// Finish a: spec nil keeps the stored definition.
		b = &Batch{
			Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", State: task.Failed, ExitCode: intp(3), Error: "exit code 3"}, {ID: "b", Seq: 2, Kind: "command", State: task.Blocked, BlockedBy: "a", Error: "blocked"}},
			Attempts: []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second), ExitCode: intp(3), Error: "exit code 3",
				TimedOut: true, Signal: "SIGKILL", LogPath: "/run/logs/a/attempt-1.log", PID: 42, GPU: intp(1), Adopted: true, EndReason: "timed-out",
				HostMemRequestedMiB: 1500, RSSPeakMiB: 4210}, Handle: executor.Handle{Executor: "fake", Version: 3, Data: []byte("42\x00\x00777\xff")}}},
		}
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].ID != "a" || rows[1].ID != "b" {
			t.Fatalf("rows = %+v, want a then b (by seq)", rows)
		}
		a := rows[0]
		if string(a.Spec) != `{"id":"a"}` || a.State != task.Failed || *a.ExitCode != 3 || a.Error != "exit code 3" {
			t.Errorf("a = %+v", a)
		}
		if len(a.Attempts) != 1 {
			t.Fatalf("a attempts = %+v", a.Attempts)
		}
		at := a.Attempts[0]
		if !at.Start.Equal(t0) || !at.End.Equal(t0.Add(time.Second)) || *at.ExitCode != 3 || !at.TimedOut || at.Signal != "SIGKILL" ||
			at.LogPath != "/run/logs/a/attempt-1.log" || at.PID != 42 || *at.GPU != 1 || at.Error != "exit code 3" || !at.Adopted || at.EndReason != "timed-out" ||
			at.HostMemRequestedMiB != 1500 || at.RSSPeakMiB != 4210 {
			t.Errorf("attempt = %+v", at)
		}
		if h := a.Handles[1]; h.Executor != "fake" || h.Version != 3 || string(h.Data) != "42\x00\x00777\xff" {
			t.Errorf("handle = %+v", h)
		}
		if rows[1].State != task.Blocked || rows[1].BlockedBy != "a" || rows[1].ExitCode != nil {
			t.Errorf("b = %+v", rows[1])
		}
	})
	t.Run("ApplyIsIdempotent", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		b := &Batch{Tasks: []TaskWrite{{ID: "x", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Complete}},
			Attempts: []AttemptWrite{{TaskID: "x", Attempt: task.Attempt{Number: 1, Start: time.Unix(1, 0)}}}}
		for range 2 {
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
		rows, _ := s.Load()
		if len(rows) != 1 || len(rows[0].Attempts) != 1 {
			t.Errorf("rows = %+v", rows)
		}
	})
	// A write of a row that is there keeps what it leaves empty (the
	// definition, the fingerprint, the submission time) and replaces the
	// rest, one row at a time as a turn writes it and many at once as a
	// submission does.
	t.Run("UpdateKeepsWhatItLeavesEmpty", func(t *testing.T) {
		t0 := time.Unix(1700000000, 0)
		for _, n := range []int{1, 300} {
			s := open(t)
			defer s.Close()
			b := &Batch{}
			for i := range n {
				b.Tasks = append(b.Tasks, TaskWrite{ID: fmt.Sprint("t", i), Seq: int64(i), Kind: "command", Spec: []byte(`{"x":1}`),
					Fingerprint: "f1", Submitted: t0, State: task.Running, Rerun: "forced"})
				b.Attempts = append(b.Attempts, AttemptWrite{TaskID: fmt.Sprint("t", i), Attempt: task.Attempt{Number: 1, Start: t0, PID: 7, LogPath: "/run/a.log"}})
			}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			for i := range b.Tasks {
				b.Tasks[i] = TaskWrite{ID: b.Tasks[i].ID, Seq: int64(i), Kind: "command", State: task.Failed, ExitCode: intp(2), Error: "exit code 2", Paused: true}
				b.Attempts[i].Attempt = task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second), ExitCode: intp(2), EndReason: "exited"}
			}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			rows, err := s.Load()
			if err != nil || len(rows) != n {
				t.Fatalf("%d rows: Load = %d rows, %v", n, len(rows), err)
			}
			for _, r := range []Row{rows[0], rows[n-1]} { // rows[0] is in a chunk when n is 300
				if string(r.Spec) != `{"x":1}` || r.Fingerprint != "f1" || !r.Submitted.Equal(t0) {
					t.Errorf("%d rows: kept spec %q, fingerprint %q, submitted %v; want {\"x\":1}, f1, %v", n, r.Spec, r.Fingerprint, r.Submitted, t0)
				}
				if r.State != task.Failed || r.ExitCode == nil || *r.ExitCode != 2 || r.Error != "exit code 2" || r.Rerun != "" || !r.Paused {
					t.Errorf("%d rows: row = %+v, want failed with exit code 2, paused, no rerun reason", n, r)
				}
				if len(r.Attempts) != 1 || r.Attempts[0].PID != 0 || r.Attempts[0].LogPath != "" || r.Attempts[0].EndReason != "exited" ||
					!r.Attempts[0].End.Equal(t0.Add(time.Second)) {
					t.Errorf("%d rows: attempt = %+v, want the second write's", n, r.Attempts)
				}
			}
		}
	})
	t.Run("LookupTask", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		t0 := time.Unix(1700000000, 0)
		b := &Batch{
			Tasks: []TaskWrite{
				{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{"id":"a"}`), State: task.Failed, ExitCode: intp(2), Error: "exit code 2"},
				{ID: "b", Seq: 2, Kind: "command", Spec: []byte(`{"id":"b"}`), State: task.Blocked, BlockedBy: "a"},
				{ID: "c", Seq: 3, Kind: "command", Spec: []byte(`{"id":"c"}`), State: task.Complete,
					Artifacts: []task.Artifact{{Path: "out", Size: 3, ModTime: t0}}, ArtifactsSet: true},
			},
			Attempts: []AttemptWrite{
				{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, End: t0, ExitCode: intp(1), Error: "exit code 1"}},
				{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0, End: t0, ExitCode: intp(2), Error: "exit code 2", PID: 7}, Handle: executor.Handle{Executor: "fake", Version: 1, Data: []byte("7:9")}},
				{TaskID: "c", Attempt: task.Attempt{Number: 1, Start: t0, End: t0, ExitCode: intp(0)}},
			},
		}
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
		all, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range all {
			got, ok, err := s.LookupTask(want.ID)
			if err != nil || !ok {
				t.Fatalf("LookupTask(%q) = %v, %v", want.ID, ok, err)
			}
			if got.ID != want.ID || got.Seq != want.Seq || got.State != want.State || got.BlockedBy != want.BlockedBy ||
				len(got.Attempts) != len(want.Attempts) || len(got.Artifacts) != len(want.Artifacts) || len(got.Handles) != len(want.Handles) ||
				string(got.Spec) != string(want.Spec) {
				t.Errorf("LookupTask(%q) = %+v\nLoad has %+v", want.ID, got, want)
			}
		}
		if a, _, _ := s.LookupTask("a"); len(a.Attempts) != 2 || a.Attempts[1].Error != "exit code 2" || string(a.Handles[2].Data) != "7:9" {
			t.Errorf("a = %+v, want its 2 attempts and the handle of the second", a)
		}
		if _, ok, err := s.LookupTask("nope"); ok || err != nil {
			t.Errorf("LookupTask(nope) = %v, %v; want not found, no error", ok, err)
		}
	})
	t.Run("Inputs", func(t *testing.T) {
		// A task's inputs are saved sorted, read back by Load and
		// LookupTask, replaced whole by an InputsWrite (many rows: more
		// than one statement's worth; the task new in the same batch),
		// kept by a batch without one, and emptied by an empty one.
		s := open(t)
		defer s.Close()
		t0 := time.Unix(1700000000, 123)
		many := make([]task.Input, 600)
		for i := range many {
			many[i] = task.Input{Path: fmt.Sprintf("data/%04d.csv", i), Size: int64(i), ModTime: t0.Add(time.Duration(i))}
		}
		many[7].SHA256 = "abc"
		write := func(w TaskWrite, in ...InputsWrite) {
			t.Helper()
			w.Seq, w.Kind, w.State = 1, "command", task.Complete
			if err := s.Apply(&Batch{Tasks: []TaskWrite{w}, Inputs: in}); err != nil {
				t.Fatal(err)
			}
		}
		read := func() []task.Input {
			t.Helper()
			rows, err := s.Load()
			if err != nil || len(rows) != 1 {
				t.Fatalf("Load = %+v, %v", rows, err)
			}
			one, ok, err := s.LookupTask("a")
			if err != nil || !ok || len(one.Inputs) != len(rows[0].Inputs) {
				t.Fatalf("LookupTask = %d inputs, %v, %v; Load has %d", len(one.Inputs), ok, err, len(rows[0].Inputs))
			}
			return rows[0].Inputs
		}
		write(TaskWrite{ID: "a", Spec: []byte(`{}`)}, InputsWrite{TaskID: "a", Inputs: []task.Input{{Path: "params.json", Size: 2, ModTime: t0}}})
		if got := read(); len(got) != 1 || got[0].Path != "params.json" || got[0].Size != 2 || !got[0].ModTime.Equal(t0) {
			t.Errorf("inputs = %+v", got)
		}
		write(TaskWrite{ID: "a"}, InputsWrite{TaskID: "a", Inputs: many})
		got := read()
		if len(got) != len(many) {
			t.Fatalf("%d inputs read back, want %d", len(got), len(many))
		}
		for i := range many {
			if got[i] != many[i] && !(got[i].Path == many[i].Path && got[i].ModTime.Equal(many[i].ModTime) && got[i].Size == many[i].Size && got[i].SHA256 == many[i].SHA256) {
				t.Fatalf("input %d = %+v, want %+v", i, got[i], many[i])
			}
		}
		write(TaskWrite{ID: "a"}) // none written: kept
		if got := read(); len(got) != len(many) {
			t.Errorf("a write without inputs left %d, want %d kept", len(got), len(many))
		}
		write(TaskWrite{ID: "a"}, InputsWrite{TaskID: "a"})
		if got := read(); len(got) != 0 {
			t.Errorf("an empty set left %d inputs", len(got))
		}
	})
	t.Run("LookupMeta", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if err := s.Apply(&Batch{Meta: map[string]string{"k1": "v1", "k2": "v2"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(&Batch{Meta: map[string]string{"k2": ""}}); err != nil { // "" deletes
			t.Fatal(err)
		}
		for _, tt := range []struct {
			key, want string
			ok        bool
		}{{"k1", "v1", true}, {"k2", "", false}, {"k3", "", false}} {
			v, ok, err := s.LookupMeta(tt.key)
			if err != nil || ok != tt.ok || v != tt.want {
				t.Errorf("LookupMeta(%q) = %q, %v, %v; want %q, %v", tt.key, v, ok, err, tt.want, tt.ok)
			}
		}
	})
}

func TestMemoryConformance(t *testing.T) {
	conformance(t, func(*testing.T) Store { return NewMemory() })
}

func TestSQLiteConformance(t *testing.T) {
	conformance(t, func(t *testing.T) Store {
		dir := t.TempDir()
		s, err := OpenSQLite(filepath.Join(dir, "state.db"), "/run")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestSQLiteStoresLogPathsRelative(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "logs", "a", "attempt-1.log")
	err = s.Apply(&Batch{Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Running}},
		Attempts: []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: time.Now(), LogPath: log}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, _ := sql.Open("sqlite", path)
	var stored string
	db.QueryRow("SELECT log_path FROM attempts").Scan(&stored)
	db.Close()
	if stored != filepath.Join("logs", "a", "attempt-1.log") {
		t.Errorf("stored log path %q, want it relative to the run directory", stored)
	}
	// A moved run directory still finds its logs.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	r, err := OpenSQLiteReadOnly(filepath.Join(moved, "state.db"), moved)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows, _ := r.Load()
	if got := rows[0].Attempts[0].LogPath; got != filepath.Join(moved, "logs", "a", "attempt-1.log") {
		t.Errorf("log path after move = %q", got)
	}
}

func TestSQLitePersistsAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenSQLite(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(&Batch{Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Complete}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenSQLite(path, "")
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	rows, _ := s.Load()
	if len(rows) != 1 || rows[0].State != task.Complete {
		t.Errorf("rows after reopen = %+v", rows)
	}
}

func TestSQLiteRefusesFilesNotOurs(t *testing.T) {
	garbage := bytes.Repeat([]byte("this is not sqlite\n"), 300)
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want error
	}{
		{"garbage", func(t *testing.T, path string) { os.WriteFile(path, garbage, 0o644) }, ErrNotState},
		{"another program's database", func(t *testing.T, path string) {
			execSQL(t, path, "CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1)")
		}, ErrNotState},
		{"another application id", func(t *testing.T, path string) {
			execSQL(t, path, "PRAGMA application_id=1234")
		}, ErrNotState},
		{"newer gpusched", func(t *testing.T, path string) {
			execSQL(t, path, fmt.Sprintf("PRAGMA application_id=%d; PRAGMA user_version=99; CREATE TABLE future (x)", ApplicationID))
		}, ErrTooNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			tt.make(t, path)
			before, _ := os.ReadFile(path)
			for _, open := range []func(string, string) (*SQLite, error){OpenSQLite, OpenSQLiteReadOnly} {
				s, err := open(path, "")
				if err == nil {
					s.Close()
					t.Fatal("opened a file that is not a usable state database")
				}
				if !errors.Is(err, tt.want) {
					t.Errorf("error = %v, want %v", err, tt.want)
				}
				if !bytes.Contains([]byte(err.Error()), []byte(path)) {
					t.Errorf("error %q does not name the file", err)
				}
			}
			if err := CheckSQLite(path); !errors.Is(err, tt.want) {
				t.Errorf("CheckSQLite = %v, want %v", err, tt.want)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Error("the refused file was modified")
			}
			if _, err := os.Stat(path + "-wal"); err == nil {
				t.Error("a WAL file was created beside the refused file")
			}
		})
	}
}

// CheckSQLite passes a state database that is not there yet, and one of
// gpusched's, writing nothing.
func TestCheckSQLiteAccepts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	if err := CheckSQLite(path); err != nil {
		t.Errorf("no database yet: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("CheckSQLite created the database")
	}
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := CheckSQLite(path); err != nil {
		t.Errorf("gpusched's own database: %v", err)
	}
}

func execSQL(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

func TestSQLiteReaderWhileWriterOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	w, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(id string, seq int64) {
		if err := w.Apply(&Batch{Tasks: []TaskWrite{{ID: id, Seq: seq, Kind: "command", Spec: []byte(`{}`), State: task.Running}}}); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 1)
	r, err := OpenSQLiteReadOnly(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write("b", 2)
	rows, err := r.Load()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, row := range rows {
		ids = append(ids, row.ID)
	}
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("reader sees %v, want [a b]", ids)
	}
	if err := r.Apply(&Batch{Tasks: []TaskWrite{{ID: "c"}}}); err == nil {
		t.Error("a read-only store accepted a write")
	}
}

func TestFailing(t *testing.T) {
	f := &Failing{Store: NewMemory()}
	b := &Batch{Tasks: []TaskWrite{{ID: "a", Seq: 1}}}
	if err := f.Apply(b); err != nil {
		t.Fatal(err)
	}
	f.Fail(errors.New("disk full"))
	if err := f.Apply(&Batch{Tasks: []TaskWrite{{ID: "b", Seq: 2}}}); err == nil || err.Error() != "disk full" {
		t.Errorf("Apply = %v, want disk full", err)
	}
	if rows, _ := f.Load(); len(rows) != 1 {
		t.Errorf("a failed Apply wrote: %+v", rows)
	}
}

// BenchmarkApply100kTasks: one transaction writing 100,000 new tasks, as a
// SubmitMany of a 100,000-task graph does.
func BenchmarkApply100kTasks(b *testing.B) {
	batch := &Batch{}
	for i := range 100_000 {
		batch.Tasks = append(batch.Tasks, TaskWrite{ID: fmt.Sprintf("task-%06d", i), Seq: int64(i), Kind: "command",
			Spec: []byte(`{"id":"task-000000","kind":"command","dependencies":["task-000001"],"payload":["true"]}`), State: task.Pending})
	}
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c := cpuTime()
		if err := s.Apply(batch); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	reportCPU(b, cpu)
}

// A database written by the first schema version is upgraded in place,
// keeping its tasks.
func TestSQLiteMigratesFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	execSQL(t, path, migrations[0]+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=1;", ApplicationID)+
		`INSERT INTO tasks (id, seq, kind, spec, state, updated_at) VALUES ('old', 1, 'command', '{"id":"old"}', 'complete', 0);
		INSERT INTO attempts (task_id, number, started_at, ended_at, exit_code, log_path) VALUES ('old', 1, 10, 20, 0, 'logs/old/attempt-1.log');`)
	s, err := OpenSQLite(path, "/run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].State != task.Complete || len(rows[0].Attempts) != 1 || rows[0].Attempts[0].MemPeakMiB != 0 {
		t.Errorf("rows after migration = %+v", rows)
	}
	var v int
	s.db.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion() {
		t.Errorf("schema version %d after migration, want %d", v, SchemaVersion())
	}
	// The new tables work.
	err = s.Apply(&Batch{Cards: []gpu.CardView{{Index: 0, UUID: "GPU-a", State: gpu.CardCooling}}, Meta: map[string]string{MetaGPUUnknown: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	cards, _, err := s.LoadCards()
	if err != nil || len(cards) != 1 || cards[0].State != gpu.CardCooling {
		t.Errorf("cards = %+v, %v", cards, err)
	}
	if m, _ := s.LoadMeta(); m[MetaGPUUnknown] != "x" {
		t.Errorf("meta = %v", m)
	}
}

// A waiting retry's time and an attempt that was not charged to its task
// are saved and read back.
func TestRetryAtAndNotChargedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenSQLite(path, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(0, time.Now().Add(time.Minute).UnixNano())
	b := &Batch{
		Tasks:    []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Pending, RetryAt: at}},
		Attempts: []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: at, End: at, NotCharged: true, Error: "open log: too many open files"}}},
	}
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].RetryAt.Equal(at) || len(rows[0].Attempts) != 1 || !rows[0].Attempts[0].NotCharged {
		t.Errorf("rows = %+v", rows)
	}
	s.Close()
}

// An attempt's job in a batch system, and the queued reason of a running
// task, are saved and read back; a write without a job removes it; a job
// that does not read is left out, the attempt read all the same.
func TestRemoteJobRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	for name, open := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"sqlite": func(t *testing.T) Store {
			s, err := OpenSQLite(path, filepath.Dir(path))
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
			job := task.RemoteJob{ID: "4242", State: "PENDING", Reason: "Priority"}
			b := &Batch{
				Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Running,
					WaitKind: task.WaitQueued, WaitDetail: "queued in Slurm as job 4242: Priority"}},
				Attempts: []AttemptWrite{
					{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, Job: &task.RemoteJob{ID: "4241", State: "COMPLETED", Node: "n1"}}},
					{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0, Job: &job}},
				},
			}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			rows, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			r := rows[0]
			if got := r.Attempts[1].Job; got == nil || *got != job {
				t.Errorf("job = %+v, want %+v", got, job)
			}
			if got := r.Attempts[0].Job; got == nil || got.Node != "n1" {
				t.Errorf("first attempt's job = %+v", got)
			}
			if r.Waiting.Kind != task.WaitQueued || r.Waiting.Detail != "queued in Slurm as job 4242: Priority" {
				t.Errorf("waiting = %+v, want queued with its detail", r.Waiting)
			}
			b.Reset()
			b.Attempts = []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0}}}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			if rows, _ := s.Load(); rows[0].Attempts[0].Job != nil {
				t.Errorf("job = %+v after a write without one, want none", rows[0].Attempts[0].Job)
			}
			if name != "sqlite" {
				return
			}
			s.Close()
			execSQL(t, path, "UPDATE attempts SET job = '{torn' WHERE number = 2")
			s = open(t)
			defer s.Close()
			if rows, err := s.Load(); err != nil || len(rows[0].Attempts) != 2 || rows[0].Attempts[1].Job != nil {
				t.Errorf("a torn job: rows %+v, %v; want the attempt without its job", rows, err)
			}
		})
	}
}
