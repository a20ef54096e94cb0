package gpusched_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpusched/gpusched"
)

// pager is a kind whose tasks run a shell script and whose failure
// events go to a pager that is down the first time.
type pager struct {
	gpusched.CommandHandler
	mu    sync.Mutex
	down  int // failures to answer before it answers
	calls []gpusched.FailureEvent
}

func (p *pager) Command(_ context.Context, t *gpusched.TaskSpec, _ int) (gpusched.Command, error) {
	return gpusched.Command{Args: []string{"sh", "-c", t.Payload.(string)}, Dir: t.Dir}, nil
}

func (p *pager) ValidatePayload(*gpusched.TaskSpec) error { return nil }

func (p *pager) OnFailureEvent(_ context.Context, ev gpusched.FailureEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, ev)
	if p.down > 0 {
		p.down--
		return errors.New("pager is down")
	}
	return nil
}

// A kind's FailureEventHandler gets a task's failure for good at least
// once: again after it failed, with the same id, what the failure was,
// and the count of failed tries. A task that completes, or is blocked,
// gets none.
func TestFailureEventHandlerAtLeastOnce(t *testing.T) {
	t.Parallel()
	p := &pager{down: 1}
	dir := t.TempDir()
	var failed []gpusched.Event
	s, err := gpusched.New(t.TempDir(), gpusched.Scheduling{MaxParallelTasks: 1, DefaultRetryDelay: -1},
		gpusched.WithHandler("pager", p), gpusched.WithObserver(func(ev gpusched.Event) {
			if ev.Kind == gpusched.EventDeliveryFailed {
				failed = append(failed, ev)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "bad", Kind: "pager", Dir: dir, Payload: "echo oops; exit 3", Retries: 1},
		{ID: "after", Kind: "pager", Dir: dir, Payload: "true", Dependencies: []string{"bad"}},
		{ID: "good", Kind: "pager", Dir: dir, Payload: "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := run(t, s)
	if recs["bad"].State != gpusched.StateFailed || recs["after"].State != gpusched.StateBlocked {
		t.Fatalf("bad %s, after %s", recs["bad"].State, recs["after"].State)
	}
	p.mu.Lock()
	calls := slices.Clone(p.calls)
	p.mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("OnFailureEvent called %d times (%+v), want twice: failed, then delivered", len(calls), calls)
	}
	ev := calls[1]
	if ev.ID != calls[0].ID || ev.TaskID != "bad" || ev.Tries != 1 || calls[0].Tries != 0 || ev.Attempts != 2 ||
		ev.ExitCode == nil || *ev.ExitCode != 3 || ev.Error != "exit code 3" || ev.Spec == nil || ev.Spec.ID != "bad" ||
		!strings.HasSuffix(ev.AttemptLog, "/logs/bad.attempt-2.log") || ev.Time.IsZero() {
		t.Errorf("failure event = %+v", ev)
	}
	if want := fmt.Sprintf("/logs/bad.event-%d.log", ev.ID); !strings.HasSuffix(ev.LogPath, want) {
		t.Errorf("its log %s, want one ending in %s", ev.LogPath, want)
	}
	if len(failed) != 1 || failed[0].Notification != "failure" || failed[0].GaveUp ||
		failed[0].Error != fmt.Sprintf("failure event %d, try 1: pager is down", ev.ID) {
		t.Errorf("delivery failures observed: %+v", failed)
	}
	if n := s.EventsPending(); n != 0 {
		t.Errorf("EventsPending = %d after the run", n)
	}
}
