package local_test

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// BenchmarkExecuteTrue runs /bin/true as jobs, one after another, and
// reports this process's CPU time per job besides the wall time: what the
// executor itself costs, without the child's own.
//
//	go test -run xxx -bench ExecuteTrue -benchtime 500x ./internal/executor/local
func BenchmarkExecuteTrue(b *testing.B) {
	for _, c := range []struct {
		name     string
		noCgroup bool
		token    bool
	}{
		{"group-only", true, false},
		{"token", true, true},
		{"cgroup", false, false},
		{"cgroup+token", false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			root := b.TempDir()
			e := &local.Executor{NoCgroup: c.noCgroup}
			var before, after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			b.ResetTimer()
			for i := range b.N {
				j := executor.Job{
					Args:      []string{"/bin/true"},
					LogRoot:   root,
					LogPath:   filepath.Join(root, "logs", "t", "attempt-"+strconv.Itoa(i)+".log"),
					KillGrace: time.Second,
				}
				if c.token {
					j.Token = "bench-" + strconv.Itoa(i)
				}
				if r := e.Execute(context.Background(), j, nil); r.Err != nil || r.ExitCode != 0 {
					b.Fatalf("result = %+v", r)
				}
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
