package sqlitec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sqlite3 "modernc.org/sqlite/lib"
)

func open(t *testing.T, path string, mode Mode) *Conn {
	t.Helper()
	c, err := Open(path, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func prepare(t *testing.T, c *Conn, sql string) *Stmt {
	t.Helper()
	s, err := c.Prepare(sql)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Finalize() })
	return s
}

func code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return -1
}

// Values bound read back as they were: texts (empty ones stay texts, not
// NULL), integers, NULL, blobs; and a statement reused after Reset binds
// afresh, also past the size of one block of its memory.
func TestBindAndReadBack(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "db"), ReadWrite)
	if err := c.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, s TEXT, n INTEGER, b BLOB)"); err != nil {
		t.Fatal(err)
	}
	ins := prepare(t, c, "INSERT INTO t (k, s, n, b) VALUES (?, ?, ?, ?)")
	big := strings.Repeat("x", 3*blockSize/2)
	want := map[int64]string{}
	for k := range int64(200) {
		s := strings.Repeat(string(rune('a'+k%26)), int(k*37%1000))
		if k == 7 {
			s = big
		}
		want[k] = s
		ins.BindInt64(1, k)
		ins.BindText(2, s)
		if k%2 == 0 {
			ins.BindInt64(3, -k)
		} else {
			ins.BindNull(3)
		}
		ins.BindBlob(4, []byte(s))
		if err := ins.Exec(); err != nil {
			t.Fatal(k, err)
		}
	}
	// Not bound after Reset: NULL, not what was bound before.
	ins.BindInt64(1, 1000)
	if err := ins.Exec(); err != nil {
		t.Fatal(err)
	}
	sel := prepare(t, c, "SELECT k, s, n, b, typeof(s) FROM t ORDER BY k")
	var n int64
	for {
		row, err := sel.Step()
		if err != nil {
			t.Fatal(err)
		}
		if !row {
			break
		}
		k := sel.ColumnInt64(0)
		if k == 1000 {
			if !sel.ColumnNull(1) || !sel.ColumnNull(3) || sel.ColumnBytes(3) != nil || sel.ColumnRaw(1) != nil {
				t.Errorf("row 1000: columns not bound are %q %q, want NULL", sel.ColumnText(1), sel.ColumnBytes(3))
			}
			continue
		}
		n++
		if got := sel.ColumnText(1); got != want[k] {
			t.Errorf("row %d: text of %d bytes, want %d", k, len(got), len(want[k]))
		}
		if got := string(sel.ColumnBytes(3)); got != want[k] {
			t.Errorf("row %d: blob of %d bytes, want %d", k, len(got), len(want[k]))
		}
		if typ := sel.ColumnText(4); typ != "text" {
			t.Errorf("row %d: s is %s, want text", k, typ)
		}
		if k%2 == 0 && (sel.ColumnNull(2) || sel.ColumnInt64(2) != -k) {
			t.Errorf("row %d: n = %d, want %d", k, sel.ColumnInt64(2), -k)
		}
		if k%2 == 1 && !sel.ColumnNull(2) {
			t.Errorf("row %d: n = %d, want NULL", k, sel.ColumnInt64(2))
		}
	}
	if n != 200 {
		t.Errorf("read %d rows, want 200", n)
	}
}

// Errors carry SQLite's extended code and message.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	c := open(t, filepath.Join(dir, "db"), ReadWrite)
	if err := c.Exec("CREATE TABLE t (k TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	ins := prepare(t, c, "INSERT INTO t VALUES (?)")
	ins.BindText(1, "a")
	if err := ins.Exec(); err != nil {
		t.Fatal(err)
	}
	ins.BindText(1, "a")
	err := ins.Exec()
	if code(err) != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || !strings.Contains(err.Error(), "UNIQUE") {
		t.Errorf("duplicate key: %v (code %d), want SQLITE_CONSTRAINT_PRIMARYKEY", err, code(err))
	}
	// A bind out of range fails the Step, and Reset forgets it.
	ins.BindText(2, "b")
	if _, err := ins.Step(); code(err) != sqlite3.SQLITE_RANGE {
		t.Errorf("bind out of range: %v, want SQLITE_RANGE", err)
	}
	ins.Reset()
	ins.BindText(1, "b")
	if err := ins.Exec(); err != nil {
		t.Errorf("after Reset: %v", err)
	}
	if _, err := c.Prepare("SELECT nope FROM t"); code(err) != sqlite3.SQLITE_ERROR || !strings.Contains(err.Error(), "nope") {
		t.Errorf("bad statement: %v", err)
	}

	ro := open(t, filepath.Join(dir, "db"), ReadOnly)
	if err := ro.Exec("INSERT INTO t VALUES ('c')"); code(err)&0xff != sqlite3.SQLITE_READONLY {
		t.Errorf("write on a read-only connection: %v, want SQLITE_READONLY", err)
	}
	if _, err := Open(filepath.Join(dir, "missing"), ReadOnly); code(err) != sqlite3.SQLITE_CANTOPEN {
		t.Errorf("read-only open of a missing file: %v, want SQLITE_CANTOPEN", err)
	}

	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	j := open(t, junk, ReadOnly)
	if _, err := j.Prepare("SELECT * FROM sqlite_master"); code(err) != sqlite3.SQLITE_NOTADB {
		t.Errorf("reading a file that is not SQLite: %v, want SQLITE_NOTADB", err)
	}
}

// A transaction is seen as open between BEGIN and COMMIT, and what it
// wrote is seen by another connection only after COMMIT.
func TestTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	c := open(t, path, ReadWrite)
	if err := c.Exec("PRAGMA journal_mode=WAL; CREATE TABLE t (k INTEGER)"); err != nil {
		t.Fatal(err)
	}
	other := open(t, path, ReadOnly)
	count := prepare(t, other, "SELECT count(*) FROM t")
	rows := func() int64 {
		t.Helper()
		if _, err := count.Step(); err != nil {
			t.Fatal(err)
		}
		n := count.ColumnInt64(0)
		count.Reset()
		return n
	}
	if err := c.Exec("BEGIN; INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if !c.InTransaction() || rows() != 0 {
		t.Errorf("inside the transaction: open %v, other sees %d rows; want open, 0", c.InTransaction(), rows())
	}
	if err := c.Exec("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if c.InTransaction() || rows() != 1 {
		t.Errorf("after COMMIT: open %v, other sees %d rows; want closed, 1", c.InTransaction(), rows())
	}
}
