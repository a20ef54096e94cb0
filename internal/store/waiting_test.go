package store

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// A waiting reason is read back as written, its Until being the task's
// RetryAt for the kinds that wait for one; a whole-row write without one
// removes it; ClearWaiting forgets every stored reason, before the
// batch's own writes.
func TestWaitingRoundTrip(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"sqlite": func(t *testing.T) Store {
			s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "")
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			retryAt := time.Unix(1700000100, 0)
			w := func(id string, seq int64, wr task.WaitReason) TaskWrite {
				tw := TaskWrite{ID: id, Seq: seq, Kind: "command", Spec: []byte(`{}`), State: task.Pending, WaitKind: wr.Kind, WaitDetail: wr.Detail}
				if wr.Kind == task.WaitRetryDelay {
					tw.RetryAt = retryAt
				}
				return tw
			}
			deps := task.WaitReason{Kind: task.WaitDependencies, Detail: "prep, fetch"}
			gpuWait := task.WaitReason{Kind: task.WaitGPUMemory, Detail: "needs 24000 MiB; best card 1 has 5047 MiB left"}
			retry := task.WaitReason{Kind: task.WaitRetryDelay, Detail: "exit code 1"}
			if err := s.Apply(&Batch{Tasks: []TaskWrite{w("a", 1, deps), w("b", 2, gpuWait), w("c", 3, retry), w("d", 4, task.WaitReason{})}}); err != nil {
				t.Fatal(err)
			}
			want := map[string]task.WaitReason{
				"a": deps,
				"b": {Kind: task.WaitGPUMemory, Detail: gpuWait.Detail},
				"c": {Kind: task.WaitRetryDelay, Detail: "exit code 1", Until: retryAt},
				"d": {},
			}
			check := func(when string, want map[string]task.WaitReason) {
				t.Helper()
				rows, err := s.Load()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					if !r.Waiting.Until.Equal(want[r.ID].Until) || r.Waiting.Kind != want[r.ID].Kind || r.Waiting.Detail != want[r.ID].Detail {
						t.Errorf("%s: %s waits %+v, want %+v", when, r.ID, r.Waiting, want[r.ID])
					}
				}
			}
			check("written", want)

			// a starts: a whole-row write without a reason clears it.
			run := w("a", 1, task.WaitReason{})
			run.State, run.Spec = task.Running, nil
			if err := s.Apply(&Batch{Tasks: []TaskWrite{run}}); err != nil {
				t.Fatal(err)
			}
			want["a"] = task.WaitReason{}
			check("after a started", want)

			// A new scheduler forgets the reasons, then decides b's again.
			slot := task.WaitReason{Kind: task.WaitSlot}
			again := w("b", 2, slot)
			again.Spec = nil
			if err := s.Apply(&Batch{ClearWaiting: true, Tasks: []TaskWrite{again}}); err != nil {
				t.Fatal(err)
			}
			check("after ClearWaiting", map[string]task.WaitReason{"b": slot})
		})
	}
}

