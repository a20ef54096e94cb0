package engine

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Earlier's rows belong to its callers: the task running again in this
// engine changes its own copies, never them. Under -race, the runner's
// reads while the loop saves the new attempt's handle would be reported if
// the two shared a map.
func TestEarlierRowsAreNotTheLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		t0 := time.Now().Add(-time.Hour)
		st.Apply(&store.Batch{
			Tasks: []store.TaskWrite{{ID: "t", Seq: 1, Kind: "command", Spec: []byte(`{"id":"t"}`), State: task.Failed, Error: "exit code 1"}},
			Attempts: []store.AttemptWrite{{TaskID: "t", Attempt: task.Attempt{Number: 1, Start: t0, End: t0, Error: "exit code 1", PID: 77},
				Handle: local.EncodeHandle(executor.Process{PID: 77, PGID: 77, StartTicks: 3})}},
		})
		h := newHarness(t, Config{}, st)
		defer h.Close()
		row, ok := h.Earlier("t")
		if !ok || len(row.Handles) != 1 || len(row.Attempts) != 1 {
			t.Fatalf("Earlier(t) = %+v", row)
		}
		h.runner.hook = func(AttemptRequest) {
			// The loop records this attempt's handle meanwhile.
			for range 10 {
				for n, hd := range row.Handles {
					_, _ = n, hd
				}
				_ = len(row.Attempts)
				time.Sleep(10 * time.Millisecond)
			}
		}
		h.mustSubmit(t, spec("t"))
		r := h.run(t)["t"]
		if r.State != task.Complete || len(r.Attempts) != 2 {
			t.Fatalf("t = %s with %d attempts", r.State, len(r.Attempts))
		}
		if len(row.Handles) != 1 || len(row.Attempts) != 1 || row.State != task.Failed {
			t.Errorf("the earlier row changed: %d handles, %d attempts, %s", len(row.Handles), len(row.Attempts), row.State)
		}
	})
}
