package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpusched/gpusched/internal/sqlitec"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrCorrupt is returned when the state database is damaged: its pages do
// not hold together (SQLite's quick_check fails, or a read meets a
// malformed page). Opening for writing refuses such a file and writes
// nothing to it.
var ErrCorrupt = errors.New("state database is damaged")

// CorruptError names a damaged state database and what showed it. It
// matches ErrCorrupt, and unwraps to SQLite's error when a read failed.
type CorruptError struct {
	Path   string
	Detail string // "quick_check: ..." or SQLite's message
	Err    error  // SQLite's error, if one showed the damage
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("state database %s is damaged (%s); move it and its -wal and -shm files aside to start afresh, or restore a backup", e.Path, e.Detail)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns SQLite's error, or nil.
func (e *CorruptError) Unwrap() error { return e.Err }

// sqliteCode returns SQLite's primary result code in err's chain, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	var le *sqlitec.Error
	if errors.As(err, &le) {
		return le.Code & 0xff
	}
	return 0
}

// corrupt turns an error that shows a damaged database into a
// *CorruptError, and returns any other error unchanged.
func (s *SQLite) corrupt(err error) error {
	if err == nil || sqliteCode(err) != sqlite3.SQLITE_CORRUPT || errors.Is(err, ErrCorrupt) {
		return err
	}
	return &CorruptError{Path: s.path, Detail: message(err), Err: err}
}

// message returns SQLite's message in err's chain without its numeric
// code: "database disk image is malformed".
func message(err error) string {
	var le *sqlitec.Error
	if errors.As(err, &le) {
		return le.Msg
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	return strings.TrimSuffix(se.Error(), fmt.Sprintf(" (%d)", se.Code()))
}

// quickCheck runs SQLite's quick_check: every page of every table and
// index is read and its structure checked (not that indexes match their
// tables, which integrity_check adds for about 1.5 times the time on a
// 100,000-task database). It only reads.
func (s *SQLite) quickCheck() error {
	rows, err := s.db.Query(fmt.Sprintf("PRAGMA quick_check(%d)", maxFindings))
	if err != nil {
		return s.corruptOr(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return s.corruptOr(err)
		}
		// One row may hold several findings, a line each, after a
		// "*** in database main ***" heading.
		for _, line := range strings.Split(msg, "\n") {
			if line = strings.TrimSpace(line); line != "ok" && line != "" && !strings.HasPrefix(line, "***") {
				problems = append(problems, line)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return s.corruptOr(err)
	}
	if len(problems) == 0 {
		return nil
	}
	return &CorruptError{Path: s.path, Detail: "quick_check: " + summarize(problems)}
}

// corruptOr reports a failed quick_check: as damage when SQLite says so,
// else as the error it is.
func (s *SQLite) corruptOr(err error) error {
	if sqliteCode(err) == sqlite3.SQLITE_CORRUPT {
		return &CorruptError{Path: s.path, Detail: "quick_check: " + message(err), Err: err}
	}
	return fmt.Errorf("check state db %s: %w", s.path, err)
}

// maxFindings is how many problems quick_check reports before it stops.
const maxFindings = 8

// summarize makes quick_check's findings one short line: the first one,
// and how many more.
func summarize(problems []string) string {
	first := strings.Join(strings.Fields(problems[0]), " ")
	const most = 160
	if r := []rune(first); len(r) > most {
		first = string(r[:most]) + "…"
	}
	if n := len(problems) - 1; n > 0 {
		more := fmt.Sprintf("and %d more", n)
		if len(problems) >= maxFindings {
			more = fmt.Sprintf("and at least %d more", n) // quick_check stops there
		}
		first += " (" + more + ")"
	}
	return first
}
