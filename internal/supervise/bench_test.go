package supervise_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/supervise"
)

// BenchmarkExecuteSupervised runs `true` as attempts in four ways: in
// this process (local.Executor) and through the supervisor
// (supervise.Executor), one attempt at a time (j1) and two at a time
// (j2). Every attempt has a token, as the scheduler's do. The ways take
// turns, 50 attempts each, so that the machine's changing load falls on
// all alike. It reports, per attempt, the wall time; the CPU time of this
// process, the supervisor and the jobs together (cpu); and that of this
// process alone (client-cpu: the scheduler's share).
//
// The run directory is made under $TMPDIR: put it on the disk where run
// directories live, not on a /tmp that other tests churn (creating a file
// there can cost 200 µs, see docs/benchmarks.md).
//
//	go test -run xxx -bench ExecuteSupervised -benchtime 2000x ./internal/supervise
func BenchmarkExecuteSupervised(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true here")
	}
	root := b.TempDir()
	b.Cleanup(func() { stopSupervisor(b, root) })
	sup := &supervise.Executor{RunDir: root, Binary: self}
	defer sup.Close()
	in := &local.Executor{}
	variants := []struct {
		name string
		e    executor.Executor
		j    int
	}{
		{"local-j1", in, 1},
		{"supervised-j1", sup, 1},
		{"local-j2", in, 2},
		{"supervised-j2", sup, 2},
	}
	job := func(name string, i int) executor.Job {
		return executor.Job{
			TaskID: name, Attempt: i, Args: []string{truePath}, Env: []string{"PATH=/usr/bin:/bin"},
			LogRoot: root, LogPath: filepath.Join(root, "logs", name, "attempt-"+strconv.Itoa(i)+".log"),
			KillGrace: time.Second, Token: "bench-" + name + "-" + strconv.Itoa(i),
		}
	}
	if r := sup.Execute(context.Background(), job("warm-up", 0), executor.Hooks{}); r.Err != nil {
		b.Fatalf("warm-up: %+v", r)
	}
	spid := supervisorPID(b, root)
	const chunk = 50
	wall := make([]time.Duration, len(variants))
	cpu := make([]cpuTimes, len(variants))
	b.ResetTimer()
	for from := 0; from < b.N; from += chunk {
		to := min(from+chunk, b.N)
		for k, v := range variants {
			c0, w0 := readCPU(spid), time.Now()
			var wg sync.WaitGroup
			for w := range v.j {
				wg.Go(func() {
					for i := from + w; i < to; i += v.j {
						if r := v.e.Execute(context.Background(), job(v.name, i), executor.Hooks{}); r.Err != nil || r.ExitCode != 0 {
							b.Errorf("%s: result = %+v", v.name, r)
							return
						}
					}
				})
			}
			wg.Wait()
			wall[k] += time.Since(w0)
			cpu[k] = cpu[k].add(readCPU(spid).sub(c0))
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	for k, v := range variants {
		b.ReportMetric(per(wall[k]), v.name+"-wall-µs/job")
		b.ReportMetric(per(cpu[k].total()), v.name+"-cpu-µs/job")
		b.ReportMetric(per(cpu[k].self), v.name+"-client-cpu-µs/job")
	}
	if pid := supervisorPID(b, root); pid != spid {
		b.Errorf("the supervisor changed during the benchmark (PID %d, then %d): the CPU figures miss some", spid, pid)
	}
}

// cpuTimes is CPU time, user and system: of this process, of its
// children that have been waited for, and of the supervisor with its
// own (the supervised jobs).
type cpuTimes struct{ self, children, sup time.Duration }

func (c cpuTimes) total() time.Duration { return c.self + c.children + c.sup }
func (c cpuTimes) sub(d cpuTimes) cpuTimes {
	return cpuTimes{c.self - d.self, c.children - d.children, c.sup - d.sup}
}
func (c cpuTimes) add(d cpuTimes) cpuTimes {
	return cpuTimes{c.self + d.self, c.children + d.children, c.sup + d.sup}
}

// readCPU reads the CPU times now; spid is the supervisor's PID.
func readCPU(spid int) cpuTimes {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	c := cpuTimes{
		self:     time.Duration(self.Utime.Nano() + self.Stime.Nano()),
		children: time.Duration(children.Utime.Nano() + children.Stime.Nano()),
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(spid) + "/stat")
	if err != nil {
		return c
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	const clockTick = 10 * time.Millisecond   // USER_HZ is 100 on Linux
	for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime (fields 14-17)
		n, _ := strconv.ParseUint(f[k], 10, 64)
		c.sup += time.Duration(n) * clockTick
	}
	return c
}

// BenchmarkRoundTrip measures the supervisor's share alone: attempts with
// no command, which fail at once in the supervisor, so that each is a
// start message, a record appended to the results file and an ended
// message. It reports the wall time per attempt and the CPU time of this
// process (client-cpu) and of the supervisor (supervisor-cpu).
//
//	go test -run xxx -bench RoundTrip -benchtime 5000x ./internal/supervise
func BenchmarkRoundTrip(b *testing.B) {
	root := b.TempDir()
	b.Cleanup(func() { stopSupervisor(b, root) })
	sup := &supervise.Executor{RunDir: root, Binary: self}
	defer sup.Close()
	job := func(i int) executor.Job {
		return executor.Job{TaskID: "nothing", LogRoot: root, LogPath: filepath.Join(root, "logs", "nothing", "attempt.log"),
			Token: "nothing-" + strconv.Itoa(i)}
	}
	if r := sup.Execute(context.Background(), job(-1), executor.Hooks{}); r.Reason != executor.Unrunnable {
		b.Fatalf("warm-up: %+v, want unrunnable", r)
	}
	spid := supervisorPID(b, root)
	c0, w0 := readCPU(spid), time.Now()
	b.ResetTimer()
	for i := range b.N {
		if r := sup.Execute(context.Background(), job(i), executor.Hooks{}); r.Reason != executor.Unrunnable {
			b.Fatalf("result = %+v, want unrunnable", r)
		}
	}
	c := readCPU(spid).sub(c0)
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(time.Since(w0)), "wall-µs/attempt")
	b.ReportMetric(per(c.self), "client-cpu-µs/attempt")
	b.ReportMetric(per(c.sup), "supervisor-cpu-µs/attempt")
}
