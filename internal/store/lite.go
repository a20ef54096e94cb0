package store

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/internal/sqlitec"
	"github.com/gpusched/gpusched/internal/task"
)

// lite is the store's second connection to its database, through
// package sqlitec rather than database/sql: opened without SQLite's
// per-connection mutex and binding without a malloc per value, it carries
// the paths whose cost is per row (Load, LoadJudged, LookupTask, Apply).
// Like the store, it is used by one goroutine at a time.
type lite struct {
	c     *sqlitec.Conn
	stmts map[string]*sqlitec.Stmt // prepared once, by their SQL
	// strs interns the texts that repeat from row to row (kinds, errors,
	// what blocked a task, signals): a row read allocates none for them.
	strs map[string]string
}

// walPages is how many pages the WAL holds before the commit that takes
// it past them copies them into the database file (SQLite's automatic
// checkpoint; its default is 1,000), and autocheckpoint the writer's
// setting of it. That copy runs inside a COMMIT, so in the scheduler's
// loop between a task's exit and the next start, and it syncs the WAL and
// the database file and makes the next commit sync the WAL's new header:
// on this VM's ext4, 4 to 18 ms each time, where a turn's commit is some
// 80 µs. A run of 2,000 short tasks writes some 6,000 pages (a turn
// rewrites the same few leaves); at 1,000 it checkpointed six times, at
// 4,000 once or twice, each copy hardly larger, since it copies each page
// once however many times the WAL holds it. The WAL file grows to 16 MiB
// instead of 4 (it is removed when the store closes), and a scheduler that
// dies leaves that much more for the next open to read back.
const walPages = 4000

var autocheckpoint = fmt.Sprintf("PRAGMA wal_autocheckpoint=%d", walPages)

// cacheKiB is the writer's page cache, in KiB (SQLite's cache_size when
// negative). Every page of it a connection fills is memory taken fresh
// from the kernel, a page fault each: a transaction that writes 100,000
// tasks filled 32 MiB of it, and on a VM where a fault costs some 8 µs
// SubmitMany of them took 0.56-0.62 s with 32 MiB and 0.37-0.43 s with 8
// (BenchmarkSubmit100k). Reading 100,000 tasks back costs 10-25 ms more
// with the smaller cache (BenchmarkLoad100k, 103-106 -> 112-132 ms), a
// resume's first start nothing measurable, and a turn's commit the same
// (docs/benchmarks.md).
const cacheKiB = 8192

var cacheSize = fmt.Sprintf("PRAGMA cache_size=-%d", cacheKiB)

// openLite opens the raw connection to the database at path, read-only or
// not, with the store's settings.
func openLite(path string, readOnly bool) (*lite, error) {
	mode := sqlitec.ReadWrite
	pragmas := "PRAGMA busy_timeout=10000; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=1; PRAGMA temp_store=MEMORY; " +
		cacheSize + "; " + autocheckpoint
	if readOnly {
		mode = sqlitec.ReadOnly
		// SQLite's default page cache (2 MiB): a reader scans each page
		// once, and a larger cache only holds memory.
		pragmas = "PRAGMA busy_timeout=10000"
	}
	c, err := sqlitec.Open(path, mode)
	if err != nil {
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	if err := c.Exec(pragmas); err != nil {
		c.Close()
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	return &lite{c: c, stmts: map[string]*sqlitec.Stmt{}, strs: map[string]string{}}, nil
}

// stmt returns the statement of q, prepared on first use.
func (l *lite) stmt(q string) (*sqlitec.Stmt, error) {
	if st, ok := l.stmts[q]; ok {
		return st, nil
	}
	st, err := l.c.Prepare(q)
	if err != nil {
		return nil, err
	}
	l.stmts[q] = st
	return st, nil
}

// run runs q, a statement without parameters or rows, prepared on first
// use.
func (l *lite) run(q string) error {
	st, err := l.stmt(q)
	if err != nil {
		return err
	}
	return st.Exec()
}

// close finalizes the statements and closes the connection.
func (l *lite) close() error {
	var errs []error
	for _, st := range l.stmts {
		errs = append(errs, st.Finalize())
	}
	l.stmts = nil
	errs = append(errs, l.c.Close())
	return errors.Join(errs...)
}

// maxInterned bounds how many distinct texts intern keeps.
const maxInterned = 4096

// intern returns b as a string, the same string for the same bytes while
// fewer than maxInterned distinct ones were seen.
func (l *lite) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := l.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(l.strs) < maxInterned {
		l.strs[s] = s
	}
	return s
}

// stateByName and waitByName parse the names stored for states and
// waiting kinds from their bytes without allocating.
var (
	stateByName = func() map[string]task.State {
		m := map[string]task.State{}
		for st := task.State(0); st.String() != fmt.Sprintf("state(%d)", uint8(st)); st++ {
			m[st.String()] = st
		}
		return m
	}()
	waitByName = func() map[string]task.WaitKind {
		m := map[string]task.WaitKind{}
		for k := task.NotWaiting; k.String() != fmt.Sprintf("wait(%d)", uint8(k)); k++ {
			m[k.String()] = k
		}
		return m
	}()
)

func parseState(b []byte) (task.State, error) {
	if st, ok := stateByName[string(b)]; ok {
		return st, nil
	}
	return task.ParseState(string(b))
}

func parseWaitKind(b []byte) (task.WaitKind, error) {
	if k, ok := waitByName[string(b)]; ok {
		return k, nil
	}
	return task.ParseWaitKind(string(b))
}

// query runs q with the parameters args (strings or int64s) and hands each
// row to each; the statement is reset whatever happens.
func (l *lite) query(q string, args []any, each func(st *sqlitec.Stmt) error) error {
	st, err := l.stmt(q)
	if err != nil {
		return err
	}
	defer st.Reset()
	for i, a := range args {
		switch v := a.(type) {
		case string:
			st.BindText(i+1, v)
		case int64:
			st.BindInt64(i+1, v)
		default:
			return fmt.Errorf("query %q: argument %d of type %T", q, i+1, a)
		}
	}
	for {
		row, err := st.Step()
		if err != nil || !row {
			return err
		}
		if err := each(st); err != nil {
			return err
		}
	}
}

// read runs f in one read transaction of the raw connection: what f reads
// is one consistent snapshot.
func (l *lite) read(f func() error) error {
	if err := l.c.Exec("BEGIN"); err != nil {
		return err
	}
	err := f()
	if rerr := l.c.Exec("ROLLBACK"); err == nil {
		err = rerr
	}
	return err
}
