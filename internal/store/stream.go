package store

import (
	"errors"
	"fmt"
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
	// then the store is busy: its other methods wait.
	StreamTasks(rows []TaskWrite) *TaskStream
}

var _ Streamer = (*SQLite)(nil)

// TaskStream is a transaction begun by StreamTasks. Its methods are for
// the goroutine that fills the rows in (the engine's loop); the store's
// writer reads only the rows it was told are final.
type TaskStream struct {
	rows   []TaskWrite
	filled chan int        // how many of rows are final: grows; closed once all are
	end    chan streamRest // how it ends: the rest to commit, or nothing (roll back)
	done   chan error      // the transaction's outcome
	sent   int             // filled's last value (the caller's)
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
	t.filled <- n // never blocks: there is room for every chunk
}

// Commit writes the stream's rows not written yet, then the rest of b
// (its clearing of waiting reasons, its other task rows, attempts,
// events, meta...; b.Tasks[at:at+len(rows)] are the stream's rows, not
// written again), and commits it all in the stream's transaction: all or
// nothing, as Apply. b.ClearWaiting cannot be streamed (it would forget
// the reasons of rows written already): such a batch is refused, as is
// one that does not hold the rows at at.
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

var errStreamBatch = errors.New("commit streamed rows: the batch clears every waiting reason, or does not hold the rows")

// StreamTasks begins a transaction that writes rows as they are filled
// in, on a goroutine of its own that holds s.mu until it ends.
func (s *SQLite) StreamTasks(rows []TaskWrite) *TaskStream {
	t := &TaskStream{
		rows:   rows,
		filled: make(chan int, len(rows)/chunk+1),
		end:    make(chan streamRest, 1),
		done:   make(chan error, 1),
	}
	go func() { t.done <- s.stream(t) }()
	return t
}

// stream is the writer of t's transaction.
func (s *SQLite) stream(t *TaskStream) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.beginStream()
	now := time.Now().UnixNano()
	written := 0
	for n := range t.filled {
		if err == nil {
			n -= (n - written) % chunk // whole statements only
			err = s.writeTasks(t.rows[written:n], now)
			written = n
		}
	}
	end := <-t.end
	if err == nil && end.b == nil {
		s.lite.c.Exec("ROLLBACK")
		return nil
	}
	if err == nil {
		b := end.b
		err = s.writeClear(b)
		if err == nil {
			err = s.writeTasks(t.rows[written:], now)
		}
		if err == nil {
			err = s.writeTasks(b.Tasks[:end.at], now)
		}
		if err == nil {
			err = s.writeTasks(b.Tasks[end.at+len(t.rows):], now)
		}
		if err == nil {
			err = s.writeRest(b, now)
		}
		if err == nil {
			err = s.checkSame() // as Apply: last
		}
		if err == nil {
			if err = s.lite.c.Exec("COMMIT"); err != nil {
				err = fmt.Errorf("commit state db %s: %w", s.path, err)
			}
		}
	}
	if err != nil && s.lite != nil && s.lite.c.InTransaction() {
		s.lite.c.Exec("ROLLBACK") // the error that matters is err
	}
	return s.corrupt(err)
}

// beginStream begins the stream's transaction, or says why it cannot.
func (s *SQLite) beginStream() error {
	switch {
	case s.readOnly:
		return fmt.Errorf("write state db %s: opened read-only", s.path)
	case s.lite == nil:
		return ErrClosed
	}
	if err := s.lite.c.Exec("BEGIN"); err != nil {
		return fmt.Errorf("write state db %s: %w", s.path, err)
	}
	return nil
}
