package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// instantRunner runs every attempt at once, successfully.
type instantRunner struct{ pids atomic.Int64 }

func (r *instantRunner) Run(_ context.Context, _ AttemptRequest, hooks executor.Hooks) Outcome {
	pid := int(r.pids.Add(1))
	now := time.Now()
	hooks.Running(executor.Running{Handle: local.EncodeHandle(executor.Process{PID: pid, PGID: pid, StartTicks: 1}), Since: now, PID: pid})
	return Outcome{Result: executor.Result{Started: true, Start: now, End: now}}
}

func (r *instantRunner) Recover(orphans []Orphan) []executor.Recovery {
	return make([]executor.Recovery, len(orphans))
}

func (r *instantRunner) Finish(_ context.Context, _ AttemptRequest, res executor.Result) Outcome {
	return Outcome{Result: res}
}

// TestRetireHeap pushes a million no-op tasks, in keyed batches of 1,000,
// through a serving engine on a SQLite store and reports its heap after GC
// along the way (docs/benchmarks.md). It takes a while, so it runs only when asked:
//
//	GPUSCHED_RETIRE_HEAP=1 go test -run TestRetireHeap -v -timeout 30m ./internal/engine/
//
// GPUSCHED_RETIRE_HEAP_TASKS sets how many tasks (default 1,000,000);
// GPUSCHED_RETIRE_HEAP_OFF=1 measures without retirement too.
func TestRetireHeap(t *testing.T) {
	if testing.Short() || os.Getenv("GPUSCHED_RETIRE_HEAP") == "" {
		t.Skip("measures the heap over a million tasks: set GPUSCHED_RETIRE_HEAP=1")
	}
	total := 1_000_000
	if v := os.Getenv("GPUSCHED_RETIRE_HEAP_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10_000 {
			t.Fatalf("GPUSCHED_RETIRE_HEAP_TASKS=%q: want a number >= 10000", v)
		}
		total = n
	}
	modes := []bool{true}
	if os.Getenv("GPUSCHED_RETIRE_HEAP_OFF") != "" {
		modes = append(modes, false)
	}
	for _, retire := range modes {
		t.Run(fmt.Sprintf("retire=%v", retire), func(t *testing.T) {
			checkpoints := []int{10_000}
			if total > 100_000 {
				checkpoints = append(checkpoints, 100_000)
			}
			if total > 10_000 {
				checkpoints = append(checkpoints, total/1000*1000)
			}
			heaps := pushTasks(t, retire, total, checkpoints)
			last := checkpoints[len(checkpoints)-1]
			if retire && heaps[last] > 10*heaps[10_000] {
				t.Errorf("heap at %d tasks is %d bytes, more than 10x the %d at 10,000: it grows with finished tasks", last, heaps[last], heaps[10_000])
			}
		})
	}
}

// pushTasks runs total tasks, batch by batch with up to 8 batches in
// flight, and returns HeapInuse after GC at each checkpoint (a count of
// finished tasks).
func pushTasks(t *testing.T, retire bool, total int, checkpoints []int) map[int]uint64 {
	const batchSize, inFlight = 1000, 8
	// A real state database: a retired task is read back from it (a Wait
	// that comes after its batch finished). SQLite's memory is not Go's
	// heap (modernc.org/sqlite allocates outside it); RSS shows all.
	dir := t.TempDir()
	st, err := store.OpenSQLite(filepath.Join(dir, "state.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{MaxParallel: 64, Store: st, Runner: &instantRunner{}, LogDir: dir, Retire: retire})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.Serve(ctx) }()
	defer func() { cancel(); <-served }()

	blob := []byte(`{}`)
	var pending [][]string // batches submitted, not yet waited for
	waitOldest := func() {
		recs, err := e.Wait(context.Background(), pending[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.State != task.Complete {
				t.Fatalf("%s: %s", r.ID, r.State)
			}
		}
		pending = pending[1:]
	}
	heaps := map[int]uint64{}
	start := time.Now()
	next := 0
	for b := 0; b*batchSize < total; b++ {
		sub := Submission{Key: "batch-" + strconv.Itoa(b)}
		ids := make([]string, batchSize)
		for i := range ids {
			s := &task.Spec{ID: fmt.Sprintf("t%07d", b*batchSize+i), Payload: []string{"true"}}
			s.Normalize()
			ids[i] = s.ID
			sub.Specs, sub.JSON = append(sub.Specs, s), append(sub.JSON, blob)
		}
		if err := e.Submit(sub); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, ids)
		if len(pending) > inFlight {
			waitOldest()
		}
		done := (b + 1) * batchSize
		if next < len(checkpoints) && done == checkpoints[next] {
			for len(pending) > 0 {
				waitOldest()
			}
			inMemory := len(e.Records()) // a turn of the loop: the last retirements are done
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heaps[done] = ms.HeapInuse
			t.Logf("%9d tasks: HeapInuse %7.1f MiB, HeapAlloc %7.1f MiB, RSS %s, %7d tasks in memory, %5.1f µs/task so far",
				done, float64(ms.HeapInuse)/(1<<20), float64(ms.HeapAlloc)/(1<<20), rss(), inMemory,
				float64(time.Since(start).Microseconds())/float64(done))
			next++
		}
	}
	return heaps
}

// rss returns the process's resident memory, as /proc says it.
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
