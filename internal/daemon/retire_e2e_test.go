package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// states returns the tasks' states and attempts, "ID=STATE/ATTEMPTS", as
// the queue shows them.
func states(t *testing.T, c *client.Client, ids ...string) string {
	t.Helper()
	q, err := c.Queue(context.Background(), client.QueueOptions{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tk := range q {
		out = append(out, tk.ID+"="+tk.State+"/"+string(rune('0'+tk.Attempts)))
	}
	return strings.Join(out, " ")
}

// A failed task and the task it blocked are retried alike whether the
// daemon retired them or they finished before it started: both run
// again, their history kept.
func TestRetryOfTasksNotInMemory(t *testing.T) {
	w := newWorld(t)
	d := w.start(t)
	c := w.client(t)
	ctx := context.Background()
	env := map[string]string{"PATH": os.Getenv("PATH")}
	marker, out := filepath.Join(w.dir, "marker"), filepath.Join(w.dir, "out")
	for _, cmd := range []client.Command{
		{Args: []string{"test", "-e", marker}},
		{Args: []string{"sh", "-c", "echo ran >> " + out}, After: []string{"1"}},
	} {
		cmd.Env, cmd.Dir = env, w.dir
		if _, err := c.Submit(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	c.Wait(ctx, []string{"1", "2"}, nil)
	if got := states(t, c, "1", "2"); got != "1=failed/1 2=blocked/0" {
		t.Fatalf("before the retries: %s", got)
	}
	// Retired by this daemon: retried, they fail and are blocked again.
	if retried, err := c.Retry(ctx, "1"); err != nil || strings.Join(retried, " ") != "1 2" {
		t.Fatalf("retry of retired tasks: %v %v", retried, err)
	}
	c.Wait(ctx, []string{"1", "2"}, nil)
	if got := states(t, c, "1", "2"); got != "1=failed/2 2=blocked/0" {
		t.Fatalf("after the first retry: %s", got)
	}
	// Finished before the daemon started.
	d.kill9(t)
	w.start(t)
	c = w.client(t)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := w.gs(t, w.dir, nil, "retry", "1"); code != 0 {
		t.Fatalf("gpusched retry 1 after a restart: %d %s %s", code, stdout, stderr)
	}
	ended, err := c.Wait(ctx, []string{"1", "2"}, nil)
	if err != nil || len(ended) != 2 {
		t.Fatalf("wait: %v %v", ended, err)
	}
	if got := states(t, c, "1", "2"); got != "1=complete/3 2=complete/1" {
		t.Errorf("after the retry that follows the restart: %s", got)
	}
	if b, _ := os.ReadFile(out); string(b) != "ran\n" {
		t.Errorf("the blocked task's output: %q", b)
	}
	if _, err := c.Retry(ctx, "1"); err == nil || !strings.Contains(err.Error(), "complete") {
		t.Errorf("retry of a completed task: %v", err)
	}
}
