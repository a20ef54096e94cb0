package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	gpusched "github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// TestHeapAfterManyTasks measures, when GPUSCHED_HEAP_TASKS names task
// counts ("10000,100000"), the daemon's live heap after that many short
// tasks (true, in workflow runs of 1,000) were submitted and completed;
// GPUSCHED_HEAP_KEEP=1 measures a daemon that keeps finished tasks
// (Config.KeepFinished). A measurement, not a test: docs/benchmarks.md
// has the figures and the command.
func TestHeapAfterManyTasks(t *testing.T) {
	spec := os.Getenv("GPUSCHED_HEAP_TASKS")
	if spec == "" {
		t.Skip("a measurement: set GPUSCHED_HEAP_TASKS=10000,100000")
	}
	var marks []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n%1000 != 0 {
			t.Fatalf("GPUSCHED_HEAP_TASKS: %q is not a multiple of 1000", s)
		}
		marks = append(marks, n)
	}
	keep := os.Getenv("GPUSCHED_HEAP_KEEP") == "1"
	d := newTestDaemon(t, Config{KeepFinished: keep, Scheduling: gpusched.Scheduling{MaxParallelTasks: 8}})
	ctx := context.Background()
	env := map[string]string{"PATH": os.Getenv("PATH")}
	done := 0
	t.Logf("keep finished: %v", keep)
	t.Logf("tasks  heap (MiB)  per task (B, from the previous mark)")
	prev, prevHeap := 0, uint64(0)
	for _, mark := range marks {
		for done < mark {
			wf := client.Workflow{Name: "heap.yaml", Dir: "/", Env: env, Tasks: make([]client.Task, 1000)}
			for i := range wf.Tasks {
				wf.Tasks[i] = client.Task{ID: fmt.Sprintf("t%d", i), Command: []string{"true"}}
			}
			sub, err := d.client.SubmitWorkflow(ctx, wf)
			if err != nil {
				t.Fatal(err)
			}
			ended, err := d.client.Wait(ctx, []string{sub.Run}, nil)
			if err != nil || len(ended) != 1000 {
				t.Fatalf("wait for run %s: %d tasks, %v", sub.Run, len(ended), err)
			}
			done += 1000
		}
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		per := ""
		if prev > 0 {
			per = fmt.Sprint((int64(ms.HeapAlloc) - int64(prevHeap)) / int64(mark-prev))
		}
		t.Logf("%6d  %9.1f  %s", mark, float64(ms.HeapAlloc)/(1<<20), per)
		prev, prevHeap = mark, ms.HeapAlloc
	}
}
