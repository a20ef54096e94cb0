package store

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/sqlitec"
	"github.com/gpusched/gpusched/internal/task"
)

// manyRows returns n tasks whose every column differs from task to task
// (and from column to column), each with an attempt of its own likewise,
// some with artifacts and inputs, and the rows Load must give back.
func manyRows(n int) (*Batch, []Row) {
	at := time.Unix(1_700_000_000, 0)
	b := &Batch{}
	var want []Row
	for i := range n {
		id := fmt.Sprintf("t%05d", i)
		code, gpu := i%7, i%3
		w := TaskWrite{ID: id, Seq: int64(i), Kind: []string{"command", "shell"}[i%2], Spec: fmt.Appendf(nil, `{"id":%q}`, id),
			State: task.State(i % 6), ExitCode: &code, Error: fmt.Sprintf("error %d", i%5), BlockedBy: fmt.Sprintf("t%05d", i/2),
			GPURequestMiB: int64(i), Submitted: at.Add(time.Duration(i)), Fingerprint: fmt.Sprintf("fp%d", i),
			Rerun: fmt.Sprintf("rerun %d", i%4), RetryAt: at.Add(time.Duration(2*i + 1)), WaitKind: task.WaitRetryDelay,
			WaitDetail: fmt.Sprintf("detail %d", i%9), Paused: i%2 == 0, NotNeeded: i%3 == 0}
		a := task.Attempt{Number: 1 + i%2, Start: at.Add(time.Duration(3 * i)), End: at.Add(time.Duration(3*i + 1)), ExitCode: &code,
			Signal: fmt.Sprintf("SIG%d", i%3), TimedOut: i%2 == 1, Cancelled: i%3 == 1, Interrupted: i%5 == 1, NotCharged: i%7 == 1,
			Adopted: i%11 == 1, EndReason: fmt.Sprintf("reason %d", i%3), Error: fmt.Sprintf("attempt error %d", i),
			LogPath: "/run/logs/" + id + "/attempt.log", PID: 1000 + i, GPU: &gpu, GPUs: []int{gpu, gpu + 1}, GPUUUID: "GPU-" + id,
			MemRequestedMiB: int64(10 + i), MemPeakMiB: int64(20 + i), HostMemRequestedMiB: int64(30 + i), RSSPeakMiB: int64(40 + i),
			ReadyAt: at.Add(time.Duration(3*i - 1)), Job: &task.RemoteJob{System: "Slurm", ID: fmt.Sprint(i)}}
		h := executor.Handle{Executor: "local", Version: 1 + i%2, Data: fmt.Appendf(nil, `{"pid":%d}`, 1000+i)}
		row := Row{Seq: w.Seq, Spec: w.Spec, GPURequestMiB: w.GPURequestMiB, Fingerprint: w.Fingerprint, Kind: w.Kind,
			Record: task.Record{ID: id, State: w.State, Paused: w.Paused, NotNeeded: w.NotNeeded, Attempts: []task.Attempt{a},
				ExitCode: w.ExitCode, Error: w.Error, BlockedBy: w.BlockedBy, Submitted: w.Submitted, RetryAt: w.RetryAt, Rerun: w.Rerun,
				Waiting: task.WaitReason{Kind: w.WaitKind, Detail: w.WaitDetail, Until: w.RetryAt}},
			Handles: map[int]executor.Handle{a.Number: h}}
		if i%100 == 0 {
			for j := range 300 {
				f := task.Artifact{Path: fmt.Sprintf("out/%s/%03d", id, j), Size: int64(j), ModTime: at.Add(time.Duration(j)), SHA256: fmt.Sprint(j)}
				w.Artifacts = append(w.Artifacts, f)
				row.Inputs = append(row.Inputs, task.Input(f))
			}
			w.ArtifactsSet = true
			row.Artifacts = w.Artifacts
			b.Inputs = append(b.Inputs, InputsWrite{TaskID: id, Inputs: row.Inputs})
		}
		b.Tasks = append(b.Tasks, w)
		b.Attempts = append(b.Attempts, AttemptWrite{TaskID: id, Attempt: a, Handle: h})
		want = append(want, row)
	}
	return b, want
}

