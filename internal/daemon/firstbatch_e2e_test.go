package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// A fresh daemon's first submission, a workflow big enough to be streamed
// into the state database (the engine's streamMin), may start its first
// task before the rest is admitted (the early start gpusched run takes):
// every task runs once, after the tasks it depends on, and the daemon
// goes on taking submissions.
func TestFirstBigWorkflowOfAFreshDaemon(t *testing.T) {
	d := newTestDaemon(t, Config{})
	ctx := context.Background()
	dir := shortDir(t)
	const chains, length = 110, 10 // 1,100 tasks, over streamMin
	var tasks []client.Task
	for c := range chains {
		for i := range length {
			id := fmt.Sprintf("c%d-%d", c, i)
			// Each task fails unless the one before it in its chain is done,
			// and if it ever runs twice.
			script := "test ! -e " + id + " && touch " + id
			tk := client.Task{ID: id, Command: []string{"sh", "-c", script}}
			if i > 0 {
				prev := fmt.Sprintf("c%d-%d", c, i-1)
				tk.Command = []string{"sh", "-c", "test -e " + prev + " && " + script}
				tk.Dependencies = []string{prev}
			}
			tasks = append(tasks, tk)
		}
	}
	wf, err := d.client.SubmitWorkflow(ctx, client.Workflow{Name: "big.yaml", Dir: dir,
		Env: map[string]string{"PATH": os.Getenv("PATH")}, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if len(wf.Tasks) != chains*length {
		t.Fatalf("the run has %d tasks, want %d", len(wf.Tasks), chains*length)
	}
	ended, err := d.client.Wait(ctx, []string{wf.Run}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, e := range ended {
		if e.State != "complete" && bad < 5 {
			bad++
			t.Errorf("%s: %s (exit %v), want complete", e.ID, e.State, e.ExitCode)
		}
	}
	if len(ended) != chains*length {
		t.Errorf("%d tasks ended, want %d", len(ended), chains*length)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "c*-*")); len(files) != chains*length {
		t.Errorf("%d tasks left their file, want %d", len(files), chains*length)
	}
	next, err := d.client.Submit(ctx, cmd("true"))
	if err != nil {
		t.Fatal(err)
	}
	if ended, err := d.client.Wait(ctx, []string{next.Run}, nil); err != nil || len(ended) != 1 || ended[0].State != "complete" {
		t.Errorf("the next submission: %+v, %v", ended, err)
	}
}
