package cli_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

// gpusJSON is "gpusched gpus --json".
type gpusJSON struct {
	Source       string        `json:"source"`
	RunDir       string        `json:"run_dir"`
	SchedulerPID *int          `json:"scheduler_pid"`
	Updated      *time.Time    `json:"updated"`
	LiveError    string        `json:"live_error"`
	Cards        []gpuCardJSON `json:"cards"`
}

func gpusOf(t *testing.T, env []string, args ...string) gpusJSON {
	t.Helper()
	r := gpuGS(t, env, append([]string{"gpus", "--json"}, args...)...)
	r.want(t, 0)
	var g gpusJSON
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
		t.Fatalf("gpus --json: %v\n%s", err, r.stdout)
	}
	return g
}

// While a scheduler runs, gpus shows its view of the cards and says so.
// Once the run has ended, gpus reads nvidia-smi now (a card that was
// cooling down when the run ended is not "cooling down" any more), and
// says that the run's last view is in status; status shows that view with
// its age, the cooldown as one that was; with nvidia-smi broken, gpus falls
// back to that last view and says why.
func TestGPUsAfterRun(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	wf, runDir := m.workflow(`
scheduling:
  gpu_cooldown: 1h
  gpu_poll_interval: 100ms
  kill_grace: 100ms
tasks:
  - id: train
    resources: {device: cuda, memory_mib: 4000}
    args: ` + m.job("--mem", "4000", "--duration", "1h") + `
`)
	run := startGPURun(t, m.env, wf)
	waitFor(t, 30*time.Second, "train to hold card 0", func() bool {
		s, ok := gpuPollStatus(t, runDir)
		return ok && len(s.GPUs) == 1 && len(s.GPUs[0].Tasks) == 1
	})
	g := gpusOf(t, m.env, wf)
	if g.Source != "run" || g.SchedulerPID == nil || *g.SchedulerPID != schedulerPID(runDir) || g.Updated == nil ||
		len(g.Cards) != 1 || len(g.Cards[0].Tasks) != 1 {
		t.Errorf("gpus during the run: %+v; want the scheduler's view, with its pid and train on card 0", g)
	}
	table := gpuGS(t, m.env, "gpus", wf)
	if !regexp.MustCompile(`^run \S+, as its scheduler \(pid \d+\) sees them\ncards as of \d\d:\d\d:\d\d, \d+s ago \(MiB\):\n`).MatchString(table.stdout) {
		t.Errorf("gpus table during the run:\n%s", table.stdout)
	}

	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	run.wait(t).want(t, 1)

	// After the run: the cards now.
	g = gpusOf(t, m.env, wf)
	if g.Source != "live" || g.SchedulerPID != nil || len(g.Cards) != 1 || g.Cards[0].State != "ok" || len(g.Cards[0].Tasks) != 0 {
		t.Errorf("gpus after the run: %+v; want a live reading, card 0 ok and empty", g)
	}
	table = gpuGS(t, m.env, "gpus", wf)
	table.want(t, 0)
	if !regexp.MustCompile(`^live reading of nvidia-smi at \d\d:\d\d:\d\d \(no task of ours counted\)\n`+
		`no scheduler runs on `+regexp.QuoteMeta(runDir)+`; its last view, of \d\d:\d\d:\d\d \(\d+s ago\), is in gpusched status\n`).MatchString(table.stdout) ||
		strings.Contains(table.stdout, "cooling") {
		t.Errorf("gpus table after the run:\n%s", table.stdout)
	}

	// status: the run's last view, with its age, the cooldown in the past.
	st := gpuGS(t, nil, "status", wf)
	st.want(t, 0)
	if !regexp.MustCompile(`(?m)^cards as of \d\d:\d\d:\d\d, \d+s ago; the run has ended \(MiB; "gpusched gpus" reads them now\):$`).MatchString(st.stdout) ||
		!regexp.MustCompile(`(?m)^0 .*  was cooling down: a task just left it \(until \d\d:\d\d:\d\d\)  `).MatchString(st.stdout) {
		t.Errorf("status after the run:\n%s", st.stdout)
	}
	var sj struct {
		GPUsAsOf *time.Time `json:"gpus_as_of"`
	}
	if r := gpuGS(t, nil, "status", "--json", wf); json.Unmarshal([]byte(r.stdout), &sj) != nil || sj.GPUsAsOf == nil {
		t.Errorf("status --json has no gpus_as_of:\n%s", r.stdout)
	}

	// nvidia-smi broken: the last view, saying why and how old.
	m.update(func(s *fakegpu.State) { s.Mode = fakegpu.ModeDriverFailure })
	g = gpusOf(t, m.env, wf)
	if g.Source != "run" || g.SchedulerPID != nil || g.Updated == nil || !strings.Contains(g.LiveError, "couldn't communicate with the NVIDIA driver") {
		t.Errorf("gpus with nvidia-smi broken after the run: %+v", g)
	}
	table = gpuGS(t, m.env, "gpus", wf)
	table.want(t, 0)
	if !strings.HasPrefix(table.stdout, "run "+runDir+": no scheduler runs on it, and nvidia-smi cannot be read now (") ||
		!strings.Contains(table.stdout, "ago; the run has ended") || !strings.Contains(table.stdout, "was cooling down") {
		t.Errorf("gpus table with nvidia-smi broken after the run:\n%s", table.stdout)
	}
}
