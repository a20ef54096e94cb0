package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// LoadForOpen writes nothing: not even the checkpoint of a WAL a crash
// left, which a writer's close would make; it reads the rows Load would (log paths under the run directory), and
// OpenSQLiteChecked then opens the database as it was.
func TestLoadForOpenWritesNothing(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	s, err := OpenSQLite(live, dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	b := &Batch{}
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		b.Tasks = append(b.Tasks, TaskWrite{ID: id, Seq: int64(4 - i), Kind: "command", Spec: []byte(`{"id":"` + id + `"}`),
			State: task.Pending, Submitted: t0, WaitKind: task.WaitDependencies, WaitDetail: "t9"})
	}
	b.Attempts = append(b.Attempts, AttemptWrite{TaskID: "t1", Attempt: task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second),
		LogPath: filepath.Join(dir, "logs", "t1.attempt-1.log")}})
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	want, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	// A crash image: the files copied while the writer has them open.
	image := filepath.Join(dir, "image.db")
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(live + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if suffix == "-wal" && len(data) == 0 {
			t.Fatal("no WAL to test with")
		}
		files[image+suffix] = data
		if err := os.WriteFile(image+suffix, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	if _, current, err := LoadForOpen(image, ""); err != nil || !current {
		t.Fatalf("LoadForOpen: current %v, %v", current, err)
	}
	rows, current, err := LoadForOpen(image, dir)
	if err != nil || !current || !reflect.DeepEqual(rows, want) {
		t.Errorf("LoadForOpen: current %v, %v, rows as Load's: %v", current, err, reflect.DeepEqual(rows, want))
	}
	if len(rows) != 5 || len(rows[3].Attempts) != 1 || rows[3].Attempts[0].LogPath != filepath.Join(dir, "logs", "t1.attempt-1.log") {
		t.Errorf("LoadForOpen: %d rows; want 5, t1's with its attempt and its log", len(rows))
	}
	for path, data := range files {
		if now, err := os.ReadFile(path); err != nil || string(now) != string(data) {
			t.Errorf("%s changed by LoadForOpen (%d bytes, %d before; %v)", filepath.Base(path), len(now), len(data), err)
		}
	}
	// Opened for writing afterwards without the check, the same rows.
	w, err := OpenSQLiteChecked(image, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	again, err := w.Load()
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("OpenSQLiteChecked then Load: %v, rows equal: %v", err, reflect.DeepEqual(again, want))
	}
}

// LoadForOpen checks nothing, and says so, where OpenSQLite would write
// first (create or upgrade the schema), and refuses what OpenSQLite
// refuses, with the same error.
func TestLoadForOpenLeavesWritesToOpen(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, current, err := LoadForOpen(missing, dir); err != nil || current {
		t.Errorf("a missing file: current %v, %v; want false, nil", current, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadForOpen made %s: %v", missing, err)
	}
	old := filepath.Join(dir, "old.db")
	execSQL(t, old, migrations[0]+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=1;", ApplicationID))
	before, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, current, err := LoadForOpen(old, dir); err != nil || current {
		t.Errorf("schema version 1: current %v, %v; want false, nil", current, err)
	}
	if after, _ := os.ReadFile(old); string(after) != string(before) {
		t.Error("LoadForOpen changed a database of an older schema")
	}
	foreign := filepath.Join(dir, "foreign.db")
	execSQL(t, foreign, "CREATE TABLE x (y)")
	_, _, err = LoadForOpen(foreign, dir)
	_, openErr := OpenSQLite(foreign, dir)
	if !errors.Is(err, ErrNotState) || err.Error() != openErr.Error() {
		t.Errorf("another program's database: LoadForOpen says %v; OpenSQLite %v", err, openErr)
	}
}
