package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// BenchmarkApplyTurnResumed: the commit of one turn of the scheduler's
// loop in a run directory of 100,000 tasks being run again, as a resumed
// run makes them. Before the clock starts, one task in five has an
// attempt already (those a first run finished or failed), spread over
// the ids as a first run with dependencies leaves them, and the others
// are blocked with the task that blocked them recorded. Each turn then
// completes one task and starts the next, in id order among those
// without an attempt: its attempt's row goes between rows already in the
// attempts table, not after them, as in a fresh run.
func BenchmarkApplyTurnResumed(b *testing.B) { benchmarkApplyTurnBig(b, true, nil) }

// BenchmarkApplyTurnResumedAfterExec is BenchmarkApplyTurnResumed with a
// process started and waited for (/bin/true) before each commit, off the
// clock, as BenchmarkApplyTurnAfterExec: as in a run, the commit finds
// the CPU's caches cooled by the task's process.
func BenchmarkApplyTurnResumedAfterExec(b *testing.B) {
	if _, err := os.Stat("/bin/true"); err != nil {
		b.Skip("no /bin/true")
	}
	benchmarkApplyTurnBig(b, true, func() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkApplyTurnFresh100k is BenchmarkApplyTurnResumed without the
// first run's attempts: every attempt's row goes after the others.
func BenchmarkApplyTurnFresh100k(b *testing.B) { benchmarkApplyTurnBig(b, false, nil) }

// benchmarkApplyTurnBig runs BenchmarkApplyTurnResumed (resumed) or
// BenchmarkApplyTurnFresh100k, with before called off the clock before
// each commit, when not nil.
func benchmarkApplyTurnBig(b *testing.B, resumed bool, before func()) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "/run")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	at := time.Unix(1_700_000_000, 0)
	code, failed := 0, 1
	ran := func(i int) bool { return resumed && i%5 == 0 } // the first run's
	id := func(i int) string { return fmt.Sprintf("task-%06d", i) }
	handle := executor.Handle{Executor: "local", Version: 1, Data: []byte(`{"pid":1000,"pgid":1000,"start_ticks":42}`)}
	batch := &Batch{}
	for i := range n {
		w := TaskWrite{ID: id(i), Seq: int64(i), Kind: "command", Submitted: at, Fingerprint: "f0e1d2c3b4a59687",
			Spec:  fmt.Appendf(nil, `{"id":%q,"kind":"command","dependencies":["task-000001"],"payload":["true"],"priority":3,"env":{"A":"1","B":"2"}}`, id(i)),
			State: task.Pending, Rerun: "was blocked"}
		if ran(i) {
			w.State, w.ExitCode = task.Failed, &failed
			if i%10 == 0 {
				w.State, w.ExitCode = task.Complete, &code
			}
			batch.Attempts = append(batch.Attempts, AttemptWrite{TaskID: w.ID, Attempt: task.Attempt{Number: 1, Start: at, End: at.Add(time.Second),
				ExitCode: w.ExitCode, PID: 1000 + i, LogPath: "/run/logs/" + w.ID + "/attempt-1.log"}, Handle: handle})
		}
		batch.Tasks = append(batch.Tasks, w)
	}
	if err := s.Apply(batch); err != nil {
		b.Fatal(err)
	}
	var todo []int // the tasks a turn runs, in order
	for i := range n {
		if !ran(i) {
			todo = append(todo, i)
		}
	}
	// In the order of their priorities, not of their ids: each turn's
	// rows go anywhere in the tables, as in a run.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(todo), func(i, j int) { todo[i], todo[j] = todo[j], todo[i] })
	b.ReportAllocs()
	runtime.LockOSThread() // for threadCPU
	defer runtime.UnlockOSThread()
	var commits time.Duration
	k := 0
	for b.Loop() {
		if k+1 >= len(todo) {
			b.Fatal("ran out of tasks: run with -benchtime of fewer iterations")
		}
		fillTurn(batch, id(todo[k]), id(todo[k+1]), todo[k], todo[k+1], k, at, &code, handle, handle)
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
		k++
	}
	b.ReportMetric(float64(commits)/float64(time.Microsecond)/float64(b.N), "commit-cpu-µs/op")
}
