package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
	"github.com/gpusched/gpusched/internal/task"
)

// A workflow's task on two cards runs on two through the daemon, and every
// view of it shows both: its start event, the queue while it runs, the
// queue once it finished (from the daemon's summary), and after a restart
// (from the state database's); gpu stays the first of them.
func TestDaemonTaskOnTwoCards(t *testing.T) {
	w := newWorld(t)
	w.fakeGPUs(t, fakegpu.State{Cards: []fakegpu.Card{
		{Index: 0, UUID: "GPU-fade0000-7e57-4000-8000-000000000000", TotalMiB: 40960},
		{Index: 1, UUID: "GPU-fade0001-7e57-4000-8000-000000000001", TotalMiB: 40960},
	}, Topology: "Topology is not supported on this platform\n"})
	w.start(t)
	c := w.client(t)
	ctx := context.Background()
	events, err := c.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()

	work := filepath.Join(w.dir, "work")
	os.Mkdir(work, 0o755)
	gate := filepath.Join(w.dir, "gate")
	wf := filepath.Join(work, "wf.yaml")
	doc := `tasks:
  - id: pair
    resources: {device: cuda, memory_mib: 1000, gpus: 2}
    args: [sh, -c, "while [ ! -e ` + gate + ` ]; do sleep 0.05; done"]
`
	if err := os.WriteFile(wf, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := w.gs(t, work, nil, "submit", wf); code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("submit: %q %q %d", out, errOut, code)
	}
	var started client.Event
	if err := events.Each(func(ev client.Event) bool {
		if ev.Task == "1/pair" && ev.Kind == "started" {
			started = ev
			return false
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, gpu *int, gpus []int) {
		t.Helper()
		sorted := slices.Sorted(slices.Values(gpus))
		if len(gpus) != 2 || !slices.Equal(sorted, []int{0, 1}) || gpu == nil || *gpu != gpus[0] {
			t.Errorf("%s: gpu %v, gpus %v; want both cards, gpu the first", what, gpu, gpus)
		}
	}
	check("the start event", started.GPU, started.GPUs)
	want := started.GPUs

	queue := func(what string, all bool) {
		t.Helper()
		q, err := c.Queue(ctx, client.QueueOptions{All: all, IDs: []string{"1/pair"}})
		if err != nil || len(q) != 1 {
			t.Fatalf("%s: queue %+v, %v", what, q, err)
		}
		check(what, q[0].GPU, q[0].GPUs)
		if !slices.Equal(q[0].GPUs, want) {
			t.Errorf("%s: gpus %v, want %v as it started", what, q[0].GPUs, want)
		}
		args := []string{"queue", "--all"}
		if out, _, _ := w.gs(t, work, nil, args...); !strings.Contains(out, "  "+task.CardList(want)+"  ") {
			t.Errorf("%s: the queue's table does not show cards %s:\n%s", what, task.CardList(want), out)
		}
	}
	queue("running", false)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := w.gs(t, work, nil, "wait", "1"); code != 0 {
		t.Fatalf("wait: %q, exit %d", errOut, code)
	}
	queue("finished", true)
	if _, _, code := w.gs(t, "/", nil, "daemon", "stop"); code != 0 {
		t.Fatal("daemon stop failed")
	}
	w.start(t)
	c = w.client(t)
	queue("after a restart", true)
}

// gpusched submit --gpus N queues a command on N cards; a count out of
// range, or one without a GPU budget, is refused on one line before the
// daemon is asked.
func TestDaemonSubmitGPUsFlag(t *testing.T) {
	w := newWorld(t)
	w.fakeGPUs(t, fakegpu.State{Cards: []fakegpu.Card{
		{Index: 0, UUID: "GPU-fade0000-7e57-4000-8000-000000000000", TotalMiB: 40960},
		{Index: 1, UUID: "GPU-fade0001-7e57-4000-8000-000000000001", TotalMiB: 40960},
	}, Topology: "Topology is not supported on this platform\n"})
	w.start(t)
	c := w.client(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "0", "--gpu-mib", "1000"}, "--gpus must be from 1 to 64"},
		{[]string{"--gpus", "65", "--exclusive"}, "--gpus must be from 1 to 64"},
		{[]string{"--gpus", "2"}, "give --gpu-mib N or --exclusive"},
	} {
		out, errOut, code := w.gs(t, w.dir, nil, append(append([]string{"submit"}, tc.args...), "--", "true")...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("submit %q: exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
	out, errOut, code := w.gs(t, w.dir, nil, "submit", "--gpus", "2", "--gpu-mib", "1000", "--", "true")
	if code != 0 {
		t.Fatalf("submit --gpus 2: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	if _, errOut, code := w.gs(t, w.dir, nil, "wait", id); code != 0 {
		t.Fatalf("wait %s: %q, exit %d", id, errOut, code)
	}
	q, err := c.Queue(context.Background(), client.QueueOptions{All: true, IDs: []string{id}})
	if err != nil || len(q) != 1 {
		t.Fatalf("queue %s: %+v, %v", id, q, err)
	}
	if got := slices.Sorted(slices.Values(q[0].GPUs)); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("task %s ran on cards %v (gpu %v), want both", id, q[0].GPUs, q[0].GPU)
	}
}
