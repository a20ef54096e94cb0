package store

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/task"
)

// fillDB writes a state database at path holding n completed tasks, each
// with one attempt, as a finished run of n tasks leaves it.
func fillDB(tb testing.TB, path string, n int) {
	tb.Helper()
	s, err := OpenSQLite(path, "")
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	b := &Batch{}
	t0 := time.Unix(1700000000, 0)
	for i := range n {
		id := fmt.Sprintf("task-%06d", i)
		b.Tasks = append(b.Tasks, TaskWrite{ID: id, Seq: int64(i), Kind: "command", Fingerprint: "f0e1d2c3b4a59687",
			Spec:  []byte(`{"id":"` + id + `","kind":"command","dependencies":["task-000001"],"payload":["true"]}`),
			State: task.Complete, ExitCode: new(int), Submitted: t0})
		b.Attempts = append(b.Attempts, AttemptWrite{TaskID: id, Attempt: task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second),
			ExitCode: new(int), LogPath: "logs/" + id + "/attempt-1.log", ReadyAt: t0}, Handle: local.EncodeHandle(executor.Process{PID: 1000 + i, PGID: 1000 + i, StartTicks: 42})})
	}
	if err := s.Apply(b); err != nil {
		tb.Fatal(err)
	}
}

// cpuTime returns the CPU time the process has used, user and system,
// on every thread (the garbage collector's too): on a machine shared with
// other work, a steadier figure than the wall time of a benchmark.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time the calling thread has used (lock the
// goroutine to its thread around the calls that compare it).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// reportCPU reports the CPU time used since start per operation, as
// cpu-ms/op.
func reportCPU(b *testing.B, used time.Duration) {
	b.ReportMetric(float64(used)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
