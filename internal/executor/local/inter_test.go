package local

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

func cpuNow() time.Duration {
	var s, c syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	return time.Duration(s.Utime.Nano() + s.Stime.Nano() + c.Utime.Nano() + c.Stime.Nano())
}

func TestInterleaved(t *testing.T) {
	type variant struct {
		name     string
		noCgroup bool
		token    bool
	}
	vs := []variant{{"group-only", true, false}, {"token", true, true}, {"cgroup", false, false}, {"cgroup+token", false, true}}
	cpu := make([]time.Duration, len(vs))
	wall := make([]time.Duration, len(vs))
	root := t.TempDir()
	n := 400
	for i := range n {
		for k, v := range vs {
			j := executor.Job{Args: []string{"/bin/true"}, LogRoot: root,
				LogPath: filepath.Join(root, "logs", v.name, "attempt-"+strconv.Itoa(i)+".log"), KillGrace: time.Second}
			if v.token {
				j.Token = "bench-" + strconv.Itoa(i)
			}
			c0, w0 := cpuNow(), time.Now()
			r := (&Executor{NoCgroup: v.noCgroup}).Execute(context.Background(), j, nil)
			cpu[k] += cpuNow() - c0
			wall[k] += time.Since(w0)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	for k, v := range vs {
		t.Logf("%-14s cpu %6.0f µs/op  wall %6.0f µs/op", v.name, float64(cpu[k].Microseconds())/float64(n), float64(wall[k].Microseconds())/float64(n))
	}
}
