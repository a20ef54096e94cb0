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

// cpuTime is the CPU time, user and system, of this process and of its
// children that have been waited for.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// BenchmarkExecuteTrue runs /bin/true as a job in four ways, one after the
// other in each iteration, so that a machine's changing load falls on all
// of them alike: with the process group alone (no token, no cgroup), with
// the token scan, with a cgroup, with both. It reports the CPU time (this
// process and the job's) and the wall time per job of each.
//
//	go test -run xxx -bench ExecuteTrue -benchtime 400x ./internal/executor/local
func BenchmarkExecuteTrue(b *testing.B) {
	variants := []struct {
		name   string
		cgroup bool
		token  bool
	}{
		{"group", false, false},
		{"token", false, true},
		{"cgroup", true, false},
		{"cgroup+token", true, true},
	}
	cpu := make([]time.Duration, len(variants))
	wall := make([]time.Duration, len(variants))
	root := b.TempDir()
	for i := range b.N {
		for k, v := range variants {
			j := executor.Job{
				Args:      []string{"/bin/true"},
				LogRoot:   root,
				LogPath:   filepath.Join(root, "logs", v.name, "attempt-"+strconv.Itoa(i)+".log"),
				KillGrace: time.Second,
			}
			if v.token {
				j.Token = "bench-" + strconv.Itoa(i)
			}
			c0, w0 := cpuTime(), time.Now()
			r := (&local.Executor{Cgroups: v.cgroup}).Execute(context.Background(), j, executor.Hooks{})
			cpu[k] += cpuTime() - c0
			wall[k] += time.Since(w0)
			if r.Err != nil || r.ExitCode != 0 {
				b.Fatalf("%s: result = %+v", v.name, r)
			}
		}
	}
	for k, v := range variants {
		b.ReportMetric(float64(cpu[k].Microseconds())/float64(b.N), v.name+"-cpu-µs/job")
		b.ReportMetric(float64(wall[k].Microseconds())/float64(b.N), v.name+"-wall-µs/job")
	}
}
