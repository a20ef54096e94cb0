package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Streamer is a Store that can write a batch's task rows while its caller
// is still filling them in: a big submission's rows go to the database on
// another goroutine while the engine works out the rest of them.
type Streamer interface {
	Store
	// StreamTasks begins a transaction that writes rows, in order, as the
	// caller says they are final (TaskStream.Fill); it ends with the
	// TaskStream's Commit or Rollback, one of which must be called. Until
	// then the store may be busy (SQLite's other methods wait).
	StreamTasks(rows []TaskWrite) *TaskStream
}

var _ Streamer = (*SQLite)(nil)

// TaskStream is a transaction begun by StreamTasks. Its methods are for
// the goroutine that fills the rows in (the engine's loop); the store's
// writer reads only the rows it was told are final.
type TaskStream struct {
	rows   []TaskWrite
	filled chan streamFill // how many of rows are final: grows; closed once all are
	end    chan streamRest // how it ends: the rest to commit, or nothing (roll back)
	done   chan error      // the transaction's outcome
	split  chan error      // CommitPrefix's outcome
	sent   int             // filled's last value (the caller's)
}

// streamFill says that rows[:n] are final; with prefix, that they are to
// be committed now with prefix (TaskStream.CommitPrefix).
type streamFill struct {
	n      int
	prefix *Batch
}

// streamRest is how a stream ends: with b (nil: rolled back), whose
// b.Tasks[at:at+len(rows)] are the stream's rows.
type streamRest struct {
	b  *Batch
	at int
}

// Fill says that rows[:n] are final: the store may write them now. The
// caller must not change them from then on.
func (t *TaskStream) Fill(n int) {
	if n-t.sent < chunk { // a statement writes chunk rows: no sooner
		return
	}
	t.sent = n
	t.filled <- streamFill{n: n} // never blocks: there is room for every chunk
}

// CommitPrefix commits rows[:n], which become final, and prefix (a
// batch of its own: task rows, attempts, events, meta; no clearing of
// waiting reasons) in a transaction of their own, then goes on with the
// rest of the rows in a new one, which Commit or Rollback ends as
// before: what CommitPrefix committed stays, whatever the end. It is
// for a caller that must commit a few writes of its own (an attempt's
// start) before the whole stream is written, and whose rows[:n] hold
// every row those writes depend on. At most one CommitPrefix a stream.
// A nil error means rows[:n] and prefix are committed; the stream may
// still fail after (its Commit says so).
func (t *TaskStream) CommitPrefix(n int, prefix *Batch) error {
	if prefix.ClearWaiting || len(prefix.ClearWaitingOf) > 0 || n < t.sent || n > len(t.rows) {
		return errStreamPrefix
	}
	t.sent = n
	t.filled <- streamFill{n: n, prefix: prefix} // room for it: see newTaskStream
	return <-t.split
}

// Commit writes the stream's rows not written yet, then the rest of b
// (its clearing of waiting reasons, its other task rows, attempts,
// events, meta...; b.Tasks[at:at+len(rows)] are the stream's rows, not
// written again), and commits it all in the stream's transaction: all or
// nothing, as Apply. b.ClearWaiting cannot be streamed (it would forget
// the reasons of rows written already): such a batch is refused, as is
// one that does not hold the rows at at. b.ClearWaitingOf must not name
// the stream's rows (it may be applied after them).
func (t *TaskStream) Commit(b *Batch, at int) error {
	close(t.filled)
	if b.ClearWaiting || at < 0 || at+len(t.rows) > len(b.Tasks) {
		t.end <- streamRest{}
		<-t.done
		return errStreamBatch
	}
	t.end <- streamRest{b, at}
	return <-t.done
}

// Rollback abandons the stream's transaction: nothing of it is kept.
func (t *TaskStream) Rollback() {
	close(t.filled)
	t.end <- streamRest{}
	<-t.done
}

var (
	errStreamBatch  = errors.New("commit streamed rows: the batch clears every waiting reason, or does not hold the rows")
	errStreamPrefix = errors.New("commit streamed rows: the prefix clears waiting reasons, or its rows are not the stream's next")
)

// streamWriter is a store's side of a TaskStream, called on the
// stream's goroutine: begin, write rows as they are final, then commit
// or roll back (after a failed begin too).
type streamWriter interface {
	begin() error
	write(rows []TaskWrite) error
	// commitPrefix writes prefix, commits the transaction, and begins
	// another; committed says whether the commit was made (an error
	// after it is the new transaction's).
	commitPrefix(prefix *Batch) (committed bool, err error)
	// commit writes left, the stream's rows not written yet, then b but
	// its b.Tasks[at:at+n] (the stream's rows), and commits.
	commit(left []TaskWrite, b *Batch, at, n int) error
	rollback()
}

// newTaskStream starts w's stream of rows.
func newTaskStream(rows []TaskWrite, w streamWriter) *TaskStream {
	t := &TaskStream{
		rows:   rows,
		filled: make(chan streamFill, len(rows)/chunk+2), // every chunk, and a CommitPrefix
		end:    make(chan streamRest, 1),
		done:   make(chan error, 1),
		split:  make(chan error, 1),
	}
	go func() { t.done <- t.run(w) }()
	return t
}

