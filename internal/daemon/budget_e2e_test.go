package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/testbin"
)

// fakeGPUs has the world's daemons see the fake machine st, through the
// fake nvidia-smi.
func (w *world) fakeGPUs(t *testing.T, st fakegpu.State) {
	t.Helper()
	smi, err := testbin.Build("cmd/fake-nvidia-smi")
	if err != nil {
		t.Fatal(err)
	}
	gpuState := filepath.Join(w.dir, "gpu-state.json")
	if err := fakegpu.Save(gpuState, st); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "GPUSCHED_NVIDIA_SMI="+smi, fakegpu.EnvState+"="+gpuState)
}

// Through the daemon, memory_mib: auto learns from the owner's earlier
// runs: a task of the same id, command and dir asks for its peak plus the
// margin; one whose command changed starts over at memory_mib_max.
func TestDaemonLearnsAutoBudgets(t *testing.T) {
	job, err := testbin.Build("cmd/fake-gpu-job")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	w.fakeGPUs(t, fakegpu.State{Cards: []fakegpu.Card{{Index: 0, UUID: "GPU-fade0000-7e57-4000-8000-000000000000", TotalMiB: 40960}}})
	d := w.start(t)
	work := filepath.Join(w.dir, "work")
	os.Mkdir(work, 0o755)
	wf := filepath.Join(work, "wf.yaml")
	// The daemon reads the cards every 2s: each job lives twice that, so
	// that a read delayed by a loaded machine still sees it.
	write := func(evalDuration string) {
		doc := fmt.Sprintf(`tasks:
  - id: train
    resources: {device: cuda, memory_mib: auto, memory_mib_max: 12000}
    args: [%q, --mem, "3000", --duration, 4000ms]
  - id: eval
    resources: {device: cuda, memory_mib: auto, memory_mib_max: 12000}
    args: [%q, --mem, "2000", --duration, %s]
`, job, job, evalDuration)
		if err := os.WriteFile(wf, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, evalDuration := range []string{"4000ms", "4100ms"} {
		write(evalDuration)
		out, errOut, code := w.gs(t, work, nil, "submit", wf)
		if code != 0 || strings.TrimSpace(out) != fmt.Sprint(i+1) {
			t.Fatalf("submit %d: %q %q %d", i+1, out, errOut, code)
		}
		if _, errOut, code := w.gs(t, work, nil, "wait", strings.TrimSpace(out)); code != 0 {
			b, _ := os.ReadFile(d.log)
			t.Fatalf("wait %d: %q, exit %d\ndaemon log:\n%s", i+1, errOut, code, b)
		}
	}
	st, err := store.OpenSQLiteReadOnly(filepath.Join(w.state, gpusched.StateFile), w.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	want := map[string]int64{"1/train": 12000, "1/eval": 12000, "2/train": 3584, "2/eval": 12000}
	for id, asked := range want {
		r, ok, err := st.LookupTask(id)
		if err != nil || !ok || len(r.Attempts) != 1 {
			t.Fatalf("task %s: %+v, %v, %v", id, r.Record, ok, err)
		}
		if a := r.Attempts[0]; a.MemRequestedMiB != asked {
			t.Errorf("task %s asked for %d MiB (peak %d), want %d", id, a.MemRequestedMiB, a.MemPeakMiB, asked)
		}
	}
	if r, _, _ := st.LookupTask("1/train"); r.Attempts[0].MemPeakMiB != 3000 {
		t.Errorf("1/train peaked at %d MiB, want 3000: the poll did not see the job", r.Attempts[0].MemPeakMiB)
	}

	// The queue says the budget chosen, and that it was learned, while
	// the task waits: behind a gate, which its history does not look at.
	gate := filepath.Join(w.dir, "gate")
	doc := fmt.Sprintf(`tasks:
  - id: gate
    args: [sh, -c, "while [ ! -e %s ]; do sleep 0.05; done"]
  - id: train
    dependencies: [gate]
    resources: {device: cuda, memory_mib: auto, memory_mib_max: 12000}
    args: [%q, --mem, "3000", --duration, 4000ms]
`, gate, job)
	if err := os.WriteFile(wf, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := w.gs(t, work, nil, "submit", wf); code != 0 || strings.TrimSpace(out) != "3" {
		t.Fatalf("submit 3: %q %q %d", out, errOut, code)
	}
	q, err := w.client(t).Queue(context.Background(), client.QueueOptions{IDs: []string{"3"}})
	if err != nil || len(q) != 2 {
		t.Fatalf("queue of run 3: %+v, %v", q, err)
	}
	const budget = "memory_mib auto: 3584 MiB (peak 3000 MiB in 2 attempts + margin)"
	if tr := q[1]; tr.GPUMiB != 3584 || tr.GPUMiBSource != "history" || tr.GPUBudget != budget {
		t.Errorf("3/train in the queue: gpu_mib %d, source %q, budget %q; want 3584, history, %q", tr.GPUMiB, tr.GPUMiBSource, tr.GPUBudget, budget)
	}
	if q[0].GPUMiB != 0 || q[0].GPUBudget != "" {
		t.Errorf("3/gate, a CPU task, shows a budget: %+v", q[0])
	}
	if out, _, _ := w.gs(t, work, nil, "queue"); !strings.Contains(out, budget) {
		t.Errorf("the queue's table does not say 3/train's budget:\n%s", out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := w.gs(t, work, nil, "wait", "3"); code != 0 {
		t.Fatalf("wait 3: %q, exit %d", errOut, code)
	}
	if q, err := w.client(t).Queue(context.Background(), client.QueueOptions{IDs: []string{"3/train"}}); err != nil || len(q) != 1 || q[0].GPUMiB != 0 {
		t.Errorf("3/train, finished, in the queue: %+v, %v; want no budget shown", q, err)
	}
}
