package engine

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// TestRestoreCost measures what linking the tasks queued again after a
// restart to the finished tasks they depend on costs (docs/benchmarks.md,
// "The daemon"): N tasks a-i finished by a first engine, N tasks b-i
// (after a-i, on: any) left pending; a second engine is given the b-i
// again, once without their dependencies (as the daemon did) and once
// with them (a stand-in per a-i), and the heap after GC and the
// submission's time are reported. It runs only when asked:
//
//	GPUSCHED_RESTORE_COST=10000 go test -run TestRestoreCost -v ./internal/engine/
func TestRestoreCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GPUSCHED_RESTORE_COST"))
	if testing.Short() || n <= 0 {
		t.Skip("measures a restore: set GPUSCHED_RESTORE_COST to a number of tasks")
	}
	st := store.NewMemory()
	first, err := Open(Config{MaxParallel: 64, Store: keepOpen{st}, Runner: &instantRunner{}, LogDir: t.TempDir(), Retire: true})
	if err != nil {
		t.Fatal(err)
	}
	b := func(i int, deps bool) *task.Spec {
		s := &task.Spec{ID: "b" + strconv.Itoa(i), Payload: []string{"true"}}
		if deps {
			s.Dependencies = []string{"a" + strconv.Itoa(i)}
			s.DependencyOn = map[string]task.Condition{s.Dependencies[0]: task.AfterAny}
		}
		s.Normalize()
		return s
	}
	var sub Submission
	var as, bs []string
	for i := range n {
		a := &task.Spec{ID: "a" + strconv.Itoa(i), Payload: []string{"true"}}
		a.Normalize()
		sub.Specs, sub.JSON = append(sub.Specs, a, b(i, true)), append(sub.JSON, []byte(`{}`), []byte(`{}`))
		as, bs = append(as, a.ID), append(bs, "b"+strconv.Itoa(i))
	}
	if err := first.Submit(sub); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Pause(bs, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- first.Serve(ctx) }()
	if _, err := first.Wait(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-served
	first.Close()

	for _, deps := range []bool{false, true} {
		e, err := Open(Config{MaxParallel: 64, Store: keepOpen{st}, Runner: &instantRunner{}, LogDir: t.TempDir(), Retire: true})
		if err != nil {
			t.Fatal(err)
		}
		again := Submission{Again: true}
		for i := range n {
			again.Specs, again.JSON = append(again.Specs, b(i, deps)), append(again.JSON, []byte(`{}`))
		}
		before := liveHeap()
		start := time.Now()
		if err := e.Submit(again); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		again = Submission{}
		after := liveHeap()
		t.Logf("%d tasks queued again, dependencies on finished tasks %-5v: submit %v, heap +%.1f MiB (%.0f B a task)",
			n, deps, took.Round(time.Millisecond), float64(after-before)/(1<<20), float64(after-before)/float64(n))
		if recs := e.Records(); len(recs) != n || recs[0].State != task.Pending {
			t.Fatalf("%d tasks in memory (first %v), want %d pending", len(recs), recs[0].State, n)
		}
		e.Close()
	}
}

// liveHeap returns the live heap after GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
