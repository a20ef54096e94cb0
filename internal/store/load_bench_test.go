package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// BenchmarkLoad100k: reading back a run of 100,000 tasks, 20,000 of which
// ran once (what status, plan and a resumed run read first).
func BenchmarkLoad100k(b *testing.B) { benchmarkLoad100k(b, false) }

// BenchmarkLoad100kUnordered: the same, the rows written in another
// order than their submission numbers, as a run's rows are once the
// loop has written them (a third of them out of order in the run of
// bench/scale.sh), so that Load sorts them.
func BenchmarkLoad100kUnordered(b *testing.B) { benchmarkLoad100k(b, true) }

func benchmarkLoad100k(b *testing.B, unordered bool) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "/run")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := &Batch{}
	at := time.Unix(1_700_000_000, 0)
	for i := range 100_000 {
		id := fmt.Sprintf("task-%06d", i)
		seq := int64(i)
		if unordered && i%3 == 1 {
			seq = int64(i/3*3 + 2) // swapped with the next task's
		} else if unordered && i%3 == 2 && i/3*3+1 < 100_000 {
			seq = int64(i/3*3 + 1)
		}
		w := TaskWrite{ID: id, Seq: seq, Kind: "command", Submitted: at, Fingerprint: "f",
			Spec: fmt.Appendf(nil, `{"id":%q,"kind":"command","dependencies":["task-000001"],"payload":["true"],"priority":3}`, id), State: task.Pending}
		if i < 20_000 {
			w.State = task.Complete
			code := 0
			w.ExitCode = &code
			batch.Attempts = append(batch.Attempts, AttemptWrite{TaskID: id, Attempt: task.Attempt{Number: 1, Start: at, End: at.Add(time.Second), ExitCode: &code,
				LogPath: "/run/logs/" + id + "/attempt-1.log", PID: 1000 + i}})
		}
		batch.Tasks = append(batch.Tasks, w)
	}
	if err := s.Apply(batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		rows, err := s.Load()
		if err != nil || len(rows) != 100_000 || len(rows[0].Attempts) != 1 {
			b.Fatal(len(rows), err)
		}
	}
	reportCPU(b, cpuTime()-cpu)
}

// Load returns rows in submission order (seq, then id) whatever order they
// were written in, each with its own attempts.
func TestLoadOrdersBySeqWithOwnAttempts(t *testing.T) {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "/run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := &Batch{}
	at := time.Unix(1_700_000_000, 0)
	// Written: e(5) d(4) c(3) b(1) a(1): seq ties break by id.
	seqs := map[string]int64{"e": 5, "d": 4, "c": 3, "b": 1, "a": 1}
	for i, id := range []string{"e", "d", "c", "b", "a"} {
		seq := seqs[id]
		batch.Tasks = append(batch.Tasks, TaskWrite{ID: id, Seq: seq, Kind: "command", Spec: []byte(`{}`), State: task.Complete})
		batch.Attempts = append(batch.Attempts, AttemptWrite{TaskID: id, Attempt: task.Attempt{Number: 1, Start: at, PID: 100 + i}})
	}
	if err := s.Apply(batch); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
		want := map[string]int{"e": 100, "d": 101, "c": 102, "b": 103, "a": 104}[r.ID]
		if len(r.Attempts) != 1 || r.Attempts[0].PID != want {
			t.Errorf("task %s: attempts %+v, want one with pid %d", r.ID, r.Attempts, want)
		}
	}
	if fmt.Sprint(got) != "[a b c d e]" {
		t.Errorf("order %v, want [a b c d e]", got)
	}
}

// inSeqOrder orders rows by submission number then id, whether the
// numbers are a run of distinct ones (placed), sparse, or repeated
// (sorted).
func TestInSeqOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs map[string]int64
		want string
	}{
		{"run of distinct numbers", map[string]int64{"a": 12, "b": 10, "c": 14, "d": 11, "e": 13}, "[b d a e c]"},
		{"sparse", map[string]int64{"a": 7, "b": 1, "c": 30, "d": 2}, "[b d a c]"},
		{"repeated", map[string]int64{"a": 2, "b": 1, "c": 2, "d": 0}, "[d b a c]"},
		{"repeated in a run's span", map[string]int64{"a": 0, "b": 2, "c": 0}, "[a c b]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rows []Row
			for _, id := range []string{"e", "c", "a", "d", "b"} { // not in any order
				if seq, ok := tc.seqs[id]; ok {
					rows = append(rows, Row{Seq: seq, Record: task.Record{ID: id}})
				}
			}
			inSeqOrder(rows)
			var got []string
			for _, r := range rows {
				got = append(got, r.ID)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("order %v, want %s", got, tc.want)
			}
		})
	}
}

// Rows written out of submission order, their numbers a run of distinct
// ones (each read into its place) or not (sorted), come back in order,
// each with its own attempt.
func TestLoadPlacesRowsInOrder(t *testing.T) {
	for _, gap := range []int64{1, 3} {
		t.Run(fmt.Sprint("numbers apart by ", gap), func(t *testing.T) {
			s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "/run")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const n = 300
			b := &Batch{}
			for i := range n {
				seq := int64((i*7)%n) * gap // every number once, out of order
				id := fmt.Sprintf("t%03d", seq)
				b.Tasks = append(b.Tasks, TaskWrite{ID: id, Seq: seq, Kind: "command", Spec: []byte(`{}`), State: task.Complete})
				b.Attempts = append(b.Attempts, AttemptWrite{TaskID: id, Attempt: task.Attempt{Number: 1, PID: 1000 + int(seq)}})
			}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			rows, err := s.Load()
			if err != nil || len(rows) != n {
				t.Fatalf("Load: %d rows, %v", len(rows), err)
			}
			for i, r := range rows {
				if r.Seq != int64(i)*gap || r.ID != fmt.Sprintf("t%03d", r.Seq) || len(r.Attempts) != 1 || r.Attempts[0].PID != 1000+int(r.Seq) {
					t.Fatalf("row %d: seq %d id %s attempts %+v", i, r.Seq, r.ID, r.Attempts)
				}
			}
		})
	}
}
