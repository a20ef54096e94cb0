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
