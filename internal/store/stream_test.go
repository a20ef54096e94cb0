package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/sqlitec"
	"github.com/gpusched/gpusched/internal/task"
)

// streamRows returns n pending task rows, task-000000 on, their waiting
// reason blank until filled in.
func streamRows(n int) []TaskWrite {
	rows := make([]TaskWrite, n)
	for i := range rows {
		rows[i].ID = fmt.Sprintf("task-%06d", i)
	}
	return rows
}

// fill fills row i in, as the engine's admission would.
func fill(rows []TaskWrite, i int) {
	w := &rows[i]
	*w = TaskWrite{ID: w.ID, Seq: int64(i), Kind: "command", Spec: []byte(`{"id":"` + w.ID + `"}`), State: task.Pending,
		Submitted: time.Unix(1_700_000_000, 0), WaitKind: task.WaitDependencies, WaitDetail: fmt.Sprint("row ", i)}
}

// streamers returns each store that streams, new and empty.
func streamers(t *testing.T) map[string]Streamer {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return map[string]Streamer{"sqlite": s, "memory": NewMemory()}
}

func TestStreamCommitsRowsAndTheRestOfTheBatch(t *testing.T) {
	for name, s := range streamers(t) {
		t.Run(name, func(t *testing.T) { testStreamCommits(t, s) })
	}
}

func testStreamCommits(t *testing.T, s Streamer) {
	// A task written before, whose stale reason the batch clears, and one
	// whose row the batch rewrites after the stream's.
	if err := s.Apply(&Batch{Tasks: []TaskWrite{
		{ID: "old", Kind: "command", Spec: []byte(`{}`), State: task.Pending, WaitKind: task.WaitSlot},
	}}); err != nil {
		t.Fatal(err)
	}
	const n = 1000 // three whole statements and a part
	b := &Batch{Tasks: append([]TaskWrite{{ID: "before", Kind: "command", Spec: []byte(`{}`), State: task.Complete}}, streamRows(n)...)}
	st := s.StreamTasks(b.Tasks[1 : 1+n])
	for i := range n {
		fill(b.Tasks[1:], i)
		st.Fill(i + 1)
	}
	// Written after the stream's rows: a later write of one of them,
	// wins; and the rest of a batch.
	b.Tasks = append(b.Tasks, TaskWrite{ID: "task-000007", Seq: 7, Kind: "command", State: task.Running})
	b.ClearWaitingOf = []string{"old"}
	b.Meta = map[string]string{"k": "v"}
	if err := st.Commit(b, 1); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Row{}
	for _, r := range rows {
		got[r.ID] = r
	}
	if len(got) != n+2 {
		t.Fatalf("%d rows, want %d", len(got), n+2)
	}
	for i := range n {
		r := got[fmt.Sprintf("task-%06d", i)]
		want := task.Pending
		if i == 7 {
			want = task.Running
		}
		if r.State != want || r.Seq != int64(i) || string(r.Spec) != `{"id":"`+r.ID+`"}` {
			t.Fatalf("row %d: %+v, want state %s, its seq and definition", i, r, want)
		}
		if i != 7 && (r.Waiting.Kind != task.WaitDependencies || r.Waiting.Detail != fmt.Sprint("row ", i)) {
			t.Fatalf("row %d waits %+v", i, r.Waiting)
		}
	}
	if got["before"].State != task.Complete || got["old"].Waiting.Waiting() {
		t.Fatalf("the batch's other rows: before %s, old waits %+v", got["before"].State, got["old"].Waiting)
	}
	if v, ok, err := s.LookupMeta("k"); err != nil || !ok || v != "v" {
		t.Fatalf("meta k = %q, %v, %v", v, ok, err)
	}
	if l, ok := s.(*SQLite); ok {
		// The commit's checkpoint runs beside it; later commits
		// checkpoint as before.
		var v string
		if err := l.lite.query("PRAGMA wal_autocheckpoint", nil, func(st *sqlitec.Stmt) error { v = st.ColumnText(0); return nil }); err != nil {
			t.Fatal(err)
		}
		if v != fmt.Sprint(walPages) {
			t.Errorf("PRAGMA wal_autocheckpoint = %s after a stream; want the writer's %d again", v, walPages)
		}
	}
}

func TestStreamRolledBackLeavesNothing(t *testing.T) {
	for name, s := range streamers(t) {
		t.Run(name, func(t *testing.T) { testStreamRolledBack(t, s) })
	}
}

