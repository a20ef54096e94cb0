package store

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/gpusched/gpusched/internal/task"
)

// Brief is what a long-lived caller indexes of a stored task at start
// without decoding its whole definition (whose environment can be most of
// it): from the definition only its owner, payload as an argv, directory
// and dependencies; from its record, when it is finished, its Summary.
type Brief struct {
	// Summary holds the task's id and state; its other fields only when
	// the task is finished (complete, failed, blocked, cancelled).
	Summary
	Owner        string
	Argv         []string // the payload's strings when it is a list, else nil
	Dir          string
	Dependencies []string
}

// briefSpec is the part of a definition's JSON a Brief reads.
type briefSpec struct {
	Owner        string   `json:"owner"`
	Payload      any      `json:"payload"`
	Dir          string   `json:"dir"`
	Dependencies []string `json:"dependencies"`
}

// Briefs reads every stored task as a Brief, in submission order, in one
// query.
func (s *SQLite) Briefs() ([]Brief, error) {
	out, err := s.briefs()
	return out, s.corrupt(err)
}

func (s *SQLite) briefs() ([]Brief, error) {
	const q = `SELECT t.id, t.state, t.spec, ` + summaryColumns + summaryFrom + `
		ORDER BY t.seq, t.id`
	rows, err := s.db.Query(q)
	if err != nil {
		return nil, fmt.Errorf("read tasks from state db %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Brief
	for rows.Next() {
		var b Brief
		var state string
		var spec sql.RawBytes // valid until Next: decoded, never kept
		var exit, submitted, number, start, end, gpu sql.NullInt64
		var gpus sql.NullString
		if err := rows.Scan(&b.ID, &state, &spec, &exit, &b.Error, &b.BlockedBy, &b.NotNeeded, &submitted, &b.Attempts, &number, &start, &end, &gpu, &gpus); err != nil {
			return nil, fmt.Errorf("read tasks from state db %s: %w", s.path, err)
		}
		if b.State, err = task.ParseState(state); err != nil {
			return nil, fmt.Errorf("read task %q from state db %s: %w", b.ID, s.path, err)
		}
		var sp briefSpec
		if err := json.Unmarshal(spec, &sp); err != nil {
			return nil, fmt.Errorf("read task %q from state db %s: %w", b.ID, s.path, err)
		}
		b.Owner, b.Argv, b.Dir, b.Dependencies = sp.Owner, argv(sp.Payload), sp.Dir, sp.Dependencies
		if !b.State.Terminal() {
			b.Summary = Summary{ID: b.ID, State: b.State}
			out = append(out, b)
			continue
		}
		b.fill(exit, submitted, number, start, end, gpu, gpus)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tasks from state db %s: %w", s.path, err)
	}
	return out, nil
}

// argv returns the strings of a payload read back from JSON as a list.
func argv(payload any) []string {
	list, ok := payload.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
