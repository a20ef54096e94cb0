package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/sqlitec"
	"github.com/gpusched/gpusched/internal/task"
)

// Apply writes the batch in one transaction. It fails with ErrGone, and
// commits nothing, when the database file was deleted or replaced since it
// was opened, and with ErrCorrupt when it meets a damaged page.
func (s *SQLite) Apply(b *Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.corrupt(s.apply(b))
}

func (s *SQLite) apply(b *Batch) error {
	if err := s.writable(); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	l := s.lite
	// BEGIN and COMMIT as statements prepared once: sqlite3_exec parsed
	// and compiled each anew at every commit.
	if err := l.run("BEGIN"); err != nil {
		return fmt.Errorf("write state db %s: %w", s.path, err)
	}
	err := s.writeBatch(b)
	if err == nil {
		// Last: the transaction is complete, and a file deleted while it
		// was built is caught too. A transaction committed to a deleted
		// file would be lost without a word.
		err = s.checkSame()
	}
	if err == nil {
		if err = l.run("COMMIT"); err != nil {
			err = fmt.Errorf("commit state db %s: %w", s.path, err)
		}
	}
	if err != nil && l.c.InTransaction() {
		l.c.Exec("ROLLBACK") // the error that matters is err
	}
	return err
}

// writable says why s cannot begin a write, if it cannot. s.mu is held.
func (s *SQLite) writable() error {
	switch {
	case s.readOnly:
		return fmt.Errorf("write state db %s: opened read-only", s.path)
	case s.lite == nil:
		return ErrClosed
	}
	return nil
}

// writeBatch writes b inside the open transaction.
func (s *SQLite) writeBatch(b *Batch) error {
	if err := s.writeClear(b); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if err := s.writeTasks(b.Tasks, now); err != nil {
		return err
	}
	return s.writeRest(b, now)
}

// writeClear forgets the waiting reasons b clears (ClearWaiting,
// ClearWaitingOf), before b's task rows are written.
func (s *SQLite) writeClear(b *Batch) error {
	l := s.lite
	if b.ClearWaiting {
		if err := l.c.Exec("UPDATE tasks SET waiting_kind = '', waiting = '' WHERE waiting_kind != ''"); err != nil {
			return fmt.Errorf("write tasks to state db %s: %w", s.path, err)
		}
	}
	for _, id := range b.ClearWaitingOf {
		if err := l.exec(clearWaitingSQL, func(v *values) { v.text(id) }); err != nil {
			return fmt.Errorf("write tasks to state db %s: %w", s.path, err)
		}
	}
	return nil
}

// writeTasks writes task rows, updated at now, inside the open
// transaction.
func (s *SQLite) writeTasks(rows []TaskWrite, now int64) error {
	err := s.lite.upsert(upsertTask1, upsertTaskChunk, len(rows), func(v *values, i int) {
		w := &rows[i]
		spec := w.Spec
		if spec == nil {
			spec = []byte{} // empty: keep the stored definition
		}
		v.text(w.ID)
		v.int(w.Seq)
		v.text(w.Kind)
		v.blob(spec)
		v.text(w.State.String())
		v.intOrNull(w.ExitCode)
		v.text(w.Error)
		v.text(w.BlockedBy)
		v.int(now)
		v.positive(w.GPURequestMiB)
		v.time(w.Submitted)
		v.text(w.Fingerprint)
		v.text(w.Rerun)
		v.time(w.RetryAt)
		v.text(w.WaitKind.String())
		v.text(w.WaitDetail)
		v.bool(w.Paused)
		v.bool(w.NotNeeded)
	})
	if err != nil {
		return fmt.Errorf("write tasks to state db %s: %w", s.path, err)
	}
	return nil
}

