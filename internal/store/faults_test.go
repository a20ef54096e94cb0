package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/task"
)

// copyFile copies the file at from to a new file at to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// overwrite writes b at offset off of the file at path.
func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A damaged database is refused when opened for writing, with one line
// naming the file and what to do, and not a byte of it changes; readers
// get the same error, at open or when they load, instead of SQLite's
// "database disk image is malformed".
func TestSQLiteRefusesDamagedDatabase(t *testing.T) {
	good := filepath.Join(t.TempDir(), "state.db")
	fillDB(t, good, 5000)
	fi, err := os.Stat(good)
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	const page = 4096
	if size < 100*page {
		t.Fatalf("the database is only %d bytes; the damage must fall in the middle, far from the header", size)
	}
	mid := size / 2 / page * page
	noise := make([]byte, 100)
	for i := range noise {
		noise[i] = byte(i*7 + 3)
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"bytes overwritten inside a page", func(t *testing.T, path string) { overwrite(t, path, mid+10, noise) }},
		{"a whole page overwritten", func(t *testing.T, path string) { overwrite(t, path, mid, bytes.Repeat([]byte{0xff}, page)) }},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, mid+page/2); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			copyFile(t, good, path)
			tt.damage(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			s, err := OpenSQLite(path, "")
			if err == nil {
				s.Close()
				t.Fatal("OpenSQLite opened a damaged database for writing")
			}
			checkCorrupt(t, err, path)
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("OpenSQLite changed the damaged file")
			}

			r, err := OpenSQLiteReadOnly(path, "")
			if err == nil {
				_, err = r.Load()
				r.Close()
			}
			if err == nil {
				t.Fatal("a reader loaded a damaged database without an error")
			}
			checkCorrupt(t, err, path)
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("a reader changed the damaged file")
			}
		})
	}
}

func checkCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("error = %v, want one wrapping ErrCorrupt", err)
	}
	msg := err.Error()
	for _, want := range []string{"state database " + path + " is damaged", "move it", "restore a backup"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q is more than one line", msg)
	}
}

// A healthy database of many tasks passes the check and reopens.
func TestSQLiteOpensHealthyDatabaseOfManyTasks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	fillDB(t, path, 5000)
	s, err := OpenSQLite(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Load()
	if err != nil || len(rows) != 5000 {
		t.Fatalf("Load = %d rows, %v; want 5000", len(rows), err)
	}
}

// Apply fails with ErrGone, naming the file, once the database the store
// opened is no longer at its path: deleted, or replaced by another file.
func TestSQLiteApplyFailsWhenFileGone(t *testing.T) {
	tests := []struct {
		name string
		do   func(t *testing.T, path string)
		want string
	}{
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "was deleted"},
		{"replaced by another file", func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "other.db")
			fillDB(t, other, 1)
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, "was replaced"},
		{"replaced by a link to itself", func(t *testing.T, path string) {
			moved := path + ".moved"
			if err := os.Rename(path, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, path); err != nil {
				t.Fatal(err)
			}
		}, "was replaced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := OpenSQLite(path, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			write := func(id string, seq int64) error {
				return s.Apply(&Batch{Tasks: []TaskWrite{{ID: id, Seq: seq, Kind: "command", Spec: []byte(`{}`), State: task.Complete}}})
			}
			if err := write("a", 1); err != nil {
				t.Fatal(err)
			}
			tt.do(t, path)
			err = write("b", 2)
			if !errors.Is(err, ErrGone) {
				t.Fatalf("Apply after the file was %s = %v, want ErrGone", tt.name, err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s or say it %s", err, path, tt.want)
			}
		})
	}
}

