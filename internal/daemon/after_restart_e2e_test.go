package daemon_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// A task submitted after one that finished before the daemon started
// (after_on: any) keeps that dependency, as it does on one the
// scheduler still holds: retrying the finished task makes the pending
// task wait for its new end, and the queue says so.
func TestAfterFinishedBeforeRestartWaitsForItsRetry(t *testing.T) {
	w := newWorld(t)
	d := w.start(t, "-j", "4")
	c := w.client(t)
	ctx := context.Background()
	file, touch, until, sh := w.flags(t)
	env := map[string]string{"PATH": os.Getenv("PATH")}
	none := 0
	// 1 fails at once the first time; retried, it completes once released.
	if _, err := c.Submit(ctx, client.Command{Env: env, Dir: w.dir, Retries: &none,
		Args: sh("if [ -e " + file("a1") + " ]; then " + until("release-a") + "exit 0; fi; touch " + file("a1") + "; exit 1")}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "1", "failed")
	if _, errOut, code := w.gs(t, "/", nil, "daemon", "stop"); code != 0 {
		t.Fatalf("daemon stop: %s", errOut)
	}
	<-d.exited
	w.start(t, "-j", "4")
	c = w.client(t)

	if _, err := c.Submit(ctx, client.Command{Env: env, Dir: w.dir, Args: sh(until("release-g"))}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "2", "running")
	if _, err := c.Submit(ctx, client.Command{Env: env, Dir: w.dir, Args: []string{"true"},
		After: []string{"1", "2"}, AfterOn: map[string]string{"1": "any"}}); err != nil {
		t.Fatalf("submit after a task that failed before the restart (any outcome): %v", err)
	}
	if q := waitState(t, c, "3", "pending"); q.Waiting != "after 2" {
		t.Errorf("3 before the retry: waiting %q, want only 2's end (1's has met its condition)", q.Waiting)
	}

	if got, err := c.Retry(ctx, "1"); err != nil || strings.Join(got, " ") != "1" {
		t.Fatalf("retry 1: %v, %v", got, err)
	}
	waitState(t, c, "1", "running")
	if q := waitState(t, c, "3", "pending"); !strings.Contains(q.Waiting, "1 (any outcome)") {
		t.Errorf("3 after 1 is retried: waiting %q, want it to wait for 1's new end", q.Waiting)
	}
	// 2's end is committed with what it lets start: 3 would be running by
	// the time 2 shows complete if it did not wait for 1.
	touch("release-g")
	waitState(t, c, "2", "complete")
	if q := waitState(t, c, "3", "pending"); q.Attempts != 0 {
		t.Fatalf("3 once 2 completed, 1 running again: %+v; want it pending, waiting for 1", q)
	}
	touch("release-a")
	a := waitState(t, c, "1", "complete")
	b := waitState(t, c, "3", "complete")
	if b.Started == nil || a.Ended == nil || b.Started.Before(*a.Ended) {
		t.Errorf("1 %+v, 3 %+v: want 1's second attempt to end before 3 starts", a, b)
	}
}