// run is the stream's goroutine: it writes rows in whole statements as
// they are filled in, then ends as the caller says.
func (t *TaskStream) run(w streamWriter) error {
	err := w.begin()
	written := 0
	for f := range t.filled {
		n := f.n
		switch {
		case f.prefix != nil:
			committed := false
			if err == nil {
				err = w.write(t.rows[written:n])
				written = n
				if err == nil {
					committed, err = w.commitPrefix(f.prefix)
				}
			}
			if committed {
				t.split <- nil
			} else {
				t.split <- cmp.Or(err, errStreamPrefix)
			}
		case err == nil:
			n -= (n - written) % chunk
			err = w.write(t.rows[written:n])
			written = n
		}
	}
	end := <-t.end
	if err != nil || end.b == nil {
		w.rollback()
		return err
	}
	return w.commit(t.rows[written:], end.b, end.at, len(t.rows))
}

// StreamTasks begins a transaction that writes rows as they are filled
// in, on a goroutine of its own that holds s.mu until it ends.
func (s *SQLite) StreamTasks(rows []TaskWrite) *TaskStream {
	return newTaskStream(rows, &sqliteStream{s: s})
}

// sqliteStream writes a stream into one SQLite transaction.
type sqliteStream struct {
	s   *SQLite
	now int64 // the rows' updated_at
}

func (w *sqliteStream) begin() error {
	s := w.s
	s.mu.Lock() // until commit or rollback
	w.now = time.Now().UnixNano()
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.lite.run("BEGIN"); err != nil {
		return s.corrupt(fmt.Errorf("write state db %s: %w", s.path, err))
	}
	return nil
}

func (w *sqliteStream) write(rows []TaskWrite) error {
	return w.s.corrupt(w.s.writeTasks(rows, w.now))
}

func (w *sqliteStream) commitPrefix(prefix *Batch) (bool, error) {
	s := w.s
	err := s.writeTasks(prefix.Tasks, w.now)
	if err == nil {
		err = s.writeRest(prefix, w.now)
	}
	if err == nil {
		err = s.checkSame() // as Apply: last
	}
	if err == nil {
		err = s.commitUnchecked()
	}
	if err != nil {
		if s.lite.c.InTransaction() {
			s.lite.c.Exec("ROLLBACK") // the error that matters is err
		}
		return false, s.corrupt(err)
	}
	if err := s.lite.run("BEGIN"); err != nil {
		return true, s.corrupt(fmt.Errorf("write state db %s: %w", s.path, err))
	}
	return true, nil
}

// commitUnchecked commits a stream's transaction without SQLite's
// automatic checkpoint. A stream's commit adds thousands of pages to the
// WAL, which SQLite would copy into the database file inside the COMMIT
// (0.05 s for 100,000 rows). That copy is for the file's size and later
// reads, not for durability: the stream's end runs it beside the caller
// instead.
func (s *SQLite) commitUnchecked() error {
	s.lite.c.Exec("PRAGMA wal_autocheckpoint=0")
	err := s.lite.run("COMMIT")
	s.lite.c.Exec(autocheckpoint) // the writer's own again
	if err != nil {
		return fmt.Errorf("commit state db %s: %w", s.path, err)
	}
	return nil
}

func (w *sqliteStream) commit(left []TaskWrite, b *Batch, at, n int) error {
	s := w.s
	defer s.mu.Unlock()
	err := s.writeTasks(left, w.now)
	if err == nil {
		err = s.writeClear(b)
	}
	if err == nil {
		err = s.writeTasks(b.Tasks[:at], w.now)
	}
	if err == nil {
		err = s.writeTasks(b.Tasks[at+n:], w.now)
	}
	if err == nil {
		err = s.writeRest(b, w.now)
	}
	if err == nil {
		err = s.checkSame() // as Apply: last
	}
	if err == nil {
		// The checkpoint the commit skips runs beside the caller, on the
		// *sql.DB's own connection (passive: it never blocks a writer).
		err = s.commitUnchecked()
		if err == nil {
			go s.db.Exec("PRAGMA wal_checkpoint(PASSIVE)") // a failure is harmless: later commits checkpoint
		}
	}
	if err != nil && s.lite.c.InTransaction() {
		s.lite.c.Exec("ROLLBACK") // the error that matters is err
	}
	return s.corrupt(err)
}

func (w *sqliteStream) rollback() {
	s := w.s
	defer s.mu.Unlock()
	if s.lite != nil && s.lite.c.InTransaction() {
		s.lite.c.Exec("ROLLBACK")
	}
}

var _ Streamer = (*Memory)(nil)

// StreamTasks keeps the rows as they are filled in, and applies them with
// the rest of the batch at the commit, at once.
func (m *Memory) StreamTasks(rows []TaskWrite) *TaskStream {
	return newTaskStream(rows, &memoryStream{m: m})
}

// memoryStream keeps a stream's rows until its commit.
type memoryStream struct {
	m    *Memory
	rows []TaskWrite
}

func (w *memoryStream) begin() error { return nil }

func (w *memoryStream) write(rows []TaskWrite) error {
	w.rows = append(w.rows, rows...)
	return nil
}

func (w *memoryStream) commitPrefix(prefix *Batch) (bool, error) {
	all := *prefix
	all.Tasks = slices.Concat(w.rows, prefix.Tasks)
	if err := w.m.Apply(&all); err != nil {
		return false, err
	}
	w.rows = nil
	return true, nil
}

func (w *memoryStream) commit(left []TaskWrite, b *Batch, at, n int) error {
	all := *b
	all.Tasks = slices.Concat(w.rows, left, b.Tasks[:at], b.Tasks[at+n:])
	return w.m.Apply(&all)
}

func (w *memoryStream) rollback() {}
