package cli_test

// End to end: a task on two cards, with the real gpusched binary, the fake
// nvidia-smi answering from a fake machine whose topology is a real
// capture of `nvidia-smi topo -m`, and real processes.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

// The captured PCIe machine (testdata/nvidia-smi/SOURCES.md): cards 1-2 and
// 3-4 share a host bridge (PHB), the four are NODE apart, card 0 sits
// across the sockets (SYS).
const fiveCardTopo = "../../testdata/nvidia-smi/topo-5gpu-pcie-sys-node-phb.txt"

type multiAttemptJSON struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	GPU     *int      `json:"gpu"`
	GPUs    []int     `json:"gpus"`
	LogPath string    `json:"log_path"`
	PeakMiB int64     `json:"mem_peak_mib"`
}

type multiTaskJSON struct {
	ID      string             `json:"id"`
	State   string             `json:"state"`
	GPU     *int               `json:"gpu"`
	GPUs    []int              `json:"gpus"`
	Waiting string             `json:"waiting"`
	History []multiAttemptJSON `json:"history"`
}

type multiStatusJSON struct {
	Tasks []multiTaskJSON `json:"tasks"`
	GPUs  []struct {
		Index      int   `json:"index"`
		ChargedMiB int64 `json:"charged_mib"`
		Tasks      []struct {
			Task       string `json:"task"`
			RequestMiB int64  `json:"request_mib"`
		} `json:"tasks"`
	} `json:"gpus"`
}

func multiStatus(t *testing.T, runDir string) (s multiStatusJSON, ok bool) {
	t.Helper()
	r := gpuGS(t, nil, "status", "--json", "--run-dir", runDir)
	if r.code != 0 {
		return s, false
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json output is not JSON: %v\n%s", err, r.stdout)
	}
	return s, len(s.Tasks) > 0
}