// writeRest writes what b holds besides its clearing and its task rows
// (attempts, cards, files, events, samples, meta), after them, inside the
// open transaction.
func (s *SQLite) writeRest(b *Batch, now int64) error {
	l := s.lite
	// The remote jobs as JSON, encoded before anything is bound.
	var jobs map[int]string
	for i := range b.Attempts {
		if job := b.Attempts[i].Job; job != nil {
			data, err := json.Marshal(job)
			if err != nil {
				return fmt.Errorf("write attempts to state db %s: %w", s.path, err)
			}
			if jobs == nil {
				jobs = map[int]string{}
			}
			jobs[i] = string(data)
		}
	}
	err := l.upsert(upsertAttempt1, upsertAttemptChunk, len(b.Attempts), func(v *values, i int) {
		w := &b.Attempts[i]
		a := &w.Attempt
		v.text(w.TaskID)
		v.int(int64(a.Number))
		v.int(a.Start.UnixNano())
		v.time(a.End)
		v.intOrNull(a.ExitCode)
		v.text(a.Signal)
		v.bool(a.TimedOut)
		v.bool(a.Cancelled)
		v.bool(a.Interrupted)
		v.text(a.Error)
		v.text(s.relLog(a.LogPath))
		v.positive(int64(a.PID))
		v.text(w.Handle.Executor)
		v.int(int64(w.Handle.Version))
		if len(w.Handle.Data) > 0 {
			v.blob(w.Handle.Data)
		} else {
			v.null() // no data
		}
		v.intOrNull(a.GPU)
		v.text(a.GPUUUID)
		v.positive(a.MemRequestedMiB)
		v.positive(a.MemPeakMiB)
		v.time(a.ReadyAt)
		v.bool(a.NotCharged)
		v.bool(a.Adopted)
		v.text(a.EndReason)
		v.text(jobs[i])
		v.text(joinInts(a.GPUs))
		v.positive(a.HostMemRequestedMiB)
		v.positive(a.RSSPeakMiB)
	})
	if err != nil {
		return fmt.Errorf("write attempts to state db %s: %w", s.path, err)
	}
	if b.Cards != nil {
		if err := l.c.Exec("DELETE FROM gpus"); err != nil {
			return fmt.Errorf("write gpus to state db %s: %w", s.path, err)
		}
		for _, c := range b.Cards {
			view, err := json.Marshal(c)
			if err != nil {
				return fmt.Errorf("write gpus to state db %s: %w", s.path, err)
			}
			err = l.exec("INSERT INTO gpus (idx, view, updated_at) VALUES (?, ?, ?)", func(v *values) {
				v.int(int64(c.Index))
				v.blob(view)
				v.int(now)
			})
			if err != nil {
				return fmt.Errorf("write gpus to state db %s: %w", s.path, err)
			}
		}
	}
	for i := range b.Tasks {
		w := &b.Tasks[i]
		if !w.ArtifactsSet {
			continue
		}
		if err := writeFiles(l, "artifacts", w.ID, w.Artifacts); err != nil {
			return fmt.Errorf("write artifacts of %q to state db %s: %w", w.ID, s.path, err)
		}
	}
	for _, w := range b.Inputs {
		if err := writeFiles(l, "inputs", w.TaskID, w.Inputs); err != nil {
			return fmt.Errorf("write inputs of %q to state db %s: %w", w.TaskID, s.path, err)
		}
	}
	for _, ev := range b.Events {
		err := l.exec(`INSERT INTO events (id, kind, task_id, attempt, created_at, acked_at, tries, last_error, next_try, payload, gave_up)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET acked_at = excluded.acked_at, tries = excluded.tries,
				last_error = excluded.last_error, next_try = excluded.next_try, gave_up = excluded.gave_up`, func(v *values) {
			v.int(ev.ID)
			v.text(cmp.Or(ev.Kind, EventComplete))
			v.textOrNull(ev.TaskID)
			v.int(int64(ev.Attempt))
			v.int(ev.Created.UnixNano())
			v.time(ev.Acked)
			v.int(int64(ev.Tries))
			v.text(ev.LastError)
			v.time(ev.NextTry)
			v.textBytes(ev.Payload)
			v.bool(ev.GaveUp)
		})
		if err != nil {
			return fmt.Errorf("write event %d to state db %s: %w", ev.ID, s.path, err)
		}
	}
	for _, sm := range b.Samples {
		err := l.exec(`INSERT OR REPLACE INTO gpu_samples (at, idx, total_mib, used_mib, foreign_mib, observed_mib, charged_mib, capacity_mib)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, func(v *values) {
			v.int(sm.At.UnixNano())
			v.int(int64(sm.Index))
			v.int(sm.TotalMiB)
			v.int(sm.UsedMiB)
			v.int(sm.ForeignMiB)
			v.int(sm.ObservedMiB)
			v.int(sm.ChargedMiB)
			v.int(sm.CapacityMiB)
		})
		if err != nil {
			return fmt.Errorf("write gpu samples to state db %s: %w", s.path, err)
		}
	}
	for k, val := range b.Meta {
		var err error
		if val == "" {
			err = l.exec(deleteMetaSQL, func(v *values) { v.text(k) })
		} else {
			err = l.exec(setMetaSQL, func(v *values) {
				v.text(k)
				v.text(val)
			})
		}
		if err != nil {
			return fmt.Errorf("write %s to state db %s: %w", k, s.path, err)
		}
	}
	return nil
}

// clearWaitingSQL forgets one task's waiting reason (Batch.ClearWaitingOf).
const clearWaitingSQL = "UPDATE tasks SET waiting_kind = '', waiting = '' WHERE id = ? AND waiting_kind != ''"

// The statements of the rows Apply writes, of one row and of chunk rows:
// made once, as l.stmt finds a prepared statement by its text.
var (
	upsertTask1, upsertTaskChunk       = upsertTaskSQL(1), upsertTaskSQL(chunk)
	upsertAttempt1, upsertAttemptChunk = upsertAttemptSQL(1), upsertAttemptSQL(chunk)
	insertFiles                        = map[string][2]string{
		"artifacts": {insertFilesSQL("artifacts", 1), insertFilesSQL("artifacts", chunk)},
		"inputs":    {insertFilesSQL("inputs", 1), insertFilesSQL("inputs", chunk)},
	}
)

func insertFilesSQL(table string, rows int) string {
	return "INSERT INTO " + table + " (task_id, path, size, mtime, sha256) VALUES " + placeholders(rows, 5)
}

// writeFiles replaces the stored files of task id in table (artifacts or
// inputs, which have the same columns).
func writeFiles[F task.Artifact | task.Input](l *lite, table, id string, files []F) error {
	if err := l.exec("DELETE FROM "+table+" WHERE task_id = ?", func(v *values) { v.text(id) }); err != nil {
		return err
	}
	return l.upsert(insertFiles[table][0], insertFiles[table][1], len(files), func(v *values, i int) {
		f := task.Artifact(files[i])
		v.text(id)
		v.text(f.Path)
		v.int(f.Size)
		v.int(f.ModTime.UnixNano())
		v.text(f.SHA256)
	})
}

// values binds a statement's parameters in order, from the first.
type values struct {
	st *sqlitec.Stmt
	n  int // parameters bound
}

func (v *values) next() int { v.n++; return v.n }

func (v *values) text(s string)      { v.st.BindText(v.next(), s) }
func (v *values) textBytes(b []byte) { v.st.BindTextBytes(v.next(), b) }
func (v *values) blob(b []byte)      { v.st.BindBlob(v.next(), b) }
func (v *values) int(n int64)        { v.st.BindInt64(v.next(), n) }
func (v *values) bool(b bool)        { v.st.BindBool(v.next(), b) }
func (v *values) null()              { v.st.BindNull(v.next()) }

// textOrNull binds s, or NULL when it is "".
func (v *values) textOrNull(s string) {
	if s == "" {
		v.null()
		return
	}
	v.text(s)
}

// intOrNull binds *p, or NULL when p is nil.
func (v *values) intOrNull(p *int) {
	if p == nil {
		v.null()
		return
	}
	v.int(int64(*p))
}

// positive binds n, or NULL when it is not positive.
func (v *values) positive(n int64) {
	if n <= 0 {
		v.null()
		return
	}
	v.int(n)
}

// time binds t as nanoseconds since the epoch, or NULL when it is zero.
func (v *values) time(t time.Time) {
	if t.IsZero() {
		v.null()
		return
	}
	v.int(t.UnixNano())
}

// exec runs q once, its parameters bound by bind.
func (l *lite) exec(q string, bind func(v *values)) error {
	st, err := l.stmt(q)
	if err != nil {
		return err
	}
	v := values{st: st}
	bind(&v)
	return st.Exec()
}

// upsert writes n rows, bound by bind (row i), with many (a statement of
// chunk rows) while chunk are left, then one (of one row).
func (l *lite) upsert(one, many string, n int, bind func(v *values, i int)) error {
	i := 0
	if n >= chunk {
		st, err := l.stmt(many)
		if err != nil {
			return err
		}
		for ; n-i >= chunk; i += chunk {
			v := values{st: st}
			for r := i; r < i+chunk; r++ {
				bind(&v, r)
			}
			if err := st.Exec(); err != nil {
				return err
			}
		}
	}
	if i == n {
		return nil
	}
	st, err := l.stmt(one)
	if err != nil {
		return err
	}
	for ; i < n; i++ {
		v := values{st: st}
		bind(&v, i)
		if err := st.Exec(); err != nil {
			return err
		}
	}
	return nil
}
