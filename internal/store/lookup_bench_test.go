package store

import (
	"path/filepath"
	"testing"
)

func BenchmarkLookupTaskMissing(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	fillDB(b, path, 10000)
	s, err := OpenSQLite(path, "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if _, ok, err := s.LookupTask("nope"); ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkLookupTaskFound(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	fillDB(b, path, 10000)
	s, err := OpenSQLite(path, "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if _, ok, err := s.LookupTask("task-000042"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkCountWaiting100k: what the live display's count of waiting
// tasks by reason costs on a run of 100,000 tasks (a read of every row).
func BenchmarkCountWaiting100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	fillDB(b, path, 100_000)
	s, err := OpenSQLiteReadOnly(path, "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if _, err := s.CountWaiting(); err != nil {
			b.Fatal(err)
		}
	}
}
