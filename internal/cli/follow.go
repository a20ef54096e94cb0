package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// followPoll is how often "gpusched logs -f" looks for more output and at
// the task's state.
const followPoll = 150 * time.Millisecond

// followLog is "gpusched logs -f": it prints attempt from's log (0: the
// last attempt, or the first one to start), then what is written to it as
// it runs, like tail -f; when the attempt ends and the task runs again, it
// goes on with the next attempt's log after a line "--- attempt N ---". It
// returns once the task is complete, failed, blocked or cancelled, or no
// scheduler uses the run directory, with the rest of the log printed.
func followLog(ctx context.Context, w io.Writer, dir, id string, from int) error {
	rows, err := loadRows(dir)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rows, func(r store.Row) bool { return r.ID == id })
	if i < 0 || from != 0 {
		if _, err := logPath(rows, id, from); err != nil {
			return err // no such task (did you mean...), or no such attempt
		}
	}
	st, err := store.OpenSQLiteReadOnly(filepath.Join(dir, gpusched.StateFile), dir)
	if err != nil {
		return err
	}
	defer st.Close()

	out := &lastByteWriter{w: w, last: '\n'}
	cur := from // the attempt being followed; 0 until one is known
	if cur == 0 && len(rows[i].Attempts) > 0 {
		cur = rows[i].LastAttempt().Number
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		// The state first, then the log: an attempt seen ended has all its
		// output in the file already.
		row, err := loadRow(st, id)
		if err != nil {
			return err
		}
		running := schedulerPID(dir) != 0
		if cur == 0 {
			if len(row.Attempts) > 0 {
				cur = row.Attempts[0].Number
			} else if row.State.Terminal() || !running {
				return fmt.Errorf("task %q has not started yet (state %s)", id, row.State)
			}
		}
		if cur > 0 {
			a := attemptOf(row, cur)
			if a == nil {
				return fmt.Errorf("task %q has no attempt %d any more", id, cur)
			}
			if f == nil {
				f, err = os.Open(a.LogPath)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("open log: %w", err)
				}
			}
			if f != nil {
				if _, err := io.Copy(out, f); err != nil {
					return err
				}
			}
			if a.Ended() || !running {
				if next := attemptOf(row, cur+1); next != nil {
					if out.last != '\n' {
						fmt.Fprintln(out)
					}
					fmt.Fprintf(out, "--- attempt %d ---\n", next.Number)
					cur = next.Number
					if f != nil {
						f.Close()
						f = nil
					}
					continue
				}
				if row.State.Terminal() || !running {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

func loadRow(st *store.SQLite, id string) (store.Row, error) {
	rows, err := st.Load()
	if err != nil {
		return store.Row{}, err
	}
	i := slices.IndexFunc(rows, func(r store.Row) bool { return r.ID == id })
	if i < 0 {
		return store.Row{}, fmt.Errorf("task %q is no longer in this run", id)
	}
	return rows[i], nil
}

func attemptOf(r store.Row, number int) *task.Attempt {
	for i := range r.Attempts {
		if r.Attempts[i].Number == number {
			return &r.Attempts[i]
		}
	}
	return nil
}

// lastByteWriter remembers the last byte written, so that a separator
// starts on a line of its own.
type lastByteWriter struct {
	w    io.Writer
	last byte
}

func (l *lastByteWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}