// Every column of every row reads back as written, across the multi-row
// statements' chunks and the rows left after the last whole chunk.
func TestSQLiteRoundTripAcrossChunks(t *testing.T) {
	for _, n := range []int{1, chunk - 1, chunk, 2*chunk + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "/run")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			b, want := manyRows(n)
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("Load gave %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
			last := want[n-1]
			row, ok, err := s.LookupTask(last.ID)
			if err != nil || !ok || !reflect.DeepEqual(row, last) {
				t.Errorf("LookupTask(%s) = %+v, %v, %v; want %+v", last.ID, row, ok, err, last)
			}
		})
	}
}

// A transaction that fails part-way writes nothing, and the store goes on
// writing afterwards.
func TestSQLiteApplyAllOrNothing(t *testing.T) {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "/run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _ := manyRows(chunk + 1)
	// An attempt of a task never written fails the foreign key, after
	// every task row is written.
	b.Attempts = append(b.Attempts, AttemptWrite{TaskID: "nobody", Attempt: task.Attempt{Number: 1}})
	if err := s.Apply(b); err == nil {
		t.Fatal("Apply of an attempt of no task succeeded")
	}
	if rows, err := s.Load(); err != nil || len(rows) != 0 {
		t.Fatalf("after the failed Apply: %d rows, %v; want none", len(rows), err)
	}
	b.Attempts = b.Attempts[:len(b.Attempts)-1]
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	if rows, err := s.Load(); err != nil || len(rows) != chunk+1 {
		t.Fatalf("after Apply: %d rows, %v; want %d", len(rows), err, chunk+1)
	}
}

// A reader in another goroutine (a daemon's handler) may use the store
// while the engine's loop writes: the raw connection, opened without
// SQLite's mutex, is guarded by the store's.
func TestSQLiteReadWhileWriting(t *testing.T) {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "/run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _ := manyRows(20)
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		for i := range 200 {
			w := b.Tasks[i%len(b.Tasks)]
			w.Spec, w.Error = nil, fmt.Sprint("turn ", i)
			if err := s.Apply(&Batch{Tasks: []TaskWrite{w}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range 200 {
		rows, err := s.Load()
		if err != nil || len(rows) != 20 {
			t.Fatalf("Load %d: %d rows, %v", i, len(rows), err)
		}
		if _, ok, err := s.LookupTask(rows[i%20].ID); !ok || err != nil {
			t.Fatalf("LookupTask %d: %v, %v", i, ok, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The raw connection has the store's settings: those of a writer, and
// for a reader a wait for the writer's locks.
func TestLiteSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenSQLite(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pragma := func(s *SQLite, name string) string {
		t.Helper()
		var v string
		err := s.lite.query("PRAGMA "+name, nil, func(st *sqlitec.Stmt) error {
			v = st.ColumnText(0)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1", "busy_timeout": "10000",
		"temp_store": "2", "cache_size": fmt.Sprint(-cacheKiB), "wal_autocheckpoint": fmt.Sprint(walPages)}
	for name, v := range want {
		if got := pragma(s, name); got != v {
			t.Errorf("writer: PRAGMA %s = %s, want %s", name, got, v)
		}
	}
	r, err := OpenSQLiteReadOnly(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := pragma(r, "busy_timeout"); got != "10000" {
		t.Errorf("reader: PRAGMA busy_timeout = %s, want 10000", got)
	}
	if err := r.Apply(&Batch{Meta: map[string]string{"k": "v"}}); err == nil {
		t.Error("Apply on a read-only store succeeded")
	}
	if err := r.lite.c.Exec("INSERT INTO meta (key, value) VALUES ('k', 'v')"); err == nil {
		t.Error("the reader's raw connection wrote")
	}
}
