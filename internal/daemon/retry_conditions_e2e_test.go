package daemon_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// Retrying a task the scheduler no longer holds (retired) when tasks
// depend on it with conditions behaves as the engine's Retry of a task it
// holds:
//   - a pending task that counted the retried task's end (on: any) waits
//     for its new end, and does not start before it;
//   - a blocked task taken up with it that its other dependency makes not
//     needed (on: failure of a task that completed) stays blocked, as not
//     needed, and the retry goes on without it.
func TestRetryOfRetiredTaskWithConditions(t *testing.T) {
	w := newWorld(t)
	w.start(t, "-j", "4")
	c := w.client(t)
	ctx := context.Background()
	file, touch, until, sh := w.flags(t)
	none := 0
	_, err := c.SubmitWorkflow(ctx, client.Workflow{Name: "wf", Dir: w.dir, Env: map[string]string{"PATH": os.Getenv("PATH")}, Tasks: []client.Task{
		// a fails at once the first time; retried, it fails once released.
		{ID: "a", Retries: &none, Command: sh("if [ -e " + file("a1") + " ]; then " + until("release-a") + "exit 1; fi; touch " + file("a1") + "; exit 1")},
		{ID: "g", Command: sh(until("release-g"))},
		{ID: "b", Dependencies: []string{"a", "g"}, DependencyOn: map[string]string{"a": "any"}, Command: []string{"true"}},
		{ID: "x", Retries: &none, Command: []string{"false"}},
		{ID: "k", Command: sh(until("release-k"))},
		{ID: "t", Dependencies: []string{"x", "k"}, DependencyOn: map[string]string{"k": "failure"}, Command: []string{"true"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "1/a", "failed")
	waitState(t, c, "1/t", "blocked")
	if q := waitState(t, c, "1/b", "pending"); q.Attempts != 0 {
		t.Fatalf("b before the retry: %+v", q)
	}

	// a, retired, runs again; b, pending, counted a's first end.
	if got, err := c.Retry(ctx, "1/a"); err != nil || strings.Join(got, " ") != "1/a" {
		t.Fatalf("retry 1/a: %v, %v; want 1/a", got, err)
	}
	waitFile(t, file("a1"))
	waitState(t, c, "1/a", "running")
	touch("release-g")
	waitState(t, c, "1/g", "complete")
	if q := waitState(t, c, "1/b", "pending"); q.Attempts != 0 {
		t.Fatalf("b started while a, which it follows on any end, runs again: %+v", q)
	}
	touch("release-a")
	a := waitState(t, c, "1/a", "failed")
	b := waitState(t, c, "1/b", "complete")
	if a.Attempts != 2 || b.Started == nil || a.Ended == nil || b.Started.Before(*a.Ended) {
		t.Errorf("a %+v, b %+v: want a's second attempt to end before b starts", a, b)
	}

	// t was blocked by x's failure; k has completed since, so t (on k's
	// failure) is not needed: retrying x leaves it blocked, as not needed.
	touch("release-k")
	waitState(t, c, "1/k", "complete")
	got, err := c.Retry(ctx, "1/x")
	if err != nil || strings.Join(got, " ") != "1/x" {
		t.Fatalf("retry 1/x: %v, %v; want 1/x alone", got, err)
	}
	waitState(t, c, "1/x", "failed")
	tk := waitState(t, c, "1/t", "blocked")
	if !tk.NotNeeded || tk.Attempts != 0 {
		t.Errorf("t after the retry of x: %+v, want blocked as not needed", tk)
	}
}
