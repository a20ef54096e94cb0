package gpusched

import (
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/task"
)

// sweeping is the local executor that notes what New tells it: the
// orphans it is asked to recover (each ended, exit 0) and the sweeps.
type sweeping struct {
	local.Executor
	recovered []string   // tokens
	sweeps    [][]string // each Sweep's ids
}

func (s *sweeping) Recover(orphans []executor.Orphan) []executor.Recovery {
	out := make([]executor.Recovery, len(orphans))
	for i, o := range orphans {
		s.recovered = append(s.recovered, o.Job.Token)
		out[i].Result = executor.Result{Reason: executor.Exited, Started: true, End: time.Now()}
	}
	return out
}

func (s *sweeping) Forget(string, int)     {}
func (s *sweeping) Sweep(running []string) { s.sweeps = append(s.sweeps, running) }

// TestSweepAtOpen: New tells the local executor, once, every attempt the
// state shows running (those it recovered), and nothing else; with none,
// a sweep that names none.
func TestSweepAtOpen(t *testing.T) {
	dir := seedRunDir(t, 0,
		earlierTask{spec: TaskSpec{ID: "left", Payload: []string{"true"}}, state: task.Running,
			attempts: []task.Attempt{{Number: 1, Start: tb0}}},
		earlierTask{spec: TaskSpec{ID: "done", Payload: []string{"true"}}, state: task.Complete, attempts: []task.Attempt{peaked(1, 0, 0)}},
	)
	ex := &sweeping{}
	s, err := New(dir, Scheduling{}, WithExecutor(ex))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(ex.recovered) != 1 || ex.recovered[0] != s.token("left", 1) {
		t.Fatalf("recovered %v, want the attempt left running, %s", ex.recovered, s.token("left", 1))
	}
	if len(ex.sweeps) != 1 || !slices.Equal(ex.sweeps[0], ex.recovered) {
		t.Errorf("sweeps %v, want one naming %v", ex.sweeps, ex.recovered)
	}

	fresh := &sweeping{}
	s, err = New(t.TempDir(), Scheduling{}, WithExecutor(fresh))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(fresh.sweeps) != 1 || len(fresh.sweeps[0]) != 0 {
		t.Errorf("sweeps of a fresh run directory %v, want one naming nothing", fresh.sweeps)
	}
}
