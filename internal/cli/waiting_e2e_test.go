package cli_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

// waitingJSON is what status --json says of a pending task's wait.
type waitingJSON struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Waiting     string `json:"waiting"`
	WaitingKind string `json:"waiting_kind"`
}

func pollWaiting(t *testing.T, runDir string) (map[string]waitingJSON, bool) {
	t.Helper()
	r := gpuGS(t, nil, "status", "--json", "--run-dir", runDir)
	if r.code != 0 {
		return nil, false
	}
	var s struct {
		Tasks []waitingJSON `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json output is not JSON: %v\n%s", err, r.stdout)
	}
	m := map[string]waitingJSON{}
	for _, tk := range s.Tasks {
		m[tk.ID] = tk
	}
	return m, len(m) > 0
}

// status, from another process, says why each task of a running
// scheduler waits, as the scheduler decided it: its dependencies, a free
// slot, GPU memory, its retry delay; --json gives the kind too. Once the
// scheduler is gone, the view says so instead.
func TestStatusShowsTheSchedulersReasons(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	// -j 3: hog and then gate start first (the CPU tasks need gate, so
	// they find hog running however late the first GPU reading comes);
	// then flaky and busy start; flaky fails at once, and its slot goes to
	// queued1, decide passing waiter over (no room for it beside hog);
	// queued2 finds no slot; after waits for hog.
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
tasks:
  - id: hog
    priority: 2
    resources: {device: cuda, memory_mib: 30000}
    args: ` + m.job("--mem", "30000", "--duration", "1h") + `
  - id: gate
    priority: 1
    resources: {device: cuda, memory_mib: 1}
    args: [true]
  - id: flaky
    dependencies: [gate]
    retries: 1
    retry_delay: 1h
    args: ` + sh("exit 3") + `
  - id: busy
    dependencies: [gate]
    args: ` + sh("sleep 3600") + `
  - id: waiter
    resources: {device: cuda, memory_mib: 20000}
    args: ` + m.job("--mem", "20000", "--duration", "100ms") + `
  - id: queued1
    dependencies: [gate]
    args: ` + sh("sleep 3600") + `
  - id: queued2
    dependencies: [gate]
    args: [true]
  - id: after
    dependencies: [hog]
    args: [true]
`)
	run := startGPURun(t, m.env, wf, "-j", "3")
	want := map[string]struct{ kind, text string }{
		"flaky":   {"retry-delay", "after: exit code 3"},
		"waiter":  {"gpu-memory", "needs 20000 MiB; best card 0 has 10448 MiB left (foreign 0, hog holds 30000)"},
		"queued2": {"slot", "waiting for a free slot"},
		"after":   {"dependencies", "waiting for hog"},
	}
	var got map[string]waitingJSON
	defer func() {
		if t.Failed() {
			t.Logf("status said: %+v", got)
		}
	}()
	waitFor(t, 20*time.Second, "every task to wait for its reason", func() bool {
		if run.exited() {
			t.Fatalf("the run ended:\n%s%s", run.out.String(), run.errb.String())
		}
		var ok bool
		if got, ok = pollWaiting(t, runDir); !ok {
			return false
		}
		for id, w := range want {
			if got[id].WaitingKind != w.kind || !strings.Contains(got[id].Waiting, w.text) {
				return false
			}
		}
		return got["queued1"].State == "running"
	})
	for id, w := range want {
		if tk := got[id]; tk.State != "pending" || !strings.Contains(tk.Waiting, w.text) {
			t.Errorf("%s: %s, waiting %q (%s); want pending, waiting %q", id, tk.State, tk.Waiting, tk.WaitingKind, w.text)
		}
	}
	if w := got["flaky"].Waiting; !strings.HasPrefix(w, "retry at ") || !strings.Contains(w, "(in ") {
		t.Errorf("flaky's note = %q; want when it retries, and in how long", w)
	}
	for _, id := range []string{"hog", "busy", "queued1"} {
		if tk := got[id]; tk.State != "running" || tk.Waiting != "" || tk.WaitingKind != "" {
			t.Errorf("%s: %+v; want running, without a reason", id, tk)
		}
	}
	table := gpuGS(t, nil, "status", "--run-dir", runDir)
	for id, w := range want {
		if !strings.Contains(table.stdout, w.text) {
			t.Errorf("the status table has no %q for %s:\n%s", w.text, id, table.stdout)
		}
	}

	_ = run.cmd.Process.Signal(syscall.SIGTERM)
	run.wait(t)
	got, _ = pollWaiting(t, runDir)
	for id := range want {
		if tk := got[id]; tk.State != "pending" || tk.Waiting != "not started: no scheduler is running" || tk.WaitingKind != "" {
			t.Errorf("after the run, %s: %+v; want pending, not started as no scheduler runs, and no kind", id, tk)
		}
	}
}