func testStreamRolledBack(t *testing.T, s Streamer) {
	rows := streamRows(600)
	st := s.StreamTasks(rows)
	for i := range rows {
		fill(rows, i)
		st.Fill(i + 1)
	}
	st.Rollback()
	// Refused: a batch that clears every reason after the rows.
	rows = streamRows(600)
	st = s.StreamTasks(rows)
	for i := range rows {
		fill(rows, i)
		st.Fill(i + 1)
	}
	if err := st.Commit(&Batch{Tasks: rows, ClearWaiting: true}, 0); !errors.Is(err, errStreamBatch) {
		t.Fatalf("commit with ClearWaiting: %v, want errStreamBatch", err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("%d rows after two streams that ended without a commit", len(got))
	}
	// The store is usable again.
	if err := s.Apply(&Batch{Tasks: []TaskWrite{{ID: "a", Kind: "command", Spec: []byte(`{}`), State: task.Pending}}}); err != nil {
		t.Fatal(err)
	}
}

// A prefix committed mid-stream is durable on its own, before the stream
// ends and whatever its end: a reader sees its rows and its own writes,
// and none of the rows after it; Commit then adds the rest, and Rollback
// leaves the prefix as it was committed.
func TestStreamCommitPrefix(t *testing.T) {
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := OpenSQLite(path, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const n, k = 1000, 300 // the prefix: rows[:k], not a whole statement's
			b := &Batch{Tasks: streamRows(n)}
			st := s.StreamTasks(b.Tasks)
			for i := range k {
				fill(b.Tasks, i)
				st.Fill(i + 1)
			}
			started := TaskWrite{ID: "task-000005", Seq: 5, Kind: "command", State: task.Running}
			att := AttemptWrite{TaskID: "task-000005", Attempt: task.Attempt{Number: 1, Start: time.Unix(1_700_000_001, 0)}}
			if err := st.CommitPrefix(k, &Batch{Tasks: []TaskWrite{started}, Attempts: []AttemptWrite{att}}); err != nil {
				t.Fatal(err)
			}
			// Another reader, while the stream goes on.
			r, err := OpenSQLiteReadOnly(path, "")
			if err != nil {
				t.Fatal(err)
			}
			rows, err := r.Load()
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != k {
				t.Fatalf("a reader sees %d rows after the prefix, want %d", len(rows), k)
			}
			for _, row := range rows {
				want := task.Pending
				if row.ID == "task-000005" {
					want = task.Running
					if len(row.Attempts) != 1 {
						t.Errorf("the started task has %d attempts, want 1", len(row.Attempts))
					}
				}
				if row.State != want {
					t.Errorf("%s is %s, want %s", row.ID, row.State, want)
				}
			}
			for i := k; i < n; i++ {
				fill(b.Tasks, i)
				st.Fill(i + 1)
			}
			want := n
			if end == "commit" {
				if err := st.Commit(b, 0); err != nil {
					t.Fatal(err)
				}
			} else {
				st.Rollback()
				want = k
			}
			rows, err = s.Load()
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != want {
				t.Fatalf("%d rows after the %s, want %d", len(rows), end, want)
			}
			for _, row := range rows {
				if row.ID == "task-000005" && (row.State != task.Running || len(row.Attempts) != 1) {
					t.Errorf("the started task is %s with %d attempts after the %s: the stream's end wrote over its start", row.State, len(row.Attempts), end)
				}
			}
		})
	}
}

// A prefix shorter than what was filled, or one that clears waiting
// reasons, is refused, and the stream goes on.
func TestStreamCommitPrefixRefused(t *testing.T) {
	for name, s := range streamers(t) {
		t.Run(name, func(t *testing.T) {
			b := &Batch{Tasks: streamRows(600)}
			st := s.StreamTasks(b.Tasks)
			for i := range 600 {
				fill(b.Tasks, i)
				st.Fill(i + 1)
			}
			if err := st.CommitPrefix(10, &Batch{}); !errors.Is(err, errStreamPrefix) {
				t.Errorf("a prefix shorter than what was filled: %v", err)
			}
			if err := st.CommitPrefix(600, &Batch{ClearWaiting: true}); !errors.Is(err, errStreamPrefix) {
				t.Errorf("a prefix that clears every reason: %v", err)
			}
			if err := st.Commit(b, 0); err != nil {
				t.Fatal(err)
			}
			rows, err := s.Load()
			if err != nil || len(rows) != 600 {
				t.Fatalf("%d rows, %v; want 600", len(rows), err)
			}
		})
	}
}
