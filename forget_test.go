package gpusched_test

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// forgetting is the local executor, and notes what the scheduler tells it
// to forget, as the supervised executor's results file is told.
type forgetting struct {
	local.Executor
	mu     sync.Mutex
	ran    map[string]int // token: the PID its attempt ran as
	forgot map[string]int // token: the PID it was forgotten with
}

func (f *forgetting) Execute(ctx context.Context, job executor.Job, hooks executor.Hooks) executor.Result {
	running := hooks.Running
	hooks.Running = func(r executor.Running) {
		f.mu.Lock()
		f.ran[job.Token] = r.PID
		f.mu.Unlock()
		if running != nil {
			running(r)
		}
	}
	return f.Executor.Execute(ctx, job, hooks)
}

func (f *forgetting) Forget(token string, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.forgot[token]; dup {
		f.forgot[token+" (again)"] = pid
	}
	f.forgot[token] = pid
}

// TestCommittedEndsForgotten: once an attempt's end is committed, the
// local executor is told to forget it (by its token and process), once
// per attempt, a retried one's included; the user's observer still sees
// every event.
func TestCommittedEndsForgotten(t *testing.T) {
	f := &forgetting{ran: map[string]int{}, forgot: map[string]int{}}
	var mu sync.Mutex
	completed := 0
	s := newScheduler(t, gpusched.Scheduling{}, gpusched.WithExecutor(f), gpusched.WithObserver(func(ev gpusched.Event) {
		if ev.Kind == gpusched.EventComplete {
			mu.Lock()
			completed++
			mu.Unlock()
		}
	}))
	err := s.SubmitMany([]gpusched.TaskSpec{
		{ID: "ok", Payload: []string{"true"}},
		{ID: "flaky", Payload: []string{"sh", "-c", `[ "$GPUSCHED_ATTEMPT" = 1 ] && exit 1; exit 0`}, Retries: 1, RetryDelay: gpusched.NoRetryDelay},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ran) != 3 {
		t.Fatalf("%d attempts ran, want 3: %v", len(f.ran), f.ran)
	}
	if !maps.Equal(f.forgot, f.ran) {
		t.Errorf("forgotten %v, want each attempt that ran, once, with its PID: %v", f.forgot, f.ran)
	}
	if completed != 2 {
		t.Errorf("the user's observer saw %d completions, want 2", completed)
	}
}
