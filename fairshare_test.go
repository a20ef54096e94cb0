package gpusched_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched"
)

// With UserMaxRunning 1, one owner's tasks run one at a time though slots
// are free: each holds a lock folder while it runs and fails if another
// holds it.
func TestUserMaxRunningHoldsAnOwnerToItsCap(t *testing.T) {
	t.Parallel()
	lock := filepath.Join(t.TempDir(), "lock")
	s := newScheduler(t, gpusched.Scheduling{MaxParallelTasks: 4, UserMaxRunning: 1})
	script := fmt.Sprintf(`mkdir %s || exit 9; sleep 0.05; rmdir %s`, lock, lock)
	for i := range 3 {
		if err := s.Submit(gpusched.TaskSpec{ID: fmt.Sprint("t", i), Payload: []string{"sh", "-c", script}}); err != nil {
			t.Fatal(err)
		}
	}
	recs := run(t, s)
	for id, r := range recs {
		if r.State != gpusched.StateComplete {
			t.Errorf("%s: %s (%s): ran beside another task of its owner", id, r.State, r.Error)
		}
	}
	if len(recs) != 3 {
		t.Errorf("%d records, want 3", len(recs))
	}
}
