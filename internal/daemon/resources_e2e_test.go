package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/store"
)

// waitKind polls the queue until task id is pending for a reason of kind.
func waitKind(t *testing.T, c *client.Client, id, kind string) client.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := c.Queue(context.Background(), client.QueueOptions{IDs: []string{id}})
		if err == nil && len(q) == 1 && q[0].State == "pending" && q[0].WaitingKind == kind {
			return q[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %+v (%v), want it pending for %s", id, q, err, kind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The daemon admits tasks against the cores, host memory and custom
// resources it is given (gpusched daemon --cpus, --memory-mib-host,
// --resource), whether a workflow's or submitted as a command; a task
// that asks for more than there is, or for a resource the daemon does not
// declare, is refused at submit (exit 2), on one line naming the task and
// the resource.
func TestDaemonAdmitsAgainstTheMachine(t *testing.T) {
	w := newWorld(t)
	d := w.start(t, "-j", "8", "--cpus", "4", "--memory-mib-host", "1000", "--resource", "licenses=1")
	c := w.client(t)
	work := filepath.Join(w.dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gate := func(name string) string { return filepath.Join(w.dir, name) }
	until := func(name string) string {
		return fmt.Sprintf("[sh, -c, 'until [ -e %s ]; do sleep 0.02; done']", gate(name))
	}
	submit := func(doc string, args ...string) (string, string, int) {
		t.Helper()
		wf := filepath.Join(work, fmt.Sprintf("wf%d.yaml", time.Now().UnixNano()))
		if doc != "" {
			if err := os.WriteFile(wf, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			args = []string{wf}
		}
		out, errOut, code := w.gs(t, work, nil, append([]string{"submit"}, args...)...)
		return strings.TrimSpace(out), errOut, code
	}
	open := func(name string) {
		t.Helper()
		if err := os.WriteFile(gate(name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Cores: 3 of 4 taken, a task of 2 waits; one of 1 (a command) starts.
	run, errOut, code := submit(`tasks:
  - id: wide
    resources: {cpus: 3}
    args: ` + until("gate1") + `
  - id: two
    resources: {cpus: 2}
    args: [true]
`)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	waitState(t, c, run+"/wide", "running")
	waitKind(t, c, run+"/two", "cpus")
	one, errOut, code := submit("", "--cpus", "1", "--", "sh", "-c", "until [ -e "+gate("gate1")+" ]; do sleep 0.02; done")
	if code != 0 {
		t.Fatalf("submit --cpus 1: exit %d: %s", code, errOut)
	}
	waitState(t, c, one, "running")
	open("gate1")
	if _, err := c.Wait(context.Background(), []string{run, one}, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, run+"/two", "complete")

	// A license and host memory: the second taker of each waits.
	run, errOut, code = submit(`tasks:
  - id: holder
    resources: {licenses: 1, memory_mib_host: 600}
    args: ` + until("gate2") + `
  - id: licensed
    resources: {licenses: 1}
    args: [true]
  - id: hungry
    resources: {memory_mib_host: 600}
    args: [true]
`)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	waitState(t, c, run+"/holder", "running")
	waitKind(t, c, run+"/licensed", "resource")
	waitKind(t, c, run+"/hungry", "host-memory")
	open("gate2")
	ended, err := c.Wait(context.Background(), []string{run}, nil)
	if err != nil || len(ended) != 3 {
		t.Fatalf("wait: %+v, %v", ended, err)
	}
	for _, e := range ended {
		if e.State != "complete" {
			t.Errorf("task %s: %s", e.ID, e.State)
		}
	}

	// Refused before anything runs, on one line naming task and resource.
	for _, tc := range []struct {
		doc  string
		args []string
		want []string
	}{
		{doc: "tasks:\n  - id: solver\n    resources: {tokens: 1}\n    args: [true]\n", want: []string{`task "solver"`, "resources.tokens", "--resource tokens=N"}},
		{doc: "tasks:\n  - id: greedy\n    resources: {licenses: 2}\n    args: [true]\n", want: []string{`task "greedy"`, "resources.licenses", "has 1 in all"}},
		{doc: "tasks:\n  - id: wide\n    resources: {cpus: 5}\n    args: [true]\n", want: []string{`task "wide"`, "5 cpus", "4 in all"}},
		{args: []string{"--memory-mib-host", "2000", "--", "true"}, want: []string{"2000 MiB", "1000 MiB"}},
		{args: []string{"--resource", "tokens=1", "--", "true"}, want: []string{"resources.tokens"}},
	} {
		out, errOut, code := submit(tc.doc, tc.args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("submit %q %q: exit %d, stdout %q, stderr %q; want exit 2 and one line", tc.doc, tc.args, code, out, errOut)
		}
		for _, s := range tc.want {
			if !strings.Contains(errOut, s) {
				t.Errorf("submit %q %q: %q does not say %q", tc.doc, tc.args, errOut, s)
			}
		}
	}
	runs, err := c.Runs(context.Background())
	if err != nil || len(runs) != 3 {
		b, _ := os.ReadFile(d.log)
		t.Errorf("runs after the refusals: %d (%v), want the 3 accepted\n%s", len(runs), err, b)
	}
}

// Through the daemon, memory_mib_host: auto learns from the owner's
// earlier runs, as memory_mib: auto does: the first run asks for
// memory_mib_host_max, the next for the first's peak RSS plus the margin.
func TestDaemonLearnsHostMemoryBudgets(t *testing.T) {
	w := newWorld(t)
	w.start(t, "--memory-mib-host", "8000")
	work := filepath.Join(w.dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(work, "wf.yaml")
	// About 40 MiB resident for 2.5s: the daemon samples every 2s.
	doc := `tasks:
  - id: prep
    resources: {memory_mib_host: auto, memory_mib_host_max: 3000}
    args: [sh, -c, 'x=$(head -c 40000000 /dev/zero | tr "\0" a); sleep 2.5; echo ${#x}']
`
	if err := os.WriteFile(wf, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		out, errOut, code := w.gs(t, work, nil, "submit", wf)
		if code != 0 || strings.TrimSpace(out) != fmt.Sprint(i) {
			t.Fatalf("submit %d: %q %q %d", i, out, errOut, code)
		}
		if _, errOut, code := w.gs(t, work, nil, "wait", strings.TrimSpace(out)); code != 0 {
			t.Fatalf("wait %d: %q, exit %d", i, errOut, code)
		}
	}
	st, err := store.OpenSQLiteReadOnly(filepath.Join(w.state, gpusched.StateFile), w.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	attempt := func(id string) (asked, peak int64) {
		r, ok, err := st.LookupTask(id)
		if err != nil || !ok || len(r.Attempts) != 1 {
			t.Fatalf("task %s: %+v, %v, %v", id, r.Record, ok, err)
		}
		return r.Attempts[0].HostMemRequestedMiB, r.Attempts[0].RSSPeakMiB
	}
	asked1, peak1 := attempt("1/prep")
	asked2, _ := attempt("2/prep")
	if asked1 != 3000 || peak1 < 30 {
		t.Fatalf("1/prep asked for %d MiB (want memory_mib_host_max, 3000) and peaked at %d (want about 40)", asked1, peak1)
	}
	if asked2 >= 3000 || asked2 < peak1+512 || asked2%256 != 0 {
		t.Errorf("2/prep asked for %d MiB; want its first run's peak %d plus the margin (512), rounded up to 256", asked2, peak1)
	}

	// gpusched suggest reads the daemon's history: the task once, by its
	// newest run, over both runs' attempts.
	out, errOut, code := w.gs(t, work, nil, "suggest", "--daemon", "--json")
	var got struct {
		Daemon string
		Tasks  []struct {
			ID           string `json:"id"`
			Resource     string `json:"resource"`
			AskedMiB     int64  `json:"asked_mib"`
			PeakMiB      int64  `json:"peak_mib"`
			ProposedMiB  int64  `json:"proposed_mib"`
			Attempts     int    `json:"attempts"`
			Runs         int    `json:"runs"`
			MemoryAuto   bool   `json:"memory_auto"`
			MemoryMaxMiB int64  `json:"memory_mib_max"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.Tasks) != 1 {
		t.Fatalf("suggest --daemon --json: exit %d, %q, %s", code, out, errOut)
	}
	if s := got.Tasks[0]; s.ID != "2/prep" || s.Resource != "memory_mib_host" || s.AskedMiB != asked2 || s.PeakMiB < peak1 ||
		s.Attempts != 2 || s.Runs != 2 || !s.MemoryAuto || s.MemoryMaxMiB != 3000 || s.ProposedMiB < s.PeakMiB+512 {
		t.Errorf("suggest --daemon --json: %+v; want 2/prep's host row over 2 runs, asked %d", s, asked2)
	}
	out, errOut, code = w.gs(t, work, nil, "suggest", "--daemon", wf)
	if code != 0 || !regexp.MustCompile(`(?m)^prep\s+host auto \(max 3000\)\s+`+fmt.Sprint(asked2)+`\s+\d+\s+2\s+\d+`).MatchString(out) ||
		!strings.Contains(out, "the daemon at") {
		t.Errorf("suggest --daemon wf.yaml: exit %d\n%s%s", code, out, errOut)
	}

	// The queue says the learned budget while the task waits, behind a
	// gate, as it says a learned GPU budget.
	gate := filepath.Join(w.dir, "gate")
	gated := fmt.Sprintf(`tasks:
  - id: gate
    args: [sh, -c, "while [ ! -e %s ]; do sleep 0.05; done"]
  - id: prep
    dependencies: [gate]
    resources: {memory_mib_host: auto, memory_mib_host_max: 3000}
    args: [sh, -c, 'x=$(head -c 40000000 /dev/zero | tr "\0" a); sleep 2.5; echo ${#x}']
`, gate)
	if err := os.WriteFile(wf, []byte(gated), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := w.gs(t, work, nil, "submit", wf); code != 0 || strings.TrimSpace(out) != "3" {
		t.Fatalf("submit 3: %q %q %d", out, errOut, code)
	}
	q, err := w.client(t).Queue(context.Background(), client.QueueOptions{IDs: []string{"3"}})
	if err != nil || len(q) != 2 {
		t.Fatalf("queue of run 3: %+v, %v", q, err)
	}
	note := fmt.Sprintf("memory_mib_host auto: %d MiB (peak ", asked2)
	if p := q[1]; p.MemoryMiBHost != asked2 || p.MemoryMiBHostSource != "history" || !strings.HasPrefix(p.HostBudget, note) ||
		!strings.HasSuffix(p.HostBudget, " in 2 attempts + margin)") || p.GPUBudget != "" || p.GPUMiB != 0 {
		t.Errorf("3/prep in the queue: %+v; want memory_mib_host %d from history, said %q...", p, asked2, note)
	}
	if q[0].MemoryMiBHost != 0 || q[0].HostBudget != "" {
		t.Errorf("3/gate, with no learned budget, shows one: %+v", q[0])
	}
	if out, _, _ := w.gs(t, work, nil, "queue"); !strings.Contains(out, q[1].HostBudget) {
		t.Errorf("the queue's table does not say 3/prep's budget %q:\n%s", q[1].HostBudget, out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := w.gs(t, work, nil, "wait", "3"); code != 0 {
		t.Fatalf("wait 3: %q, exit %d", errOut, code)
	}
}