// A run directory written at schema version 6, with pending tasks: a
// reader refuses it until a writer upgrades it; then its tasks have no
// waiting reason (no scheduler has decided about them since), and new
// writes keep theirs.
func TestSQLiteMigratesFromVersion6(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	execSQL(t, path, strings.Join(migrations[:6], ";\n")+fmt.Sprintf("; PRAGMA application_id=%d; PRAGMA user_version=6;", ApplicationID)+
		`INSERT INTO tasks (id, seq, kind, spec, state, updated_at, retry_at) VALUES ('old', 1, 'command', '{"id":"old"}', 'pending', 0, 1700000000000000000);
		INSERT INTO tasks (id, seq, kind, spec, state, updated_at) VALUES ('next', 2, 'command', '{"id":"next"}', 'pending', 0);`)

	if r, err := OpenSQLiteReadOnly(path, dir); err == nil {
		r.Close()
		t.Fatal("a reader opened a version 6 database")
	} else if !strings.Contains(err.Error(), "schema version 6 is older") {
		t.Errorf("reader's error = %v", err)
	}
	s, err := OpenSQLite(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != "old" || rows[0].RetryAt.IsZero() || rows[0].Waiting.Waiting() || rows[1].Waiting.Waiting() {
		t.Fatalf("rows after migration = %+v", rows)
	}
	deps := task.WaitReason{Kind: task.WaitDependencies, Detail: "old"}
	if err := s.Apply(&Batch{Tasks: []TaskWrite{{ID: "next", Seq: 2, Kind: "command", State: task.Pending, WaitKind: deps.Kind, WaitDetail: deps.Detail}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := OpenSQLiteReadOnly(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rows, err = ro.Load()
	if err != nil || len(rows) != 2 || rows[1].Waiting != deps || string(rows[1].Spec) != `{"id":"next"}` {
		t.Errorf("reader's rows = %+v, %v", rows, err)
	}
}

// CountWaiting counts the pending tasks by the kind of their reason; the
// others do not count.
func TestCountWaiting(t *testing.T) {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b Batch
	for i, k := range []task.WaitKind{task.WaitSlot, task.WaitSlot, task.WaitGPUMemory, task.WaitDependencies, task.NotWaiting} {
		b.Tasks = append(b.Tasks, TaskWrite{ID: fmt.Sprint("p", i), Seq: int64(i), State: task.Pending, WaitKind: k})
	}
	b.Tasks = append(b.Tasks, TaskWrite{ID: "done", Seq: 9, State: task.Complete})
	if err := s.Apply(&b); err != nil {
		t.Fatal(err)
	}
	got, err := s.CountWaiting()
	want := map[task.WaitKind]int{task.WaitSlot: 2, task.WaitGPUMemory: 1, task.WaitDependencies: 1, task.NotWaiting: 1}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("CountWaiting = %v, %v; want %v", got, err, want)
	}
}

// While MetaWaitingStale is set, readers see no waiting reason (Load,
// LookupTask, CountWaiting) though the rows still hold them; ClearWaitingOf
// forgets the reasons of the tasks it names and no other's, beside the
// batch's own writes, and with the mark removed the reasons left are read
// again.
func TestStaleWaitingHiddenThenForgotten(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"sqlite": func(t *testing.T) Store {
			s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "")
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			deps := task.WaitReason{Kind: task.WaitDependencies, Detail: "a"}
			slot := task.WaitReason{Kind: task.WaitSlot}
			w := func(id string, seq int64, wr task.WaitReason) TaskWrite {
				return TaskWrite{ID: id, Seq: seq, Kind: "command", Spec: []byte(`{}`), State: task.Pending, WaitKind: wr.Kind, WaitDetail: wr.Detail}
			}
			if err := s.Apply(&Batch{Tasks: []TaskWrite{w("a", 1, slot), w("b", 2, deps), w("c", 3, deps)}}); err != nil {
				t.Fatal(err)
			}
			check := func(when string, want map[string]task.WaitReason) {
				t.Helper()
				rows, err := s.Load()
				if err != nil || len(rows) != 3 {
					t.Fatalf("%s: Load = %d rows, %v", when, len(rows), err)
				}
				for _, r := range rows {
					if r.Waiting != want[r.ID] {
						t.Errorf("%s: Load: %s waits %+v, want %+v", when, r.ID, r.Waiting, want[r.ID])
					}
					one, ok, err := s.LookupTask(r.ID)
					if err != nil || !ok || one.Waiting != want[r.ID] {
						t.Errorf("%s: LookupTask(%s) waits %+v (%v, %v), want %+v", when, r.ID, one.Waiting, ok, err, want[r.ID])
					}
				}
				if c, ok := s.(interface {
					CountWaiting() (map[task.WaitKind]int, error)
				}); ok {
					wantCount := map[task.WaitKind]int{}
					for _, id := range []string{"a", "b", "c"} {
						wantCount[want[id].Kind]++ // NotWaiting for those without one
					}
					if got, err := c.CountWaiting(); err != nil || !maps.Equal(got, wantCount) {
						t.Errorf("%s: CountWaiting = %v, %v; want %v", when, got, err, wantCount)
					}
				}
			}
			check("written", map[string]task.WaitReason{"a": slot, "b": deps, "c": deps})
			if err := s.Apply(&Batch{Meta: map[string]string{MetaWaitingStale: "1"}}); err != nil {
				t.Fatal(err)
			}
			check("marked stale", map[string]task.WaitReason{})
			// a is decided again; b is forgotten; c is neither: a reader
			// would see its stale reason if the batch did not also keep
			// the mark, which it removes here on purpose to show it.
			again := w("a", 1, deps)
			again.Spec = nil
			if err := s.Apply(&Batch{Tasks: []TaskWrite{again}, ClearWaitingOf: []string{"b", "nope"}, Meta: map[string]string{MetaWaitingStale: ""}}); err != nil {
				t.Fatal(err)
			}
			check("after ClearWaitingOf", map[string]task.WaitReason{"a": deps, "c": deps})
		})
	}
}
