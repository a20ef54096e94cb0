package sqlitec

import (
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Stmt is a prepared statement. Its parameters are numbered from 1 and
// its columns from 0, as in SQLite's C API. A bind that fails (a number
// out of range) is reported by the next Step.
type Stmt struct {
	c       *Conn
	p       uintptr // sqlite3_stmt*; 0 once finalized
	bindErr error   // the first failed bind since Reset
	arena   arena   // C memory of the bound texts and blobs
	// Bound: parameters have been bound since the last Reset, so Reset
	// clears them.
	bound bool
}

// Prepare compiles one SQL statement, meant to be run many times.
func (c *Conn) Prepare(sql string) (*Stmt, error) {
	if c.db == 0 {
		return nil, errClosed
	}
	z, err := libc.CString(sql)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, z)
	out := libc.Xmalloc(c.tls, libc.Tsize_t(unsafe.Sizeof(uintptr(0))))
	if out == 0 {
		return nil, &Error{Code: sqlite3.SQLITE_NOMEM, Msg: "out of memory"}
	}
	defer libc.Xfree(c.tls, out)
	if rc := sqlite3.Xsqlite3_prepare_v3(c.tls, c.db, z, -1, sqlite3.SQLITE_PREPARE_PERSISTENT, out, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	p := *(*uintptr)(ptr(out))
	if p == 0 { // only a comment or white space
		return nil, &Error{Code: sqlite3.SQLITE_MISUSE, Msg: "no statement in " + sql}
	}
	return &Stmt{c: c, p: p}, nil
}

// Finalize frees the statement and its memory. It is safe to call twice.
func (s *Stmt) Finalize() error {
	if s.p == 0 {
		return nil
	}
	rc := sqlite3.Xsqlite3_finalize(s.c.tls, s.p)
	s.p = 0
	s.arena.free(s.c.tls)
	if rc != sqlite3.SQLITE_OK {
		return s.c.err(rc)
	}
	return nil
}

// Step runs the statement to its next row: true when a row is ready for
// the Column methods, false when the statement is done.
func (s *Stmt) Step() (bool, error) {
	if s.bindErr != nil {
		return false, s.bindErr
	}
	switch rc := sqlite3.Xsqlite3_step(s.c.tls, s.p); rc {
	case sqlite3.SQLITE_ROW:
		return true, nil
	case sqlite3.SQLITE_DONE:
		return false, nil
	default:
		return false, s.c.err(rc)
	}
}

// Exec steps the statement until it is done, then resets it.
func (s *Stmt) Exec() error {
	for {
		row, err := s.Step()
		if err != nil {
			s.Reset()
			return err
		}
		if !row {
			return s.Reset()
		}
	}
}

// Reset makes the statement ready to run again, its parameters unbound
// (NULL) and the memory of its bound texts reused. The error is that of
// the last Step, if it failed.
func (s *Stmt) Reset() error {
	rc := sqlite3.Xsqlite3_reset(s.c.tls, s.p)
	if s.bound {
		sqlite3.Xsqlite3_clear_bindings(s.c.tls, s.p)
		s.bound = false
	}
	s.arena.reset()
	s.bindErr = nil
	if rc != sqlite3.SQLITE_OK {
		return s.c.err(rc)
	}
	return nil
}

func (s *Stmt) check(rc int32) {
	s.bound = true
	if rc != sqlite3.SQLITE_OK && s.bindErr == nil {
		s.bindErr = s.c.err(rc)
	}
}

// BindInt64 binds parameter i to v.
func (s *Stmt) BindInt64(i int, v int64) {
	s.check(sqlite3.Xsqlite3_bind_int64(s.c.tls, s.p, int32(i), v))
}

// BindBool binds parameter i to 1 or 0.
func (s *Stmt) BindBool(i int, v bool) {
	var n int64
	if v {
		n = 1
	}
	s.BindInt64(i, n)
}

// BindNull binds parameter i to NULL.
func (s *Stmt) BindNull(i int) {
	s.check(sqlite3.Xsqlite3_bind_null(s.c.tls, s.p, int32(i)))
}

// BindText binds parameter i to the text v (an empty text, not NULL,
// when v is "").
func (s *Stmt) BindText(i int, v string) { s.bindText(i, unsafe.StringData(v), len(v)) }

// BindTextBytes binds parameter i to the text held in v.
func (s *Stmt) BindTextBytes(i int, v []byte) { s.bindText(i, unsafe.SliceData(v), len(v)) }

// bindText binds parameter i to the n bytes of text at data, copied into
// the statement's block of C memory.
func (s *Stmt) bindText(i int, data *byte, n int) {
	p := s.arena.copy(s.c.tls, data, n)
	if p == 0 {
		s.check(sqlite3.SQLITE_NOMEM)
		return
	}
	s.check(sqlite3.Xsqlite3_bind_text64(s.c.tls, s.p, int32(i), p, uint64(n), sqlite3.SQLITE_STATIC, sqlite3.SQLITE_UTF8))
}

// BindBlob binds parameter i to the blob v; NULL when v is nil.
func (s *Stmt) BindBlob(i int, v []byte) {
	if v == nil {
		s.BindNull(i)
		return
	}
	p := s.arena.copy(s.c.tls, unsafe.SliceData(v), len(v))
	if p == 0 {
		s.check(sqlite3.SQLITE_NOMEM)
		return
	}
	s.check(sqlite3.Xsqlite3_bind_blob64(s.c.tls, s.p, int32(i), p, uint64(len(v)), sqlite3.SQLITE_STATIC))
}

// ColumnNull reports whether column i of the current row is NULL.
func (s *Stmt) ColumnNull(i int) bool {
	return sqlite3.Xsqlite3_column_type(s.c.tls, s.p, int32(i)) == sqlite3.SQLITE_NULL
}

// ColumnInt64 returns column i of the current row as an integer (0 for
// NULL).
func (s *Stmt) ColumnInt64(i int) int64 {
	return sqlite3.Xsqlite3_column_int64(s.c.tls, s.p, int32(i))
}

// ColumnBool returns whether column i of the current row is a non-zero
// integer.
func (s *Stmt) ColumnBool(i int) bool { return s.ColumnInt64(i) != 0 }

// ColumnRaw returns the bytes of column i of the current row as text,
// without copying them: valid only until the next Step, Reset or
// Finalize. Nil for NULL; empty, not nil, for an empty text.
func (s *Stmt) ColumnRaw(i int) []byte {
	p := sqlite3.Xsqlite3_column_text(s.c.tls, s.p, int32(i))
	if p == 0 {
		return nil
	}
	n := sqlite3.Xsqlite3_column_bytes(s.c.tls, s.p, int32(i))
	return unsafe.Slice((*byte)(ptr(p)), int(n))
}

// ColumnText returns column i of the current row as text ("" for NULL).
func (s *Stmt) ColumnText(i int) string { return string(s.ColumnRaw(i)) }

// ColumnBytes returns a copy of column i of the current row (a text or a
// blob); nil for NULL.
func (s *Stmt) ColumnBytes(i int) []byte {
	p := sqlite3.Xsqlite3_column_blob(s.c.tls, s.p, int32(i))
	if p == 0 {
		if s.ColumnNull(i) {
			return nil
		}
		return []byte{}
	}
	n := sqlite3.Xsqlite3_column_bytes(s.c.tls, s.p, int32(i))
	return append([]byte(nil), unsafe.Slice((*byte)(ptr(p)), int(n))...)
}

// arena is C memory for the values bound to a statement: blocks reused
// from the start after each Reset, freed by free. A value never moves
// once copied, so SQLite may keep pointing at it until the next Reset.
type arena struct {
	blocks []block
	cur    int // the block being filled
	off    int // bytes used of blocks[cur]
}

type block struct {
	p uintptr
	n int
}

const blockSize = 64 << 10

// empty is where an empty text points: SQLite binds a NULL pointer as
// NULL, and an empty text must stay a text.
var empty = func() uintptr {
	p := libc.Xcalloc(nil, 1, 8)
	if p == 0 {
		panic("sqlitec: out of memory")
	}
	return p
}()

// copy copies n bytes at src into the arena and returns their address; 0
// when memory runs out.
func (a *arena) copy(tls *libc.TLS, src *byte, n int) uintptr {
	if n == 0 {
		return empty
	}
	for a.cur < len(a.blocks) && a.blocks[a.cur].n-a.off < n {
		a.cur, a.off = a.cur+1, 0
	}
	if a.cur == len(a.blocks) {
		size := max(blockSize, n)
		p := libc.Xmalloc(tls, libc.Tsize_t(size))
		if p == 0 {
			return 0
		}
		a.blocks = append(a.blocks, block{p, size})
	}
	b := a.blocks[a.cur]
	dst := b.p + uintptr(a.off)
	copy(unsafe.Slice((*byte)(ptr(dst)), n), unsafe.Slice(src, n))
	a.off += n
	return dst
}

func (a *arena) reset() { a.cur, a.off = 0, 0 }

func (a *arena) free(tls *libc.TLS) {
	for _, b := range a.blocks {
		libc.Xfree(tls, b.p)
	}
	*a = arena{}
}
