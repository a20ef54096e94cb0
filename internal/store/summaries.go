package store

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Summary is what a listing shows of a finished task: its record without
// its definition, artifacts or handles, and of its attempts only how many
// there are and the last one's number, start, end and card.
type Summary struct {
	ID        string
	State     task.State
	ExitCode  *int
	Error     string
	BlockedBy string
	// NotNeeded: blocked as not needed (task.Record.NotNeeded).
	NotNeeded bool
	Submitted time.Time
	Attempts  int
	// Last is the last attempt (Number, Start, End, GPU, GPUs set); nil when
	// none ran.
	Last *task.Attempt
}

// summaryByScan is the number of ids above which FinishedSummaries reads
// every finished task in one scan rather than the ids one lookup each.
const summaryByScan = 256

// FinishedSummaries reads the summaries of the finished tasks (complete,
// failed, blocked, cancelled) among ids, in one read transaction; ids that
// are not stored or not finished are absent. Few ids are read by key, many
// by one scan of the finished tasks: either way one call, whatever their
// number, so a listing never reads task by task.
func (s *SQLite) FinishedSummaries(ids []string) ([]Summary, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	tx, err := s.db.Begin() // one read transaction: a consistent snapshot
	if err != nil {
		return nil, s.corrupt(fmt.Errorf("read state db %s: %w", s.path, err))
	}
	defer tx.Rollback()
	const q = `SELECT t.id, t.state, ` + summaryColumns + summaryFrom + `
		WHERE t.state IN ('complete', 'failed', 'blocked', 'cancelled')`
	var out []Summary
	if len(ids) > summaryByScan {
		want := make(map[string]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		if out, err = s.scanSummaries(tx, q, nil, want, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	in := " AND t.id IN (?" + strings.Repeat(", ?", len(ids)-1) + ")"
	return s.scanSummaries(tx, q+in, args, nil, out)
}

// scanSummaries appends the rows of query q (with args) to out, only
// those of ids in want unless want is nil.
func (s *SQLite) scanSummaries(tx *sql.Tx, q string, args []any, want map[string]bool, out []Summary) ([]Summary, error) {
	rows, err := tx.Query(q, args...)
	if err != nil {
		return nil, s.corrupt(fmt.Errorf("read task summaries from state db %s: %w", s.path, err))
	}
	defer rows.Close()
	for rows.Next() {
		var r Summary
		var state string
		var exit, submitted, number, start, end, gpu sql.NullInt64
		var gpus sql.NullString
		if err := rows.Scan(&r.ID, &state, &exit, &r.Error, &r.BlockedBy, &r.NotNeeded, &submitted, &r.Attempts, &number, &start, &end, &gpu, &gpus); err != nil {
			return nil, s.corrupt(fmt.Errorf("read task summaries from state db %s: %w", s.path, err))
		}
		if want != nil && !want[r.ID] {
			continue
		}
		if r.State, err = task.ParseState(state); err != nil {
			return nil, fmt.Errorf("read task %q from state db %s: %w", r.ID, s.path, err)
		}
		r.fill(exit, submitted, number, start, end, gpu, gpus)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.corrupt(fmt.Errorf("read task summaries from state db %s: %w", s.path, err))
	}
	return out, nil
}

// A summary's columns after the task's id and state, and the tables they
// come from: the task, its attempts counted, and its last attempt.
const (
	summaryColumns = `t.exit_code, t.error, t.blocked_by, t.not_needed, t.submitted_at,
		(SELECT COUNT(*) FROM attempts c WHERE c.task_id = t.id), a.number, a.started_at, a.ended_at, a.gpu, a.gpus`
	summaryFrom = `
		FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
			AND a.number = (SELECT MAX(number) FROM attempts m WHERE m.task_id = t.id)`
)

// fill sets the summary's fields read as summaryColumns (besides error,
// blocked_by, not_needed and the count, scanned in place).
func (r *Summary) fill(exit, submitted, number, start, end, gpu sql.NullInt64, gpus sql.NullString) {
	r.ExitCode = nullInt(exit)
	if submitted.Valid {
		r.Submitted = time.Unix(0, submitted.Int64)
	}
	if number.Valid {
		a := &task.Attempt{Number: int(number.Int64), Start: time.Unix(0, start.Int64), GPU: nullInt(gpu)}
		if end.Valid {
			a.End = time.Unix(0, end.Int64)
		}
		// A list that does not read (never written so) only loses the
		// summary its other cards: the first is in gpu.
		a.GPUs, _ = splitInts(gpus.String)
		r.Last = a
	}
}
