package gpusched_test

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// TestPendingHeap measures the heap a scheduler holds for n pending tasks
// (the graph of BenchmarkSubmit100k, submitted with SubmitMany to a
// scheduler that is not running, so that every task stays pending). It
// runs only when asked, with the sizes to measure:
//
//	GPUSCHED_PENDING_HEAP=100000,1000000 go test -run TestPendingHeap -v -timeout 30m .
//
// The figures are in docs/benchmarks.md ("The scheduler's heap for pending
// tasks"). The caller's own specs are alive throughout and not counted.
func TestPendingHeap(t *testing.T) {
	sizes := os.Getenv("GPUSCHED_PENDING_HEAP")
	if sizes == "" || testing.Short() {
		t.Skip("set GPUSCHED_PENDING_HEAP=100000,1000000 to measure")
	}
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			t.Fatalf("GPUSCHED_PENDING_HEAP: %q is not a count of tasks", f)
		}
		tasks := graph(n)
		s, err := gpusched.New(t.TempDir(), gpusched.Scheduling{})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		if err := s.SubmitMany(tasks); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		if held <= 0 {
			t.Fatalf("%d pending tasks: the heap shrank (%d B): the measure is broken", n, held)
		}
		t.Logf("%d pending tasks: SubmitMany %.2f s; heap held %.1f MiB (%d B a task); heap in use %.1f MiB; peak heap during the call %.1f MiB (HeapSys); RSS %s",
			n, took.Seconds(), float64(held)/(1<<20), held/int64(n), float64(after.HeapInuse)/(1<<20), float64(after.HeapSys)/(1<<20), rss())
		runtime.KeepAlive(tasks)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// rss is this process's resident set, as /proc says it.
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			return strings.Join(strings.Fields(string(v)), " ")
		}
	}
	return "unknown"
}