// A task asking for two cards of 12000 MiB gets the closest pair that holds
// it: of cards 1, 2 and 3, the two behind one host bridge (2 and 1, the
// one with more room first), not 2 and 3, which have the most room. It
// sees both in CUDA_VISIBLE_DEVICES; both are charged its request, so a
// one-card task of 13000 MiB, which either would hold alone, waits for it
// to end, while a task behind it that fits elsewhere starts.
func TestGPUTaskOnTwoCards(t *testing.T) {
	t.Parallel()
	topo, err := os.ReadFile(fiveCardTopo)
	if err != nil {
		t.Fatal(err)
	}
	cards := make([]fakegpu.Card, 5)
	for i := range cards {
		cards[i] = gpuCard(i, 24576) // capacity 24064 after the margin
	}
	cards[0].ForeignMiB, cards[4].ForeignMiB = 16000, 16000 // 8064 left: too little for anything here
	cards[1].ForeignMiB = 2000                              // 22064 left
	m := newFakeMachine(t, fakegpu.State{Cards: cards, Topology: string(topo)})
	releasePair, releaseBlocker := filepath.Join(m.dir, "release-pair"), filepath.Join(m.dir, "release-blocker")
	sleeper := func(flags ...string) string {
		parts := []string{q(sleeperBin)}
		for _, f := range flags {
			parts = append(parts, q(f))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
  gpu_cooldown: 100ms
  max_parallel_tasks: 8
tasks:
  - id: pair
    resources: {device: cuda, memory_mib: 12000, gpus: 2}
    args: ` + sleeper("-env", "CUDA_VISIBLE_DEVICES", "-env", "GPUSCHED_GPU_UUID", "-wait", releasePair) + `
  - id: blocker
    resources: {device: cuda, memory_mib: 20000}
    args: ` + sleeper("-wait", releaseBlocker) + `
  - id: single
    resources: {device: cuda, memory_mib: 13000}
    args: ` + sleeper("-env", "CUDA_VISIBLE_DEVICES") + `
`)
	run := startGPURun(t, m.env, wf)
	var s multiStatusJSON
	waitFor(t, 30*time.Second, "pair and blocker to run and single to wait", func() bool {
		if run.exited() {
			t.Fatalf("the run ended early:\n%s%s", run.out.String(), run.errb.String())
		}
		var ok bool
		if s, ok = multiStatus(t, runDir); !ok {
			return false
		}
		states := map[string]string{}
		for _, tk := range s.Tasks {
			states[tk.ID] = tk.State
			if tk.ID == "single" && tk.Waiting == "" {
				return false
			}
		}
		return states["pair"] == "running" && states["blocker"] == "running" && states["single"] == "pending"
	})
	// Both of pair's cards are charged its request; blocker has card 3.
	holders := map[int][]string{}
	for _, c := range s.GPUs {
		for _, h := range c.Tasks {
			holders[c.Index] = append(holders[c.Index], h.Task)
			if h.Task == "pair" && (h.RequestMiB != 12000 || c.ChargedMiB < 12000) {
				t.Errorf("card %d: pair requests %d MiB, card charged %d; want 12000 each", c.Index, h.RequestMiB, c.ChargedMiB)
			}
		}
	}
	if !slices.Equal(holders[1], []string{"pair"}) || !slices.Equal(holders[2], []string{"pair"}) || !slices.Equal(holders[3], []string{"blocker"}) {
		t.Errorf("cards' tasks = %v; want pair on 1 and 2, blocker on 3", holders)
	}
	for _, tk := range s.Tasks {
		if tk.ID == "single" && !strings.Contains(tk.Waiting, "needs 13000 MiB; best card 2 has 12064 MiB left (foreign 0, pair holds 12000)") {
			t.Errorf("single waits for %q", tk.Waiting)
		}
	}
	table := gpuGS(t, nil, "status", "--run-dir", runDir)
	if !strings.Contains(table.stdout, "2,1") {
		t.Errorf("status table does not show pair's cards as 2,1:\n%s", table.stdout)
	}
	if err := os.WriteFile(releasePair, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "single to run after pair", func() bool {
		st, ok := multiStatus(t, runDir)
		return ok && slices.ContainsFunc(st.Tasks, func(tk multiTaskJSON) bool { return tk.ID == "single" && tk.State == "complete" }) ||
			run.exited()
	})
	if err := os.WriteFile(releaseBlocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run.wait(t).want(t, 0)
	s, _ = multiStatus(t, runDir)
	att := map[string]multiAttemptJSON{}
	for _, tk := range s.Tasks {
		if tk.State != "complete" || len(tk.History) != 1 {
			t.Fatalf("%s: %s after %d attempts", tk.ID, tk.State, len(tk.History))
		}
		att[tk.ID] = tk.History[0]
		if tk.ID == "pair" && (!slices.Equal(tk.GPUs, []int{2, 1}) || tk.GPU == nil || *tk.GPU != 2) {
			t.Errorf("pair's status: gpu %s, gpus %v; want 2, [2 1]", intp(tk.GPU), tk.GPUs)
		}
	}
	pair, single := att["pair"], att["single"]
	if !slices.Equal(pair.GPUs, []int{2, 1}) {
		t.Errorf("pair ran on %v, want [2 1]: the pair behind one host bridge", pair.GPUs)
	}
	if single.Start.Before(pair.End) || single.GPU == nil || (*single.GPU != 1 && *single.GPU != 2) {
		t.Errorf("single ran on card %s from %v; want card 1 or 2, after pair ended at %v", intp(single.GPU), single.Start, pair.End)
	}
	log, err := os.ReadFile(pair.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "CUDA_VISIBLE_DEVICES=2,1\nGPUSCHED_GPU_UUID=" + gpuUUID(2) + "," + gpuUUID(1) + "\n"; !strings.Contains(string(log), want) {
		t.Errorf("pair's log %q, want it to contain %q", log, want)
	}
}

// twoCardMachine is a machine of two 24 GiB cards whose nvidia-smi topo -m
// prints no matrix.
func twoCardMachine(t *testing.T) *fakeMachine {
	return newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 24576), gpuCard(1, 24576)},
		Topology: "Topology is not supported on this platform\n"})
}

// When nvidia-smi topo -m prints no matrix, a task on two cards still
// runs (on the cards with the most room), and status says why no
// closeness was taken into account.
func TestGPUTopologyUnreadable(t *testing.T) {
	t.Parallel()
	m := twoCardMachine(t)
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
tasks:
  - id: pair
    resources: {device: cuda, memory_mib: 1000, gpus: 2}
    args: [true]
`)
	gpuGS(t, m.env, "run", wf).want(t, 0)
	s, _ := multiStatus(t, runDir)
	if len(s.Tasks) != 1 || s.Tasks[0].State != "complete" || !slices.Equal(s.Tasks[0].GPUs, []int{0, 1}) {
		t.Fatalf("tasks %+v; want pair complete on cards 0 and 1", s.Tasks)
	}
	table := gpuGS(t, nil, "status", "--run-dir", runDir)
	if !strings.Contains(table.stdout, "note: cannot read how the cards are connected") ||
		!strings.Contains(table.stdout, "Topology is not supported") {
		t.Errorf("status does not say the topology could not be read:\n%s", table.stdout)
	}
}

// A fake job on a task's two cards takes its memory on both, as a
// data-parallel job does: nvidia-smi shows its process on each, and the
// scheduler's ledger sees it on each (the memory each holds, matched to
// the task), and records its peak.
func TestGPUJobUsesBothCards(t *testing.T) {
	t.Parallel()
	m := twoCardMachine(t)
	gate := filepath.Join(m.dir, "gate")
	job := q(fakeJobBin(t)) + " --mem 3000 --duration 5m --record " + q(m.record)
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
tasks:
  - id: pair
    resources: {device: cuda, memory_mib: 4000, gpus: 2}
    args: ` + sh(job+" & j=$!; while [ ! -e "+q(gate)+" ]; do sleep 0.05; done; kill $j; wait $j; exit 0") + `
`)
	run := startGPURun(t, m.env, wf)
	type holder struct {
		Task        string `json:"task"`
		ObservedMiB int64  `json:"observed_mib"`
	}
	var seen map[int]int64
	waitFor(t, 30*time.Second, "the ledger to see pair's memory on both cards", func() bool {
		if run.exited() {
			t.Fatalf("the run ended early:\n%s%s", run.out.String(), run.errb.String())
		}
		r := gpuGS(t, nil, "status", "--json", "--run-dir", runDir)
		var s struct {
			GPUs []struct {
				Index int      `json:"index"`
				Tasks []holder `json:"tasks"`
			} `json:"gpus"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			return false
		}
		seen = map[int]int64{}
		for _, c := range s.GPUs {
			for _, h := range c.Tasks {
				if h.Task == "pair" {
					seen[c.Index] = h.ObservedMiB
				}
			}
		}
		return seen[0] == 3000 && seen[1] == 3000
	})
	var starts []int
	for _, e := range m.events() {
		if e.Kind == fakegpu.EventStart {
			if e.MemMiB != 3000 {
				t.Errorf("the job started with %d MiB on card %d, want 3000", e.MemMiB, e.Index)
			}
			starts = append(starts, e.Index)
		}
	}
	slices.Sort(starts)
	if !slices.Equal(starts, []int{0, 1}) {
		t.Errorf("the job took memory on cards %v, want on 0 and 1", starts)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run.wait(t).want(t, 0)
	s, _ := multiStatus(t, runDir)
	if len(s.Tasks) != 1 || len(s.Tasks[0].History) != 1 || s.Tasks[0].History[0].PeakMiB != 3000 {
		t.Fatalf("tasks %+v; want pair with one attempt, its peak 3000 MiB (the most on one card)", s.Tasks)
	}
}
