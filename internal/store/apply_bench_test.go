package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// BenchmarkApplyTurn: the commit of one turn of the scheduler's loop on a
// run of 10,000 tasks, as a run of short tasks makes them: one task
// completes (its row and its attempt's), the next starts (likewise, with a
// handle), and the owners' usage is saved (a meta key).
func BenchmarkApplyTurn(b *testing.B) { benchmarkApplyTurn(b, nil) }

// BenchmarkApplyTurnAfterExec is BenchmarkApplyTurn with a process
// started and waited for (/bin/true) before each commit, off the clock, as
// in a run, where the tasks' processes start and end between two commits:
// it cools the caches the commit runs from, and the commit takes some
// twice as long as back to back (docs/benchmarks.md, "Sixth round").
func BenchmarkApplyTurnAfterExec(b *testing.B) {
	if _, err := os.Stat("/bin/true"); err != nil {
		b.Skip("no /bin/true")
	}
	benchmarkApplyTurn(b, func() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	})
}

// benchmarkApplyTurn runs BenchmarkApplyTurn with before called off the
// clock before each commit, when not nil.
// fillTurn makes batch one turn of a run at -j 1: done's attempt ends,
// complete, and next's starts, with the usage a turn saves.
func fillTurn(batch *Batch, done, next string, doneSeq, nextSeq, turn int, at time.Time, code *int, doneHandle, nextHandle executor.Handle) {
	batch.Reset()
	batch.Tasks = append(batch.Tasks,
		TaskWrite{ID: done, Seq: int64(doneSeq), Kind: "command", Submitted: at, State: task.Complete, ExitCode: code},
		TaskWrite{ID: next, Seq: int64(nextSeq), Kind: "command", Submitted: at, State: task.Running})
	batch.Attempts = append(batch.Attempts,
		AttemptWrite{TaskID: done, Attempt: task.Attempt{Number: 1, Start: at, End: at.Add(time.Second), ExitCode: code, PID: 1000 + turn,
			LogPath: "/run/logs/" + done + "/attempt-1.log"}, Handle: doneHandle},
		AttemptWrite{TaskID: next, Attempt: task.Attempt{Number: 1, Start: at, PID: 1001 + turn, LogPath: "/run/logs/" + next + "/attempt-1.log"},
			Handle: nextHandle})
	batch.Meta = map[string]string{"usage": fmt.Sprint(turn)}
}

func benchmarkApplyTurn(b *testing.B, before func()) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "/run")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 10_000
	at := time.Unix(1_700_000_000, 0)
	batch := &Batch{}
	for i := range n {
		id := fmt.Sprintf("task-%06d", i)
		batch.Tasks = append(batch.Tasks, TaskWrite{ID: id, Seq: int64(i), Kind: "command", Submitted: at, Fingerprint: "f0e1d2c3b4a59687",
			Spec:  fmt.Appendf(nil, `{"id":%q,"kind":"command","dependencies":["task-000001"],"payload":["true"],"priority":3,"env":{"A":"1","B":"2"}}`, id),
			State: task.Pending})
	}
	if err := s.Apply(batch); err != nil {
		b.Fatal(err)
	}
	code := 0
	i := 0
	b.ReportAllocs()
	runtime.LockOSThread() // for threadCPU
	defer runtime.UnlockOSThread()
	var commits time.Duration
	cpu := cpuTime()
	for b.Loop() {
		fillTurn(batch, fmt.Sprintf("task-%06d", i%n), fmt.Sprintf("task-%06d", (i+1)%n), i%n, (i+1)%n, i, at, &code,
			executor.Handle{Executor: "local", Version: 1, Data: []byte(`{"pid":1000,"pgid":1000,"start_ticks":42}`)},
			executor.Handle{Executor: "local", Version: 1, Data: []byte(`{"pid":1001,"pgid":1001,"start_ticks":43}`)})
		if before != nil {
			b.StopTimer()
			before()
			b.StartTimer()
		}
		t := threadCPU()
		if err := s.Apply(batch); err != nil {
			b.Fatal(err)
		}
		commits += threadCPU() - t
		i++
	}
	if before == nil { // the process's own threads (os/exec's) would count
		reportCPU(b, cpuTime()-cpu)
	}
	// The commit's own thread: what load on the machine does not change.
	b.ReportMetric(float64(commits)/float64(time.Microsecond)/float64(b.N), "commit-cpu-µs/op")
}
