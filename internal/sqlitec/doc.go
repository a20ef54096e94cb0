// Package sqlitec is a small layer over SQLite's C API as the pure-Go
// modernc.org/sqlite/lib transpiles it, for the store's hot paths: reading
// every task of a large run and writing many rows in one transaction.
//
// # Why not database/sql
//
// The modernc driver opens every connection SQLITE_OPEN_FULLMUTEX, so each
// column handed out and each value bound takes the connection's mutex (a
// pure-Go pthread mutex), copies every bound text into freshly allocated C
// memory, and database/sql converts every value through interfaces and
// allocates argument slices. A Conn here is opened SQLITE_OPEN_NOMUTEX
// (SQLite's multi-thread mode for this connection): it takes no mutex, and
// is therefore safe only while one goroutine at a time uses it and the
// statements prepared on it. The caller guards it.
//
// # Memory
//
// A Stmt copies the texts and blobs bound to it into one reused block of C
// memory (SQLITE_STATIC: SQLite reads them in place), freed by Finalize.
// Column values are copied into Go memory by ColumnText and ColumnBytes;
// ColumnRaw hands out SQLite's own bytes, valid only until the next Step,
// Reset or Finalize. Close does not finalize statements: finalize every
// statement first (sqlite3_close_v2 keeps SQLite's connection until the
// last is finalized).
package sqlitec
