package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/sqlitec"
	"github.com/gpusched/gpusched/internal/task"
)

// Load reads every task with its attempts, in submission order. A damaged
// page met on the way gives an ErrCorrupt error.
func (s *SQLite) Load() ([]Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.load(loadAll, "")
	return out, s.corrupt(err)
}

// LoadJudged reads, for every task, what judging it against a new
// submission needs (Plan): its id, definition, state, fingerprint and
// grown GPU request, with its attempts (and their handles), artifacts and
// inputs; the other columns (submission number, kind, exit code, error,
// what it waits for, ...) are left zero. The rows come in no particular
// order. Reading a column costs about as much as the row's other work, so
// on 100,000 tasks this saves a good part of Load's time.
func (s *SQLite) LoadJudged() ([]Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.load(loadJudged, "")
	return out, s.corrupt(err)
}

// LookupTask reads task id with its attempts and artifacts.
func (s *SQLite) LookupTask(id string) (Row, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lite == nil {
		return Row{}, false, ErrClosed
	}
	// Most lookups are of ids never used (is a new task's id free?): one
	// indexed read answers them, without the transaction load needs.
	found := false
	err := s.lite.query("SELECT 1 FROM tasks WHERE id = ?", []any{id}, func(*sqlitec.Stmt) error {
		found = true
		return nil
	})
	if err != nil {
		return Row{}, false, s.corrupt(fmt.Errorf("read task %q from state db %s: %w", id, s.path, err))
	}
	if !found {
		return Row{}, false, nil
	}
	out, err := s.load(loadAll, id)
	if err != nil || len(out) == 0 {
		return Row{}, false, s.corrupt(err)
	}
	return out[0], true, nil
}

// What load reads of each task: every column, in submission order, or
// (LoadJudged) only those a resubmission is judged by, in no order.
const (
	loadAll = iota
	loadJudged
)

// The columns load reads of tasks and attempts, by their position.
const (
	taskSelect    = "SELECT id, seq, kind, spec, state, exit_code, error, blocked_by, gpu_request, submitted_at, fingerprint, rerun, retry_at, waiting_kind, waiting, paused, not_needed FROM tasks"
	judgedSelect  = "SELECT id, spec, state, gpu_request, fingerprint FROM tasks"
	attemptSelect = `SELECT task_id, number, started_at, ended_at, exit_code, signal, timed_out, cancelled,
		interrupted, error, log_path, pid, handle_executor, handle_version, handle, gpu, gpu_uuid, mem_requested, mem_peak,
		ready_at, not_charged, adopted, end_reason, job, gpus, host_mem_requested, rss_peak
		FROM attempts`
)

