package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// schemaOf returns what defines a database's schema: every row of
// sqlite_master but its root page, and the two pragmas gpusched writes.
func schemaOf(t *testing.T, path string) (rows []string, sqlText string) {
	t.Helper()
	s, err := openReadOnly(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := s.db.Query("SELECT type, name, tbl_name, coalesce(sql, '<none>') FROM sqlite_master ORDER BY type, name")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var b strings.Builder
	for q.Next() {
		var typ, name, tbl, sql string
		if err := q.Scan(&typ, &name, &tbl, &sql); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, fmt.Sprintf("%s %s on %s: %s", typ, name, tbl, sql))
		if sql != "<none>" {
			b.WriteString(sql + ";\n")
		}
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"user_version", "application_id", "journal_mode"} {
		var v string
		if err := s.db.QueryRow("PRAGMA " + p).Scan(&v); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, p+" = "+v)
	}
	return rows, b.String()
}

// A new state database gets its schema in one step (schema); it must be
// exactly the one every migration builds from the first version's, or a
// database would differ by the version of gpusched that created it.
func TestSchemaIsMigrated(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.db")
	s, err := OpenSQLite(fresh, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	old := filepath.Join(dir, "old.db")
	execSQL(t, old, migrations[0]+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=1;", ApplicationID))
	s, err = OpenSQLite(old, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	got, _ := schemaOf(t, fresh)
	want, wantSQL := schemaOf(t, old)
	if len(want) < 10 || want[len(want)-3] != fmt.Sprintf("user_version = %d", SchemaVersion()) {
		t.Fatalf("the migrated database is not at the current version: %q", want)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("created new:  %s\nmigrated:     %s", g, w)
			}
		}
		t.Logf("schema (schema.go) should be:\n%s", wantSQL)
	}
}

// BenchmarkOpenNew: OpenSQLite of a state database not there yet, what
// every new run directory pays before its first start (cpu-ns/op: the
// process's CPU, less noisy than the wall time on a shared machine).
func BenchmarkOpenNew(b *testing.B) {
	var cpu time.Duration
	for b.Loop() {
		dir := b.TempDir()
		c := cpuTime()
		s, err := OpenSQLite(filepath.Join(dir, "state.db"), dir)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		cpu += cpuTime() - c
	}
	reportCPU(b, cpu)
}
