package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// submit --after-failure and --after-any: a clean-up runs after a task
// that failed, a task after any end runs too, a plain --after is blocked,
// and a clean-up of a task that completed is not needed, which the queue
// says. After a restart, when the daemon's scheduler holds none of them,
// a task after the failure of one that completed is refused, and one
// after any end of one that failed is taken.
func TestSubmitAfterConditions(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	c := w.client(t)
	ctx := context.Background()
	submit := func(args ...string) string {
		t.Helper()
		out, errOut, code := w.gs(t, "/", nil, append([]string{"submit"}, args...)...)
		if code != 0 {
			t.Fatalf("submit %v: exit %d: %s", args, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	// Both wait for the gate: the tasks after them are submitted while
	// the scheduler holds them.
	gate := filepath.Join(w.dir, "gate")
	wait := "while [ ! -e " + gate + " ]; do sleep 0.05; done; "
	bad, good := submit("--", "sh", "-c", wait+"exit 1"), submit("--", "sh", "-c", wait+"exit 0")
	ids := []string{bad, good,
		submit("--after-failure", bad, "--", "true"),
		submit("--after-any", bad, "--", "true"),
		submit("--after", bad, "--", "true"),
		submit("--after-failure", good, "--", "true")}
	// Those after bad wait for it, each with its condition, as the
	// engine says it.
	waiting, err := c.Queue(ctx, client.QueueOptions{IDs: ids[2:5]})
	if err != nil || len(waiting) != 3 {
		t.Fatalf("queue of the tasks after bad: %+v, %v", waiting, err)
	}
	for i, want := range []string{"after " + bad + " (on its failure)", "after " + bad + " (any outcome)", "after " + bad} {
		if waiting[i].Waiting != want {
			t.Errorf("task %s waits %q, want %q", waiting[i].ID, waiting[i].Waiting, want)
		}
	}
	if out, _, _ := w.gs(t, "/", nil, "queue"); !strings.Contains(out, "pending: after "+bad+" (any outcome)") {
		t.Errorf("the queue's table does not say a task waits for any end of %s:\n%s", bad, out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ended, err := c.Wait(ctx, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"failed", "complete", "complete", "complete", "blocked", "blocked"}
	got := map[string]string{}
	for _, e := range ended {
		got[e.ID] = e.State
	}
	for i, id := range ids {
		if got[id] != want[i] {
			t.Errorf("task %s: %s, want %s", id, got[id], want[i])
		}
	}
	q, err := c.Queue(ctx, client.QueueOptions{IDs: ids[4:]})
	if err != nil || len(q) != 2 || q[0].NotNeeded || !q[1].NotNeeded || q[1].BlockedBy != good {
		t.Errorf("queue of the blocked ones: %+v, %v; want the second alone not needed, by %s", q, err, good)
	}
	if _, _, code := w.gs(t, "/", nil, "submit", "--after-any", bad, "--after", bad, "--", "true"); code != 2 {
		t.Errorf("the same task after twice: exit %d, want 2", code)
	}

	// A task waiting, with a condition, for one that runs on across a
	// restart still says its condition after it.
	gate2 := filepath.Join(w.dir, "gate2")
	long := submit("--", "sh", "-c", "while [ ! -e "+gate2+" ]; do sleep 0.05; done")
	onAny := submit("--after-any", long, "--", "true")
	if _, _, code := w.gs(t, "/", nil, "daemon", "stop"); code != 0 {
		t.Fatal("daemon stop failed")
	}
	w.start(t)
	c = w.client(t)
	if q, err := c.Queue(ctx, client.QueueOptions{IDs: []string{onAny}}); err != nil || len(q) != 1 || q[0].Waiting != "after "+long+" (any outcome)" {
		t.Errorf("after a restart, the task after any end of %s: %+v, %v; want it waiting after %s (any outcome)", long, q, err, long)
	}
	if err := os.WriteFile(gate2, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Wait(ctx, []string{onAny}, nil); err != nil || len(e) != 1 || e[0].State != "complete" {
		t.Errorf("the task after any end of %s: %+v, %v", long, e, err)
	}
	_, errOut, code := w.gs(t, "/", nil, "submit", "--after-failure", good, "--", "true")
	if code == 0 || !strings.Contains(errOut, "task "+good+" complete, so a task after it (on its failure) would never run") {
		t.Errorf("after the failure of a task that completed: exit %d, %s", code, errOut)
	}
	after := submit("--after-any", bad, "--", "true")
	if e, err := c.Wait(ctx, []string{after}, nil); err != nil || len(e) != 1 || e[0].State != "complete" {
		t.Errorf("after any end of a task that failed before the restart: %+v, %v", e, err)
	}
}