// Files of the state database that are symbolic links or special files are
// refused before anything is opened: a link's target is neither created
// nor changed.
func TestSQLiteRefusesLinksAndSpecialFiles(t *testing.T) {
	for _, name := range []string{"state.db", "state.db-wal", "state.db-shm"} {
		for _, kind := range []string{"link", "dangling link", "named pipe", "folder"} {
			t.Run(name+" "+kind, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "state.db")
				if name != "state.db" {
					fillDB(t, path, 3) // the companions matter beside a real database
				}
				planted := filepath.Join(dir, name)
				target := filepath.Join(t.TempDir(), "precious")
				const content = "precious data\n"
				switch kind {
				case "link":
					if err := os.WriteFile(target, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
					fallthrough
				case "dangling link":
					if err := os.Symlink(target, planted); err != nil {
						t.Fatal(err)
					}
				case "named pipe":
					if err := syscall.Mkfifo(planted, 0o644); err != nil {
						t.Fatal(err)
					}
				case "folder":
					if err := os.Mkdir(planted, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				for _, open := range []func(string, string) (*SQLite, error){OpenSQLite, OpenSQLiteReadOnly} {
					s, err := returns(t, func() (*SQLite, error) { return open(path, dir) })
					if err == nil {
						s.Close()
						t.Fatalf("opened a state database whose %s is a %s", name, kind)
					}
					if !errors.Is(err, ErrUnsafeFile) {
						t.Errorf("error = %v, want ErrUnsafeFile", err)
					}
					if !strings.Contains(err.Error(), planted) {
						t.Errorf("error %q does not name %s", err, planted)
					}
				}
				switch kind {
				case "link":
					if b, err := os.ReadFile(target); err != nil || string(b) != content {
						t.Errorf("the link's target now holds %q (%v), want %q", b, err, content)
					}
				case "dangling link":
					if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("the dangling link's target was created (%v)", err)
					}
				}
			})
		}
	}
}

// returns runs open and fails the test, instead of hanging, when it does
// not return.
func returns(t *testing.T, open func() (*SQLite, error)) (*SQLite, error) {
	t.Helper()
	type result struct {
		s   *SQLite
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := open()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("opening the state database did not return: it blocks on a special file")
		return nil, nil
	}
}

// BenchmarkQuickCheck100k: the integrity check OpenSQLite runs on an
// existing database, here one of a finished run of 100,000 tasks.
func BenchmarkQuickCheck100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	fillDB(b, path, 100_000)
	for b.Loop() {
		if err := verify(path); err != nil {
			b.Fatal(err)
		}
	}
	fi, _ := os.Stat(path)
	b.ReportMetric(float64(fi.Size())/(1<<20), "MiB-db")
}

// BenchmarkOpen100k: OpenSQLite of the same database: the check, then the
// writer's connection and its prepared statements.
func BenchmarkOpen100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	fillDB(b, path, 100_000)
	for b.Loop() {
		s, err := OpenSQLite(path, "")
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkApplyOneTask: the transaction the engine commits for one task's
// transition (its row and its attempt's), the commit a run pays about
// twice per task; it includes the check that the file is still there.
func BenchmarkApplyOneTask(b *testing.B) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1700000000, 0)
	batch := &Batch{
		Tasks:    []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{"id":"a","payload":["true"]}`), State: task.Running}},
		Attempts: []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, LogPath: "logs/a/attempt-1.log"}, Handle: local.EncodeHandle(executor.Process{PID: 1, PGID: 1, StartTicks: 1})}},
	}
	for b.Loop() {
		if err := s.Apply(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckSame: the check alone.
func BenchmarkCheckSame(b *testing.B) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if err := s.checkSame(); err != nil {
			b.Fatal(err)
		}
	}
}

// A database left by a scheduler that died (its last transactions still in
// the WAL) passes the check and keeps them: the check reads through the WAL
// and does not mistake it for damage.
func TestSQLiteOpensWhatACrashLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 50 {
		if err := s.Apply(&Batch{Tasks: []TaskWrite{{ID: fmt.Sprint("t", i), Seq: int64(i), Kind: "command", Spec: []byte(`{}`), State: task.Complete}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The files as a kill -9 now would leave them: the writer is still open,
	// its commits in the WAL, not yet checkpointed.
	crash := filepath.Join(t.TempDir(), "state.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		copyFile(t, path+suffix, crash+suffix)
	}
	if fi, err := os.Stat(crash + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL to recover from (%v): the test would prove nothing", err)
	}
	c, err := OpenSQLite(crash, "")
	if err != nil {
		t.Fatalf("OpenSQLite after a crash: %v", err)
	}
	defer c.Close()
	rows, err := c.Load()
	if err != nil || len(rows) != 50 {
		t.Errorf("Load after a crash = %d rows, %v; want 50", len(rows), err)
	}
}
