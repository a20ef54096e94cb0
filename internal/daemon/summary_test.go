package daemon

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/store"
)

// startOn starts a daemon on stateDir; stop stops it (its tasks killed).
func startOn(t *testing.T, stateDir string) (d *Daemon, c *client.Client, stop func()) {
	t.Helper()
	cfg := Config{Socket: filepath.Join(filepath.Dir(stateDir), "s"), StateDir: stateDir, Log: io.Discard}
	d, sock, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx, sock) }()
	if c, err = client.Dial(context.Background(), cfg.Socket); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	stop = func() {
		if once.Swap(true) {
			return
		}
		c.Close()
		cancel()
		<-done
		d.sched.Close()
		d.runs.close()
		d.lock.Close() // as the process's exit would
	}
	t.Cleanup(stop)
	return d, c, stop
}

// countReads makes d count its reads of the state database: whole tasks
// (stored) and batches of summaries.
func countReads(d *Daemon) (lookups, batches *atomic.Int64) {
	lookups, batches = new(atomic.Int64), new(atomic.Int64)
	look, read := d.lookupStored, d.readSummaries
	d.lookupStored = func(id string) (gpusched.StoredTask, bool, error) {
		lookups.Add(1)
		return look(id)
	}
	d.readSummaries = func(ids []string) ([]store.Summary, error) {
		batches.Add(1)
		return read(ids)
	}
	return lookups, batches
}

func queueAll(t *testing.T, c *client.Client) string {
	t.Helper()
	q, err := c.Queue(context.Background(), client.QueueOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(q, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fromRecords is the queue as the finished tasks' records show it (as the
// daemon listed them before it kept summaries), read one at a time.
func fromRecords(t *testing.T, d *Daemon) string {
	t.Helper()
	out := []client.TaskInfo{}
	for _, rn := range d.runs.all() {
		for i := range rn.tasks {
			m := &rn.tasks[i]
			st, ok, err := d.sched.Lookup(qualify(rn.id, m.inner))
			if err != nil || !ok || !st.Record.State.Terminal() {
				t.Fatalf("task %s: %v %v %v", m.inner, ok, err, st.Record.State)
			}
			sh := shownOf(&st.Record)
			out = append(out, d.info(peer{uid: d.uid}, rn, m, &sh, nil, nil))
		}
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The queue shows a finished task alike, with no read of it alone, and
// in one read at most for all those it has no summary of: as the daemon
// saw it end (its end event), as it reads it (blocked, cancelled while
// pending), after a restart (from the state database), and as its record
// says.
func TestQueueOfFinishedTasksFromSummaries(t *testing.T) {
	stateDir := filepath.Join(shortDir(t), "state")
	d, c, stop := startOn(t, stateDir)
	lookups, batches := countReads(d)
	ctx := context.Background()
	one := 1
	sub := func(cm client.Command) string {
		t.Helper()
		s, err := c.Submit(ctx, cm)
		if err != nil {
			t.Fatal(err)
		}
		return s.Run
	}
	ok := sub(cmd("true"))
	bad := cmd("sh", "-c", "exit 3")
	bad.Retries = &one
	failed := sub(bad)
	after := cmd("true")
	after.After = []string{failed}
	blocked := sub(after)
	long := sub(cmd("sleep", "60"))
	pending := cmd("true")
	pending.After = []string{long}
	cancelled := sub(pending)
	for { // cancelled once running, with an attempt
		q, err := c.Queue(ctx, client.QueueOptions{IDs: []string{long}})
		if err != nil || len(q) != 1 {
			t.Fatalf("queue %s: %v %v", long, q, err)
		}
		if q[0].State == "running" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, long); err != nil {
		t.Fatal(err)
	}
	ids := []string{ok, failed, blocked, long, cancelled}
	if _, err := c.Wait(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	if got := len(d.sched.Records()); got != 0 {
		t.Fatalf("the scheduler holds %d finished tasks: want them retired", got)
	}
	lookups.Store(0) // wait and cancel read tasks alone
	batches.Store(0)
	seen := queueAll(t, c)
	if n := lookups.Load(); n != 0 {
		t.Errorf("the listing read %d tasks one at a time", n)
	}
	if n := batches.Load(); n > 1 {
		t.Errorf("the listing read summaries %d times: want one read at most", n)
	}
	var q []client.TaskInfo
	_ = json.Unmarshal([]byte(seen), &q)
	want := map[string]string{ok: "complete 1 0", failed: "failed 2 3", blocked: "blocked 0 -", long: "cancelled 1 -", cancelled: "cancelled 0 -"}
	for _, tk := range q {
		code := "-"
		if tk.ExitCode != nil {
			code = string(rune('0' + *tk.ExitCode))
		}
		if got := tk.State + " " + string(rune('0'+tk.Attempts)) + " " + code; got != want[tk.ID] {
			t.Errorf("task %s: %s, want %s", tk.ID, got, want[tk.ID])
		}
	}
	if len(q) != len(want) {
		t.Fatalf("%d tasks listed: %s", len(q), seen)
	}
	if rec := fromRecords(t, d); seen != rec {
		t.Errorf("listed:\n%s\nthe records say:\n%s", seen, rec)
	}
	// Knowing only how they ended (as from the events of a blocking or a
	// cancellation), it reads them all in one read.
	d.tasks.mu.Lock()
	for id, sm := range d.tasks.ended {
		d.tasks.ended[id] = summary{state: sm.state}
	}
	d.tasks.mu.Unlock()
	batches.Store(0)
	if got := queueAll(t, c); got != seen || batches.Load() != 1 || lookups.Load() != 0 {
		t.Errorf("listed from the state database (%d reads of summaries, %d of tasks):\n%s", batches.Load(), lookups.Load(), got)
	}
	before := batches.Load()
	if again := queueAll(t, c); again != seen || batches.Load() != before || lookups.Load() != 0 {
		t.Errorf("listed again (%d reads of summaries, %d of tasks):\n%s", batches.Load()-before, lookups.Load(), again)
	}

	stop()
	d, c, _ = startOn(t, stateDir)
	lookups, batches = countReads(d)
	if after := queueAll(t, c); after != seen {
		t.Errorf("after a restart:\n%s\nbefore:\n%s", after, seen)
	}
	if lookups.Load() != 0 || batches.Load() != 0 {
		t.Errorf("after a restart, the listing read %d tasks and %d batches: want none (restored)", lookups.Load(), batches.Load())
	}
}
