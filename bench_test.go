package gpusched_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// graph returns n tasks, each depending on up to two random earlier ones.
func graph(n int) []gpusched.TaskSpec {
	r := rand.New(rand.NewPCG(1, 2))
	tasks := make([]gpusched.TaskSpec, n)
	for i := range tasks {
		t := gpusched.TaskSpec{ID: fmt.Sprintf("task-%06d", i), Payload: []string{"true"}, Priority: r.IntN(10)}
		for k := 0; k < 2 && i > 0; k++ {
			d := fmt.Sprintf("task-%06d", r.IntN(i))
			if len(t.Dependencies) == 0 || t.Dependencies[0] != d {
				t.Dependencies = append(t.Dependencies, d)
			}
		}
		tasks[i] = t
	}
	return tasks
}

// BenchmarkValidate100k: the checks of SubmitMany on a 100,000-task graph,
// without a scheduler: per-spec validation, duplicates, unknown
// dependencies, cycles.
func BenchmarkValidate100k(b *testing.B) {
	tasks := graph(100_000)
	b.ReportAllocs()
	c := cpuTime()
	for b.Loop() {
		if err := gpusched.ValidateTasks(tasks); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpuTime()-c)
}

// BenchmarkSubmit100k: SubmitMany of a 100,000-task graph into a new
// scheduler: validation, the engine's graph, and one SQLite transaction that
// persists every task. Reports the heap the scheduler holds afterwards, and
// the CPU time of the call (every thread's: the collector's and the
// encoding workers' too).
func BenchmarkSubmit100k(b *testing.B) {
	tasks := graph(100_000)
	b.ReportAllocs()
	var heap uint64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		s, err := gpusched.New(b.TempDir(), gpusched.Scheduling{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		c := cpuTime()
		if err := s.SubmitMany(tasks); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "MiB-held")
	reportCPU(b, cpu)
}

// cpuTime returns the CPU time the process has used, user and system, on
// every thread: on a machine shared with other work, a steadier figure
// than a benchmark's wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time used per operation, as cpu-ms/op.
func reportCPU(b *testing.B, used time.Duration) {
	b.ReportMetric(float64(used)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkResubmit100k: what a resumed run of 100,000 tasks costs the
// scheduler before its first start: opening the run directory (reading
// back every stored task) and submitting the same graph again.
func BenchmarkResubmit100k(b *testing.B) {
	tasks := graph(100_000)
	dir := b.TempDir()
	s, err := gpusched.New(dir, gpusched.Scheduling{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SubmitMany(tasks); err != nil {
		b.Fatal(err)
	}
	s.Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := gpusched.New(dir, gpusched.Scheduling{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.SubmitMany(tasks); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkDependencyHop runs a chain of 200 no-op tasks and reports the
// mean gap between one task's end and the next one's start: the scheduler's
// own cost per dependency hop (commit, decide, fork and exec of the next).
func BenchmarkDependencyHop(b *testing.B) {
	const n = 200
	tasks := make([]gpusched.TaskSpec, n)
	for i := range tasks {
		tasks[i] = gpusched.TaskSpec{ID: fmt.Sprint("c", i), Payload: []string{"true"}}
		if i > 0 {
			tasks[i].Dependencies = []string{fmt.Sprint("c", i-1)}
		}
	}
	var gaps time.Duration
	hops := 0
	for b.Loop() {
		s, err := gpusched.New(b.TempDir(), gpusched.Scheduling{MaxParallelTasks: 1})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.SubmitMany(tasks); err != nil {
			b.Fatal(err)
		}
		recs, err := s.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i < len(recs); i++ {
			gaps += recs[i].Attempts[0].Start.Sub(recs[i-1].Attempts[0].End)
			hops++
		}
		s.Close()
	}
	b.ReportMetric(float64(gaps.Microseconds())/float64(hops)/1000, "ms/hop")
}
