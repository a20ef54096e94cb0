package sqlitec

import (
	"fmt"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Mode says how Open opens a database.
type Mode int

const (
	// ReadWrite opens the database for reading and writing, creating it
	// if it is not there.
	ReadWrite Mode = iota
	// ReadOnly opens an existing database for reading only
	// (SQLITE_OPEN_READONLY).
	ReadOnly
)

// Error is an error SQLite reported: its extended result code and message.
type Error struct {
	Code int    // the extended result code; Code&0xff is the primary one
	Msg  string // sqlite3_errmsg, or sqlite3_errstr of the code
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Msg, e.Code) }

// Conn is one SQLite connection opened SQLITE_OPEN_NOMUTEX. It and its
// statements must be used by one goroutine at a time.
type Conn struct {
	tls *libc.TLS
	db  uintptr // sqlite3*; 0 once closed
}

// Open opens the database file at path (a file name, not a URI).
func Open(path string, mode Mode) (*Conn, error) {
	flags := int32(sqlite3.SQLITE_OPEN_NOMUTEX)
	switch mode {
	case ReadOnly:
		flags |= sqlite3.SQLITE_OPEN_READONLY
	default:
		flags |= sqlite3.SQLITE_OPEN_READWRITE | sqlite3.SQLITE_OPEN_CREATE
	}
	tls := libc.NewTLS()
	name, err := libc.CString(path)
	if err != nil {
		tls.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer libc.Xfree(tls, name)
	out := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(uintptr(0))))
	if out == 0 {
		tls.Close()
		return nil, fmt.Errorf("open %s: %w", path, &Error{Code: sqlite3.SQLITE_NOMEM, Msg: "out of memory"})
	}
	defer libc.Xfree(tls, out)
	rc := sqlite3.Xsqlite3_open_v2(tls, name, out, flags, 0)
	c := &Conn{tls: tls, db: *(*uintptr)(ptr(out))}
	if rc != sqlite3.SQLITE_OK {
		err := c.err(rc)
		if c.db != 0 {
			sqlite3.Xsqlite3_close_v2(tls, c.db)
		}
		tls.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sqlite3.Xsqlite3_extended_result_codes(tls, c.db, 1)
	return c, nil
}

// Close closes the connection and frees its memory. Statements not
// finalized keep SQLite's part of it alive (sqlite3_close_v2) until they
// are; finalize them first.
func (c *Conn) Close() error {
	if c.db == 0 {
		return nil
	}
	rc := sqlite3.Xsqlite3_close_v2(c.tls, c.db)
	var err error
	if rc != sqlite3.SQLITE_OK {
		err = c.err(rc)
	}
	c.db = 0
	c.tls.Close()
	return err
}

// Exec runs one or more SQL statements that take no parameters and whose
// rows, if any, are dropped (PRAGMA settings, BEGIN, COMMIT, ...).
func (c *Conn) Exec(sql string) error {
	if c.db == 0 {
		return errClosed
	}
	z, err := libc.CString(sql)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, z)
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, z, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	return nil
}

// InTransaction reports whether a transaction is open (not autocommit).
func (c *Conn) InTransaction() bool {
	return c.db != 0 && sqlite3.Xsqlite3_get_autocommit(c.tls, c.db) == 0
}

// err returns SQLite's error for result code rc, with the connection's
// message when it is about rc.
func (c *Conn) err(rc int32) error {
	msg := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	code := int(rc)
	if c.db != 0 {
		if ext := sqlite3.Xsqlite3_extended_errcode(c.tls, c.db); ext&0xff == rc&0xff {
			code = int(ext)
			msg = libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
		}
	}
	return &Error{Code: code, Msg: msg}
}

var errClosed = &Error{Code: sqlite3.SQLITE_MISUSE, Msg: "connection closed"}

// ptr turns an address of C memory (never of Go memory) into a pointer.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
