package daemon_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// Retrying, after a daemon restart, a task that had finished before it
// makes the tasks still pending that counted its end wait for its new end
// and judge their conditions by it, as without the restart
// (TestRetryOfRetiredTaskWithConditions); a dependent that finished
// before is left as it is:
//   - b (a: any, and g) does not start when g completes while a runs
//     again, and runs after a's new end;
//   - f (a: failure, and g) waits for a too, and is not needed once a
//     completes;
//   - p (a), blocked by a's failure, is taken up by the retry and runs;
//   - d (a: any), which ran after a's first end, does not run again;
//   - q (a, and h: any), blocked by a's failure, is taken up by the retry
//     with its dependency on h, which had failed: retrying h too makes it
//     wait for h's new end besides a's.
func TestRetryAfterRestartWaitsForTheNewEnd(t *testing.T) {
	w := newWorld(t)
	d := w.start(t, "-j", "4")
	c := w.client(t)
	ctx := context.Background()
	file, touch, until, sh := w.flags(t)
	none := 0
	_, err := c.SubmitWorkflow(ctx, client.Workflow{Name: "wf", Dir: w.dir, Env: map[string]string{"PATH": os.Getenv("PATH")}, Tasks: []client.Task{
		// a fails at once the first time; retried, it completes once released.
		{ID: "a", Retries: &none, Command: sh("if [ -e " + file("a1") + " ]; then " + until("release-a") + "exit 0; fi; touch " + file("a1") + "; exit 1")},
		{ID: "g", Command: sh(until("release-g"))}, // runs across the restart
		{ID: "b", Dependencies: []string{"a", "g"}, DependencyOn: map[string]string{"a": "any"}, Command: []string{"true"}},
		{ID: "f", Dependencies: []string{"a", "g"}, DependencyOn: map[string]string{"a": "failure"}, Command: []string{"true"}},
		{ID: "p", Dependencies: []string{"a"}, Command: []string{"true"}},
		{ID: "d", Dependencies: []string{"a"}, DependencyOn: map[string]string{"a": "any"}, Command: []string{"true"}},
		// h fails at once the first time; retried, it fails once released.
		{ID: "h", Retries: &none, Command: sh("if [ -e " + file("h1") + " ]; then " + until("release-h") + "exit 1; fi; touch " + file("h1") + "; exit 1")},
		{ID: "q", Dependencies: []string{"a", "h"}, DependencyOn: map[string]string{"h": "any"}, Command: []string{"true"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "1/a", "failed")
	waitState(t, c, "1/p", "blocked")
	waitState(t, c, "1/d", "complete")
	waitState(t, c, "1/g", "running")
	waitState(t, c, "1/b", "pending")
	waitState(t, c, "1/f", "pending")
	waitState(t, c, "1/h", "failed")
	waitState(t, c, "1/q", "blocked")

	// The daemon stops; g runs on under its supervisor, and the next
	// daemon adopts it and queues b and f again.
	if _, errOut, code := w.gs(t, "/", nil, "daemon", "stop"); code != 0 {
		t.Fatalf("daemon stop: %s", errOut)
	}
	<-d.exited
	w.start(t, "-j", "4")
	c = w.client(t)
	waitState(t, c, "1/g", "running")

	if got, err := c.Retry(ctx, "1/a"); err != nil || strings.Join(got, " ") != "1/a 1/p 1/q" {
		t.Fatalf("retry 1/a: %v, %v; want 1/a 1/p 1/q", got, err)
	}
	if got, err := c.Retry(ctx, "1/h"); err != nil || strings.Join(got, " ") != "1/h" {
		t.Fatalf("retry 1/h: %v, %v; want 1/h", got, err)
	}
	waitState(t, c, "1/h", "running")
	waitState(t, c, "1/a", "running")
	for _, id := range []string{"1/b", "1/f"} {
		if q := waitState(t, c, id, "pending"); !strings.Contains(q.Waiting, "1/a (") || q.WaitingKind != "dependencies" {
			t.Errorf("%s after the retry: waiting %q (%s), want it to wait for 1/a", id, q.Waiting, q.WaitingKind)
		}
	}
	// g's end is committed with what it lets start: b would be running by
	// the time g shows complete if it did not wait for a.
	touch("release-g")
	waitState(t, c, "1/g", "complete")
	if q := waitState(t, c, "1/b", "pending"); q.Attempts != 0 || !strings.Contains(q.Waiting, "1/a (any outcome)") {
		t.Fatalf("b once g completed, a running again: %+v; want it pending, waiting for a", q)
	}

	touch("release-a")
	a := waitState(t, c, "1/a", "complete")
	b := waitState(t, c, "1/b", "complete")
	waitState(t, c, "1/p", "complete")
	if a.Attempts != 2 || b.Attempts != 1 || b.Started == nil || a.Ended == nil || b.Started.Before(*a.Ended) {
		t.Errorf("a %+v, b %+v: want a's second attempt to end before b starts", a, b)
	}
	if f := waitState(t, c, "1/f", "blocked"); !f.NotNeeded || f.Attempts != 0 || f.BlockedBy != "1/a" {
		t.Errorf("f: %+v, want blocked as not needed by a's completion", f)
	}
	if q := waitState(t, c, "1/d", "complete"); q.Attempts != 1 {
		t.Errorf("d ran %d times, want once: it had finished before the retry", q.Attempts)
	}
	// a's end is committed with what it lets start: q would be running
	// by now if it did not wait for h.
	if q := waitState(t, c, "1/q", "pending"); q.Attempts != 0 || !strings.Contains(q.Waiting, "1/h") {
		t.Fatalf("q once a completed, h running again: %+v; want it pending, waiting for h", q)
	}
	touch("release-h")
	h := waitState(t, c, "1/h", "failed")
	q := waitState(t, c, "1/q", "complete")
	if h.Attempts != 2 || q.Attempts != 1 || q.Started == nil || h.Ended == nil || q.Started.Before(*h.Ended) {
		t.Errorf("h %+v, q %+v: want h's second attempt to end before q starts", h, q)
	}
}