// load reads every task, or only the task one when it is not "", through
// the raw connection in one read transaction. Its caller holds s.mu.
func (s *SQLite) load(what int, one string) ([]Row, error) {
	if s.lite == nil {
		return nil, ErrClosed
	}
	var out []Row
	err := s.lite.read(func() error {
		var err error
		out, err = s.loadTx(what, one)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *SQLite) loadTx(what int, one string) ([]Row, error) {
	l := s.lite
	var where, whereTask string
	var args []any
	if one != "" {
		where, whereTask, args = " WHERE id = ?", " WHERE task_id = ?", []any{one}
	}
	var out []Row
	var byID map[string]int
	if one != "" {
		byID = map[string]int{}
	} else {
		// Sized once: a row is large, and growing a slice of 100,000 of
		// them copies each several times. count(*) walks the table's
		// pages without decoding a row.
		n := 0
		err := l.query("SELECT count(*) FROM tasks", nil, func(st *sqlitec.Stmt) error {
			n = int(st.ColumnInt64(0))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read tasks from state db %s: %w", s.path, err)
		}
		out, byID = make([]Row, 0, n), make(map[string]int, n)
	}
	if what == loadJudged {
		err := l.query(judgedSelect, nil, func(st *sqlitec.Stmt) error {
			r := Row{Spec: st.ColumnBytes(1), GPURequestMiB: st.ColumnInt64(3), Fingerprint: st.ColumnText(4)}
			r.ID = st.ColumnText(0)
			var err error
			if r.State, err = parseState(st.ColumnRaw(2)); err != nil {
				return fmt.Errorf("read task %q: %w", r.ID, err)
			}
			out = append(out, r)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read tasks from state db %s: %w", s.path, err)
		}
		for i := range out {
			byID[out[i].ID] = i
		}
		return s.loadAttempts(out, byID, whereTask, args)
	}
	// Rows are read in table order, which is not submission order once
	// the loop has written them, and put in order afterwards, in place
	// (inSeqOrder). Not by SQLite (ORDER BY seq, id), which would copy
	// every row into a temporary b-tree first.
	err := l.query(taskSelect+where, args, func(st *sqlitec.Stmt) error {
		out = append(out, Row{})
		return l.readTask(st, &out[len(out)-1])
	})
	if err != nil {
		return nil, fmt.Errorf("read tasks from state db %s: %w", s.path, err)
	}
	sorted := true
	for i := 1; i < len(out) && sorted; i++ {
		sorted = bySeq(&out[i-1], &out[i]) <= 0
	}
	if !sorted {
		inSeqOrder(out)
	}
	stale := false
	err = l.query("SELECT 1 FROM meta WHERE key = ?", []any{MetaWaitingStale}, func(*sqlitec.Stmt) error {
		stale = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read meta from state db %s: %w", s.path, err)
	}
	for i := range out {
		byID[out[i].ID] = i
		if stale {
			out[i].Waiting = task.WaitReason{} // an earlier scheduler's (MetaWaitingStale)
		}
	}
	return s.loadAttempts(out, byID, whereTask, args)
}

// inSeqOrder puts rows in submission order (bySeq), in place, moving each
// row about once: rows are large, and a second slice of them would be as
// much fresh memory again. Submission numbers are most often a run of
// distinct numbers, which give each row its place without sorting.
func inSeqOrder(rows []Row) {
	if len(rows) < 2 {
		return
	}
	low, high := rows[0].Seq, rows[0].Seq
	for i := range rows {
		low, high = min(low, rows[i].Seq), max(high, rows[i].Seq)
	}
	order := make([]int32, len(rows)) // order[k]: the index of the row that goes to k
	dense := high-low == int64(len(rows)-1)
	if dense {
		for k := range order {
			order[k] = -1
		}
		for i := range rows {
			k := rows[i].Seq - low
			if order[k] >= 0 {
				dense = false // two rows of one number: sort them by id
				break
			}
			order[k] = int32(i)
		}
	}
	if !dense {
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int { return bySeq(&rows[a], &rows[b]) })
	}
	// Follow each cycle of the permutation: place k takes the row at
	// order[k], whose own place is filled next, until the cycle comes
	// back to k. A place filled is marked -1.
	for k := range order {
		if order[k] < 0 {
			continue
		}
		if int(order[k]) == k {
			order[k] = -1
			continue
		}
		held := rows[k]
		at := k
		for {
			from := int(order[at])
			order[at] = -1
			if from == k {
				rows[at] = held
				break
			}
			rows[at] = rows[from]
			at = from
		}
	}
}

// readTask reads the task row st holds into r.
func (l *lite) readTask(st *sqlitec.Stmt, r *Row) error {
	*r = Row{Seq: st.ColumnInt64(1), Kind: l.intern(st.ColumnRaw(2)), Spec: st.ColumnBytes(3),
		GPURequestMiB: st.ColumnInt64(8), Fingerprint: st.ColumnText(10)}
	r.ID = st.ColumnText(0)
	var err error
	if r.State, err = parseState(st.ColumnRaw(4)); err != nil {
		return fmt.Errorf("read task %q: %w", r.ID, err)
	}
	r.ExitCode = intColumn(st, 5)
	r.Error, r.BlockedBy = l.intern(st.ColumnRaw(6)), l.intern(st.ColumnRaw(7))
	r.Submitted = timeColumn(st, 9)
	r.Rerun = l.intern(st.ColumnRaw(11))
	r.RetryAt = timeColumn(st, 12)
	kind, err := parseWaitKind(st.ColumnRaw(13))
	if err != nil {
		return fmt.Errorf("read task %q: %w", r.ID, err)
	}
	r.Waiting = stored(kind, l.intern(st.ColumnRaw(14)), r.RetryAt)
	r.Paused, r.NotNeeded = st.ColumnBool(15), st.ColumnBool(16)
	return nil
}

// intColumn returns column i as an *int, nil for NULL.
func intColumn(st *sqlitec.Stmt, i int) *int {
	if st.ColumnNull(i) {
		return nil
	}
	v := int(st.ColumnInt64(i))
	return &v
}

// timeColumn returns column i, nanoseconds since the epoch, as a time;
// zero for NULL.
func timeColumn(st *sqlitec.Stmt, i int) time.Time {
	if st.ColumnNull(i) {
		return time.Time{}
	}
	return time.Unix(0, st.ColumnInt64(i))
}

// loadAttempts completes the rows out, byID their indexes by id, with
// their attempts, handles, artifacts and inputs (whereTask and args: of
// one task only).
func (s *SQLite) loadAttempts(out []Row, byID map[string]int, whereTask string, args []any) ([]Row, error) {
	if len(out) == 0 {
		return nil, nil // no task, so no attempts or artifacts (foreign keys)
	}
	l := s.lite
	err := l.query(attemptSelect+whereTask+" ORDER BY task_id, number", args, func(st *sqlitec.Stmt) error {
		i, ok := byID[string(st.ColumnRaw(0))]
		a := task.Attempt{Number: int(st.ColumnInt64(1))}
		gpus := st.ColumnRaw(24)
		cards, err := splitInts(string(gpus))
		if err != nil {
			return fmt.Errorf("task %s attempt %d: gpus %q: %w", st.ColumnText(0), a.Number, gpus, err)
		}
		if !ok {
			return nil // foreign keys forbid this; skip rather than fail a reader
		}
		a.GPUs = cards
		a.Start = time.Unix(0, st.ColumnInt64(2))
		a.End = timeColumn(st, 3)
		a.ExitCode = intColumn(st, 4)
		a.Signal = l.intern(st.ColumnRaw(5))
		a.TimedOut, a.Cancelled, a.Interrupted = st.ColumnBool(6), st.ColumnBool(7), st.ColumnBool(8)
		a.Error = l.intern(st.ColumnRaw(9))
		a.LogPath = s.absLog(st.ColumnText(10))
		a.PID = int(st.ColumnInt64(11))
		h := executor.Handle{Executor: l.intern(st.ColumnRaw(12)), Version: int(st.ColumnInt64(13)), Data: st.ColumnBytes(14)}
		a.GPU = intColumn(st, 15)
		a.GPUUUID = l.intern(st.ColumnRaw(16))
		a.MemRequestedMiB, a.MemPeakMiB = st.ColumnInt64(17), st.ColumnInt64(18)
		a.ReadyAt = timeColumn(st, 19)
		a.NotCharged, a.Adopted = st.ColumnBool(20), st.ColumnBool(21)
		a.EndReason = l.intern(st.ColumnRaw(22))
		if job := st.ColumnRaw(23); len(job) > 0 {
			// A job that does not read is left out: it only informs.
			var j task.RemoteJob
			if json.Unmarshal(job, &j) == nil {
				a.Job = &j
			}
		}
		a.HostMemRequestedMiB, a.RSSPeakMiB = st.ColumnInt64(25), st.ColumnInt64(26)
		r := &out[i]
		r.Attempts = append(r.Attempts, a)
		if !h.IsZero() {
			if r.Handles == nil {
				r.Handles = map[int]executor.Handle{}
			}
			r.Handles[a.Number] = h
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read attempts from state db %s: %w", s.path, err)
	}
	err = s.readFiles("artifacts", whereTask, args, func(id []byte, f task.Artifact) {
		if i, ok := byID[string(id)]; ok {
			out[i].Artifacts = append(out[i].Artifacts, f)
		}
	})
	if err != nil {
		return nil, err
	}
	// Paths sort as Go strings do (SQLite's BINARY collation compares
	// bytes): the order artifact.InputsChanged reads them in.
	err = s.readFiles("inputs", whereTask, args, func(id []byte, f task.Artifact) {
		if i, ok := byID[string(id)]; ok {
			out[i].Inputs = append(out[i].Inputs, task.Input(f))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bySeq orders rows by submission: seq, then id.
func bySeq(a, b *Row) int {
	return cmp.Or(cmp.Compare(a.Seq, b.Seq), strings.Compare(a.ID, b.ID))
}

// readFiles reads the rows of table (artifacts or inputs: a task's files,
// with the same columns), in task and path order, handing each to add
// with its task's id (valid only during the call).
func (s *SQLite) readFiles(table, whereTask string, args []any, add func(id []byte, f task.Artifact)) error {
	err := s.lite.query("SELECT task_id, path, size, mtime, sha256 FROM "+table+whereTask+" ORDER BY task_id, path", args, func(st *sqlitec.Stmt) error {
		add(st.ColumnRaw(0), task.Artifact{Path: st.ColumnText(1), Size: st.ColumnInt64(2), ModTime: time.Unix(0, st.ColumnInt64(3)), SHA256: st.ColumnText(4)})
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s from state db %s: %w", table, s.path, err)
	}
	return nil
}
