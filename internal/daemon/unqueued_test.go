package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
)

// A daemon that stopped after saving a run in runs.db and before queueing
// its tasks left a run whose tasks the state database never got: the
// next daemon shows them failed, saying why, instead of a run with
// nothing in it that a wait cannot find.
func TestUnqueuedRunShownFailed(t *testing.T) {
	dir := shortDir(t)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// What submit leaves when the daemon stops between its two steps:
	// the run saved, its tasks never submitted.
	rs, err := openRuns(state)
	if err != nil {
		t.Fatal(err)
	}
	lost := &run{id: rs.reserve(), uid: os.Getuid(), user: "me", kind: client.KindWorkflow, name: "wf.yaml",
		created: time.Now(), tasks: []taskMeta{{inner: "a"}, {inner: "b"}}}
	if _, _, err := rs.save(lost); err != nil {
		t.Fatal(err)
	}
	if err := rs.close(); err != nil {
		t.Fatal(err)
	}

	d := newTestDaemon(t, Config{StateDir: state, Socket: filepath.Join(dir, "s")})
	ctx := context.Background()
	tasks, err := d.client.Queue(ctx, client.QueueOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.TaskInfo{}
	for _, ti := range tasks {
		got[ti.ID] = ti
	}
	for _, id := range []string{"1/a", "1/b"} {
		ti, ok := got[id]
		if !ok {
			t.Fatalf("queue --all shows %v: task %s of the unqueued run is missing", tasks, id)
		}
		if ti.State != "failed" || ti.Error != unqueued {
			t.Errorf("task %s: %s, %q; want failed, %q", id, ti.State, ti.Error, unqueued)
		}
	}
	ended, err := d.client.Wait(ctx, []string{"1"}, nil)
	if err != nil {
		t.Fatalf("wait on the unqueued run: %v", err)
	}
	if len(ended) != 2 || ended[0].State != "failed" || ended[1].State != "failed" {
		t.Errorf("wait on the unqueued run: %+v, want its two tasks failed", ended)
	}
	// A new run is numbered after it, and runs.
	sub, err := d.client.Submit(ctx, cmd("true"))
	if err != nil {
		t.Fatal(err)
	}
	if sub.Run != "2" {
		t.Errorf("the next run is %s, want 2", sub.Run)
	}
}
