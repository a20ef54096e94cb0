package cli_test

// End-to-end tests of GPU admission: the real gpusched binary reads the fake
// nvidia-smi (cmd/fake-nvidia-smi) and runs fake CUDA jobs
// (cmd/fake-gpu-job), all sharing one fake GPU state file per test. The
// state file and the nvidia-smi binary reach the child processes through
// their environment only.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
	"github.com/gpusched/gpusched/internal/testbin"
)

// ---------------------------------------------------------------------------
// Fake GPU machine

// gpuTools builds fake-nvidia-smi and fake-gpu-job once, the first time a
// GPU test needs them (TestMain's testbin.Cleanup removes them).
var gpuTools = sync.OnceValues(func() ([2]string, error) {
	smi, err := testbin.Build("cmd/fake-nvidia-smi")
	if err != nil {
		return [2]string{}, err
	}
	job, err := testbin.Build("cmd/fake-gpu-job")
	return [2]string{smi, job}, err
})

func fakeSMIBin(t *testing.T) string {
	t.Helper()
	b, err := gpuTools()
	if err != nil {
		t.Fatal(err)
	}
	return b[0]
}

func fakeJobBin(t *testing.T) string {
	t.Helper()
	b, err := gpuTools()
	if err != nil {
		t.Fatal(err)
	}
	return b[1]
}

// fakeMachine is one test's fake GPU machine: a state file, the file the
// fake jobs record their events in, and a folder for the workflow.
type fakeMachine struct {
	t      *testing.T
	dir    string
	state  string
	record string
	env    []string // what gpusched's environment needs to see this machine
}

func newFakeMachine(t *testing.T, st fakegpu.State) *fakeMachine {
	t.Helper()
	dir := t.TempDir()
	m := &fakeMachine{t: t, dir: dir, state: filepath.Join(dir, "gpu-state.json"), record: filepath.Join(dir, "events.jsonl")}
	if err := fakegpu.Save(m.state, st); err != nil {
		t.Fatal(err)
	}
	m.env = []string{"GPUSCHED_NVIDIA_SMI=" + fakeSMIBin(t), fakegpu.EnvState + "=" + m.state}
	return m
}

// gpuCard is a fake card with a recognisable uuid.
func gpuCard(index int, totalMiB int64) fakegpu.Card {
	return fakegpu.Card{Index: index, UUID: gpuUUID(index), TotalMiB: totalMiB}
}

func gpuUUID(index int) string {
	return fmt.Sprintf("GPU-%08x-7e57-4000-8000-%012d", 0xfade0+index, index)
}

// update changes the state file under its lock; the file is replaced
// atomically (temp file + rename), and the fake jobs' entries are kept.
func (m *fakeMachine) update(fn func(s *fakegpu.State)) {
	m.t.Helper()
	err := fakegpu.Update(m.state, func(s *fakegpu.State) error { fn(s); return nil })
	if err != nil {
		m.t.Fatal(err)
	}
}

// workflow writes the workflow file wf.yaml and returns its path and its
// default run directory.
func (m *fakeMachine) workflow(body string) (wf, runDir string) {
	m.t.Helper()
	wf = writeFile(m.t, filepath.Join(m.dir, "wf.yaml"), body)
	return wf, filepath.Join(m.dir, ".gpusched", "wf")
}

// job is a task's args running fake-gpu-job with flags, recording its
// events in the machine's record file, as YAML.
func (m *fakeMachine) job(flags ...string) string {
	parts := []string{q(fakeJobBin(m.t))}
	for _, f := range append(flags, "--record", m.record) {
		parts = append(parts, q(f))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// events returns what the fake jobs recorded.
func (m *fakeMachine) events() []fakegpu.Event {
	m.t.Helper()
	if !exists(m.record) {
		return nil
	}
	ev, err := fakegpu.ReadEvents(m.record)
	if err != nil {
		m.t.Fatal(err)
	}
	return ev
}

// checkNoOvercommit replays the recorded events: no allocation was refused,
// every job started with room for what it took and margin MiB to spare, and
// what the jobs held on a card when one started never went beyond its total
// less the margin. It returns the most jobs that held memory at once.
func (m *fakeMachine) checkNoOvercommit(margin int64) (maxTogether int) {
	m.t.Helper()
	held := map[string]int64{}
	byPID := map[int]int64{}
	for _, e := range m.events() {
		switch e.Kind {
		case fakegpu.EventOOM:
			m.t.Errorf("job %d was refused %d MiB on card %d (%d MiB free): gpusched over-committed the card", e.PID, e.MemMiB, e.Index, e.FreeMiB)
		case fakegpu.EventStart, fakegpu.EventGrow:
			took := e.MemMiB - byPID[e.PID]
			held[e.GPU] += took
			byPID[e.PID] = e.MemMiB
			if e.Kind != fakegpu.EventStart || e.GPU == "" {
				break // growing past its request is the job's doing
			}
			maxTogether = max(maxTogether, len(byPID))
			if e.FreeMiB < took+margin {
				m.t.Errorf("job %d started with %d MiB on card %d, which had only %d MiB free (margin %d)", e.PID, took, e.Index, e.FreeMiB, margin)
			}
			if held[e.GPU] > e.TotalMiB-margin {
				m.t.Errorf("after job %d started, the jobs held %d MiB on card %d, more than its %d MiB less the %d margin",
					e.PID, held[e.GPU], e.Index, e.TotalMiB, margin)
			}
		case fakegpu.EventEnd:
			held[e.GPU] -= e.MemMiB
			delete(byPID, e.PID)
		}
	}
	return maxTogether
}

// gpuStartEvent returns the start event of the job with the given PID.
func gpuStartEvent(t *testing.T, events []fakegpu.Event, pid int) fakegpu.Event {
	t.Helper()
	for _, e := range events {
		if e.Kind == fakegpu.EventStart && e.PID == pid {
			return e
		}
	}
	t.Fatalf("no start event recorded for PID %d", pid)
	return fakegpu.Event{}
}

// ---------------------------------------------------------------------------
// Running gpusched with an environment

// gpuBaseEnv is the test process's environment without the variables these
// tests control.
func gpuBaseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CUDA_") || strings.HasPrefix(k, "GPUSCHED_") || k == fakegpu.EnvState {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func gpuCommand(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, gpuschedBin, args...)
	cmd.Env = append(gpuBaseEnv(), env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// gpuGS runs gpusched with env added to its environment, to the end (at
// most a minute).
func gpuGS(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return finish(t, ctx, gpuCommand(ctx, env, args...), args)
}

// startGPURun starts "gpusched run args..." with env in the background.
func startGPURun(t *testing.T, env []string, args ...string) *backgroundRun {
	t.Helper()
	return startBackground(t, func(ctx context.Context) *exec.Cmd {
		return gpuCommand(ctx, env, append([]string{"run"}, args...)...)
	})
}

// ---------------------------------------------------------------------------
// Status and gpus JSON, with the GPU fields

type gpuAttemptJSON struct {
	Number          int       `json:"number"`
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	ExitCode        *int      `json:"exit_code"`
	Error           string    `json:"error"`
	PID             int       `json:"pid"`
	LogPath         string    `json:"log_path"`
	GPU             *int      `json:"gpu"`
	GPUUUID         string    `json:"gpu_uuid"`
	MemRequestedMiB int64     `json:"mem_requested_mib"`
	MemPeakMiB      int64     `json:"mem_peak_mib"`
}

type gpuTaskJSON struct {
	ID        string           `json:"id"`
	State     string           `json:"state"`
	Attempts  int              `json:"attempts"`
	ExitCode  *int             `json:"exit_code"`
	GPU       *int             `json:"gpu"`
	Error     string           `json:"error"`
	BlockedBy string           `json:"blocked_by"`
	Waiting   string           `json:"waiting"`
	MemoryMiB int64            `json:"memory_mib"`
	History   []gpuAttemptJSON `json:"history"`
}

type gpuCardJSON struct {
	Index        int    `json:"index"`
	UUID         string `json:"uuid"`
	Name         string `json:"name"`
	TotalMiB     int64  `json:"total_mib"`
	CapacityMiB  int64  `json:"capacity_mib"`
	ForeignMiB   int64  `json:"foreign_mib"`
	ForeignProcs int    `json:"foreign_procs"`
	ChargedMiB   int64  `json:"charged_mib"`
	AvailableMiB int64  `json:"available_mib"`
	Tasks        []struct {
		Task string `json:"task"`
	} `json:"tasks"`
	Exclusive bool   `json:"exclusive"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Until     string `json:"until"`
}

type gpuStatusJSON struct {
	RunDir       string        `json:"run_dir"`
	SchedulerPID *int          `json:"scheduler_pid"`
	Tasks        []gpuTaskJSON `json:"tasks"`
	GPUs         []gpuCardJSON `json:"gpus"`
	GPUUnknown   string        `json:"gpu_unknown"`
	GPUsAsOf     time.Time     `json:"gpus_as_of"`
}

func (s gpuStatusJSON) task(t *testing.T, id string) gpuTaskJSON {
	t.Helper()
	for _, tk := range s.Tasks {
		if tk.ID == id {
			return tk
		}
	}
	t.Fatalf("status has no task %q", id)
	return gpuTaskJSON{}
}

func gpuFindCard(t *testing.T, cards []gpuCardJSON, index int) gpuCardJSON {
	t.Helper()
	for _, c := range cards {
		if c.Index == index {
			return c
		}
	}
	t.Fatalf("no card %d in %+v", index, cards)
	return gpuCardJSON{}
}

// gpuStatus runs "gpusched status --json --run-dir runDir" and decodes it.
func gpuStatus(t *testing.T, runDir string) gpuStatusJSON {
	t.Helper()
	r := gpuGS(t, nil, "status", "--json", "--run-dir", runDir)
	r.want(t, 0)
	var s gpuStatusJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json output is not JSON: %v\n%s", err, r.stdout)
	}
	return s
}

// gpuPollStatus is gpuStatus for polling while a run goes: ok is false when
// status fails, as it may while the run is still creating its state
// database, or shows no task yet.
func gpuPollStatus(t *testing.T, runDir string) (s gpuStatusJSON, ok bool) {
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

// lastAttempt returns a task's last attempt, failing if it has none.
func (tk gpuTaskJSON) last(t *testing.T) gpuAttemptJSON {
	t.Helper()
	if len(tk.History) == 0 {
		t.Fatalf("task %s has no attempt (state %s, error %q)", tk.ID, tk.State, tk.Error)
	}
	return tk.History[len(tk.History)-1]
}

// gpuOnCard checks that a task completed in one attempt on card index (with
// that card's uuid) and returns the attempt.
func gpuOnCard(t *testing.T, s gpuStatusJSON, id string, index int) gpuAttemptJSON {
	t.Helper()
	tk := s.task(t, id)
	if tk.State != "complete" || tk.Attempts != 1 {
		t.Errorf("task %s: state %s after %d attempts (error %q), want complete after 1", id, tk.State, tk.Attempts, tk.Error)
	}
	a := tk.last(t)
	if a.GPU == nil || *a.GPU != index || a.GPUUUID != gpuUUID(index) {
		t.Errorf("task %s ran on card %s (%s), want card %d (%s)", id, intp(a.GPU), a.GPUUUID, index, gpuUUID(index))
	}
	return a
}

func gpuOf(a gpuAttemptJSON) int {
	if a.GPU == nil {
		return -1
	}
	return *a.GPU
}

// ---------------------------------------------------------------------------
// Tests

// 24 fake CUDA jobs of varied sizes packed onto two cards: every one
// completes, no allocation is refused, the cards are never filled past
// their safety margin, several jobs share the cards at once, both cards are
// used, and each attempt's record names the card the job really used.
func TestGPUManyTasksTwoCards(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 16384), gpuCard(1, 16384)}})
	const n = 24
	mem := func(i int) int64 { return 1000 + int64(i*1300%5500) }
	var b strings.Builder
	b.WriteString("scheduling:\n  max_parallel_tasks: 8\n  gpu_cooldown: 0\n  gpu_poll_interval: 100ms\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: job%02d\n    resources: {device: cuda, memory_mib: %d}\n    args: %s\n",
			i, mem(i), m.job("--mem", strconv.FormatInt(mem(i), 10), "--duration", fmt.Sprintf("%dms", 250+100*(i%3))))
	}
	wf, runDir := m.workflow(b.String())
	r := gpuGS(t, m.env, "run", wf)
	r.want(t, 0)
	if strings.Contains(r.stdout, "out of memory") {
		t.Errorf("a job ran out of memory:\n%s", r.stdout)
	}

	together := m.checkNoOvercommit(512)
	if together < 3 {
		t.Errorf("at most %d jobs held GPU memory at once; 8 slots and two 16 GiB cards should pack more", together)
	}
	events := m.events()
	starts := 0
	for _, e := range events {
		if e.Kind == fakegpu.EventStart {
			starts++
		}
	}
	if starts != n {
		t.Errorf("%d jobs started, want %d", starts, n)
	}

	s := gpuStatus(t, runDir)
	used := map[int]int{}
	for i := range n {
		id := fmt.Sprintf("job%02d", i)
		tk := s.task(t, id)
		if tk.State != "complete" || tk.Attempts != 1 || intp(tk.ExitCode) != "0" {
			t.Errorf("task %s: state %s, attempts %d, exit %s (error %q)", id, tk.State, tk.Attempts, intp(tk.ExitCode), tk.Error)
			continue
		}
		a := tk.last(t)
		if a.GPU == nil {
			t.Errorf("task %s: history has no gpu", id)
			continue
		}
		used[*a.GPU]++
		if tk.GPU == nil || *tk.GPU != *a.GPU {
			t.Errorf("task %s: gpu %s, but its attempt ran on %d", id, intp(tk.GPU), *a.GPU)
		}
		if a.GPUUUID != gpuUUID(*a.GPU) {
			t.Errorf("task %s: gpu_uuid %q, want card %d's %q", id, a.GPUUUID, *a.GPU, gpuUUID(*a.GPU))
		}
		if a.MemRequestedMiB != mem(i) {
			t.Errorf("task %s: mem_requested_mib %d, want %d", id, a.MemRequestedMiB, mem(i))
		}
		if e := gpuStartEvent(t, events, a.PID); e.Index != *a.GPU || e.MemMiB != mem(i) {
			t.Errorf("task %s: the job took %d MiB on card %d; status says card %d", id, e.MemMiB, e.Index, *a.GPU)
		}
	}
	if len(used) != 2 {
		t.Errorf("tasks per card: %v; want both cards used", used)
	}
}

// A task that grows past its request (1000 MiB asked, 30000 used) is
// charged what it uses: a 20000 MiB task that becomes ready while it runs
// does not start on the one card until it has ended.
func TestGPUGrowthKeepsOthersOff(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	wf, runDir := m.workflow(`
scheduling:
  max_parallel_tasks: 4
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: grower
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--grow-to", "30000", "--grow-after", "300ms", "--duration", "2500ms") + `
  - id: gate
    timeout: 20s
    args: ` + sh("until grep -q '\"grow\"' "+q(m.record)+"; do sleep 0.02; done; sleep 0.5") + `
  - id: big
    dependencies: [gate]
    resources: {device: cuda, memory_mib: 20000}
    args: ` + m.job("--mem", "20000", "--duration", "100ms") + `
`)
	run := startGPURun(t, m.env, wf)
	// While the grower runs, big waits, and status says the grower holds
	// what it uses.
	var waiting string
	waitFor(t, 20*time.Second, "big to be pending with its dependency done", func() bool {
		if run.exited() {
			return true
		}
		s, ok := gpuPollStatus(t, runDir)
		if ok && s.task(t, "gate").State == "complete" && s.task(t, "big").State == "pending" {
			waiting = s.task(t, "big").Waiting
			return true
		}
		return false
	})
	if !strings.Contains(waiting, "needs 20000 MiB") || !strings.Contains(waiting, "grower holds 30000") {
		t.Errorf("big's waiting reason = %q; want it to say it needs 20000 MiB and that grower holds 30000", waiting)
	}
	r := run.wait(t)
	r.want(t, 0)
	m.checkNoOvercommit(512)

	s := gpuStatus(t, runDir)
	g := gpuOnCard(t, s, "grower", 0)
	bg := gpuOnCard(t, s, "big", 0)
	if g.MemRequestedMiB != 1000 || g.MemPeakMiB != 30000 {
		t.Errorf("grower: mem_requested_mib %d, mem_peak_mib %d; want 1000 and 30000", g.MemRequestedMiB, g.MemPeakMiB)
	}
	// The grower gives its memory back just before it exits, and big may be
	// admitted from then on: big's job must take its memory after that.
	growerEnd, bigStart := -1, -1
	for i, e := range m.events() {
		switch {
		case e.PID == g.PID && e.Kind == fakegpu.EventEnd:
			growerEnd = i
		case e.PID == bg.PID && e.Kind == fakegpu.EventStart:
			bigStart = i
		}
	}
	if growerEnd < 0 || bigStart < growerEnd {
		t.Errorf("big's job took its memory (event %d) before grower gave back its 30000 MiB (event %d)", bigStart, growerEnd)
	}
	if bg.Start.Before(g.End.Add(-time.Second)) {
		t.Errorf("big started at %s, long before grower ended at %s", bg.Start.Format(time.StampMilli), g.End.Format(time.StampMilli))
	}
}

// Memory held by others (foreign_mib) counts: a task that does not fit
// beside it waits, pending with a reason naming the foreign memory, and
// starts once the foreign memory goes away.
func TestGPUForeignMemoryWaits(t *testing.T) {
	t.Parallel()
	c := gpuCard(0, 40960)
	c.ForeignMiB = 30000
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{c}})
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
tasks:
  - id: cpu
    args: [true]
  - id: needs20g
    resources: {device: cuda, memory_mib: 20000}
    args: ` + m.job("--mem", "20000", "--duration", "100ms") + `
`)
	run := startGPURun(t, m.env, wf)
	var tk gpuTaskJSON
	waitFor(t, 20*time.Second, "needs20g to wait with a reason", func() bool {
		if run.exited() {
			t.Fatalf("the run ended while the foreign memory was there:\n%s%s", run.out.String(), run.errb.String())
		}
		s, ok := gpuPollStatus(t, runDir)
		if !ok {
			return false
		}
		tk = s.task(t, "needs20g")
		return s.task(t, "cpu").State == "complete" && strings.Contains(tk.Waiting, "needs 20000 MiB")
	})
	if tk.State != "pending" || tk.Attempts != 0 {
		t.Errorf("needs20g: state %s, attempts %d; want pending, 0", tk.State, tk.Attempts)
	}
	for _, want := range []string{"needs 20000 MiB", "foreign 30000", "10448 MiB left"} {
		if !strings.Contains(tk.Waiting, want) {
			t.Errorf("waiting = %q; want it to contain %q", tk.Waiting, want)
		}
	}
	// Several readings later it still waits.
	var seen []time.Time
	waitFor(t, 20*time.Second, "three more readings of the cards", func() bool {
		s, ok := gpuPollStatus(t, runDir)
		if ok && (len(seen) == 0 || s.GPUsAsOf.After(seen[len(seen)-1])) {
			seen = append(seen, s.GPUsAsOf)
		}
		return len(seen) > 3 || run.exited()
	})
	if tk := gpuStatus(t, runDir).task(t, "needs20g"); tk.State != "pending" || tk.Attempts != 0 || run.exited() {
		t.Fatalf("needs20g: state %s, attempts %d with 30000 MiB foreign on the card", tk.State, tk.Attempts)
	}
	lowered := time.Now()
	m.update(func(s *fakegpu.State) { s.Cards[0].ForeignMiB = 0 })
	r := run.wait(t)
	r.want(t, 0)
	m.checkNoOvercommit(512)
	a := gpuOnCard(t, gpuStatus(t, runDir), "needs20g", 0)
	if a.Start.Before(lowered) {
		t.Errorf("needs20g started at %s, before the foreign memory went at %s", a.Start.Format(time.StampMilli), lowered.Format(time.StampMilli))
	}
}

// An exclusive task gets a card with no foreign process, even when the
// placement rule prefers the other card, and while it runs nothing else
// starts on its card. (No task shares card 0 with the foreign process: see
// TestGPUForeignMemoryBetweenQueries.)
func TestGPUExclusive(t *testing.T) {
	t.Parallel()
	// A live process of ours that the fake nvidia-smi lists on card 0.
	foreign := exec.Command(sleeperBin, "-sleep", "1m")
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })
	m := newFakeMachine(t, fakegpu.State{
		Cards:     []fakegpu.Card{gpuCard(0, 24000), gpuCard(1, 40960)},
		Processes: []fakegpu.Process{{PID: foreign.Process.Pid, GPUUUID: gpuUUID(0), UsedMiB: 1000, Name: "notebook"}},
	})
	// pack prefers card 0 (least memory left) for every task that fits it.
	// The big tasks (23000 MiB) fit only card 1 (card 0 has 22488 left).
	wf, runDir := m.workflow(`
scheduling:
  max_parallel_tasks: 6
  gpu_placement: pack
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: ex
    priority: 10
    resources: {device: cuda, memory_mib: 2000, exclusive: true}
    args: ` + m.job("--mem", "2000", "--duration", "1s") + `
  - id: big1
    resources: {device: cuda, memory_mib: 23000}
    args: ` + m.job("--mem", "23000", "--duration", "100ms") + `
  - id: big2
    resources: {device: cuda, memory_mib: 23000}
    args: ` + m.job("--mem", "23000", "--duration", "100ms") + `
`)
	r := gpuGS(t, m.env, "run", wf)
	r.want(t, 0)
	m.checkNoOvercommit(512)
	s := gpuStatus(t, runDir)
	ex := gpuOnCard(t, s, "ex", 1)
	for _, id := range []string{"big1", "big2"} {
		a := gpuOnCard(t, s, id, 1)
		if a.Start.Before(ex.End) {
			t.Errorf("%s started on card 1 at %s, while the exclusive task ran there (until %s)",
				id, a.Start.Format(time.StampMilli), ex.End.Format(time.StampMilli))
		}
	}
	// The card view names the foreign process.
	if c := gpuFindCard(t, s.GPUs, 0); c.ForeignProcs != 1 || c.ForeignMiB != 1000 {
		t.Errorf("card 0: foreign_procs %d, foreign_mib %d; want 1 and 1000", c.ForeignProcs, c.ForeignMiB)
	}
}

// nvidia-smi is asked two questions, one after the other. Were the cards'
// memory asked first and the compute processes second, a job that takes its
// memory between the two would be counted as ours while the card's free
// memory does not show it yet: foreign memory would come out too small by
// that much and the card would be over-committed. (The probe asks for the
// processes first, so such a job counts as foreign for one reading: too
// little room, never too much.) Here the wrapper around the fake nvidia-smi
// makes that interleaving certain on the second reading, taken while first
// runs: it answers the card query with a reading taken before first's job
// allocates, and returns only once the job has allocated.
func TestGPUForeignMemoryBetweenQueries(t *testing.T) {
	t.Parallel()
	c := gpuCard(0, 24000)
	c.ForeignMiB = 4000
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{c}})
	count := filepath.Join(m.dir, "gpu-queries")
	script := filepath.Join(m.dir, "nvidia-smi")
	writeFile(t, script, `#!/bin/sh
out=$(`+q(fakeSMIBin(t))+` "$@"); rc=$?
case "$*" in *--query-gpu*)
	echo x >> `+q(count)+`
	if [ "$(wc -l < `+q(count)+`)" -eq 2 ]; then
		i=0
		while ! grep -q '"start"' `+q(m.record)+` 2>/dev/null && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
	fi;;
esac
printf '%s\n' "$out"
exit $rc
`)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"GPUSCHED_NVIDIA_SMI=" + script, fakegpu.EnvState + "=" + m.state}
	// Capacity 23488, foreign 4000: with first's 1000 charged, 18488 is left,
	// so second (19400) must wait for first to end.
	wf, runDir := m.workflow(`
scheduling:
  max_parallel_tasks: 4
  gpu_cooldown: 0
  gpu_poll_interval: 200ms
tasks:
  - id: first
    priority: 1
    resources: {device: cuda, memory_mib: 1000}
    args: ` + sh("sleep 0.3; exec '"+fakeJobBin(t)+"' --mem 1000 --duration 2s --record '"+m.record+"'") + `
  - id: gate
    args: ` + sh("until grep -q '\"start\"' "+q(m.record)+"; do sleep 0.01; done; sleep 0.5") + `
  - id: second
    dependencies: [gate]
    resources: {device: cuda, memory_mib: 19400}
    args: ` + m.job("--mem", "19400", "--duration", "100ms") + `
`)
	run := startGPURun(t, env, wf)
	var card gpuCardJSON
	waitFor(t, 20*time.Second, "gate to complete", func() bool {
		s, ok := gpuPollStatus(t, runDir)
		if ok && len(s.GPUs) == 1 && s.task(t, "gate").State == "complete" {
			card = s.GPUs[0]
			return true
		}
		return run.exited()
	})
	r := run.wait(t)
	if card.ForeignMiB != 4000 {
		t.Errorf("while first ran, card 0 showed foreign_mib %d; the state file has 4000", card.ForeignMiB)
	}
	r.want(t, 0)
	m.checkNoOvercommit(512)
	s := gpuStatus(t, runDir)
	a, b := gpuOnCard(t, s, "first", 0), gpuOnCard(t, s, "second", 0)
	if b.Start.Before(a.End) {
		t.Errorf("second (19400 MiB) started beside first although only 18488 MiB were left")
	}
}

// An exclusive task waits while every card has a foreign process, with a
// reason saying so.
func TestGPUExclusiveWaitsForForeignProcess(t *testing.T) {
	t.Parallel()
	foreign := exec.Command(sleeperBin, "-sleep", "1m")
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })
	m := newFakeMachine(t, fakegpu.State{
		Cards:     []fakegpu.Card{gpuCard(0, 40960)},
		Processes: []fakegpu.Process{{PID: foreign.Process.Pid, GPUUUID: gpuUUID(0), UsedMiB: 500}},
	})
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
tasks:
  - id: ex
    resources: {device: cuda, memory_mib: 1000, exclusive: true}
    args: ` + m.job("--mem", "1000", "--duration", "50ms") + `
`)
	run := startGPURun(t, m.env, wf)
	var tk gpuTaskJSON
	waitFor(t, 20*time.Second, "ex to wait with a reason", func() bool {
		if run.exited() {
			t.Fatalf("the run ended while a foreign process was on the only card:\n%s%s", run.out.String(), run.errb.String())
		}
		s, ok := gpuPollStatus(t, runDir)
		if !ok {
			return false
		}
		tk = s.task(t, "ex")
		return strings.Contains(tk.Waiting, "needs a card to itself")
	})
	if tk.State != "pending" || !strings.Contains(tk.Waiting, "needs a card to itself") || !strings.Contains(tk.Waiting, "not ours") {
		t.Errorf("ex: state %s, waiting %q; want pending, needing a card to itself, blocked by a process that is not ours", tk.State, tk.Waiting)
	}
	started := time.Now()
	_ = foreign.Process.Kill()
	_ = foreign.Wait()
	r := run.wait(t)
	r.want(t, 0)
	if a := gpuOnCard(t, gpuStatus(t, runDir), "ex", 0); a.Start.Before(started) {
		t.Errorf("ex started at %s, before the foreign process died at %s", a.Start.Format(time.StampMilli), started.Format(time.StampMilli))
	}
}

// gpu_cooldown: after a task leaves the card, the next one starts there
// only once the cooldown has passed, and status shows the card cooling.
func TestGPUCooldown(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	// The two tasks cannot share the card (2 x 30000 > 40448).
	wf, runDir := m.workflow(`
scheduling:
  max_parallel_tasks: 2
  gpu_cooldown: 2s
  gpu_poll_interval: 100ms
tasks:
  - id: first
    priority: 1
    resources: {device: cuda, memory_mib: 30000}
    args: ` + m.job("--mem", "30000", "--duration", "200ms") + `
  - id: second
    resources: {device: cuda, memory_mib: 30000}
    args: ` + m.job("--mem", "30000", "--duration", "100ms") + `
`)
	run := startGPURun(t, m.env, wf)
	var card gpuCardJSON
	waitFor(t, 20*time.Second, "card 0 to be cooling down", func() bool {
		if run.exited() {
			return true
		}
		s, ok := gpuPollStatus(t, runDir)
		if ok && len(s.GPUs) == 1 && s.GPUs[0].State == "cooling down" {
			card = s.GPUs[0]
			return true
		}
		return false
	})
	if card.State != "cooling down" || card.Until == "" {
		t.Errorf("card 0 never showed as cooling down with an end time: %+v", card)
	}
	r := run.wait(t)
	r.want(t, 0)
	s := gpuStatus(t, runDir)
	a, b := gpuOnCard(t, s, "first", 0), gpuOnCard(t, s, "second", 0)
	gap := b.Start.Sub(a.End)
	if gap < 2*time.Second {
		t.Errorf("second started %s after first ended; gpu_cooldown is 2s", gap)
	}
	if gap > 5*time.Second {
		t.Errorf("second started %s after first ended; the 2s cooldown should have let it start sooner", gap)
	}
}

// gpu_quarantine_after: two failed attempts in a row on card 0 quarantine
// it; gpus and status say so and why, and the later tasks run on card 1.
func TestGPUQuarantine(t *testing.T) {
	t.Parallel()
	// spread prefers card 0, the larger.
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960), gpuCard(1, 24000)}})
	wf, runDir := m.workflow(`
scheduling:
  max_parallel_tasks: 1
  gpu_quarantine_after: 2
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: fail1
    priority: 10
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms", "--exit", "1") + `
  - id: fail2
    priority: 10
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms", "--exit", "1") + `
  - id: later1
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms") + `
  - id: later2
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms") + `
`)
	r := gpuGS(t, m.env, "run", wf)
	r.want(t, 1)
	s := gpuStatus(t, runDir)
	for _, id := range []string{"fail1", "fail2"} {
		tk := s.task(t, id)
		if tk.State != "failed" || tk.Attempts != 1 || gpuOf(tk.last(t)) != 0 {
			t.Errorf("task %s: state %s, attempts %d, card %d; want failed after 1 attempt on card 0", id, tk.State, tk.Attempts, gpuOf(tk.last(t)))
		}
	}
	gpuOnCard(t, s, "later1", 1)
	gpuOnCard(t, s, "later2", 1)

	g := gpuGS(t, nil, "gpus", "--run-dir", runDir, "--json")
	g.want(t, 0)
	var list struct {
		Source string        `json:"source"`
		Cards  []gpuCardJSON `json:"cards"`
	}
	if err := json.Unmarshal([]byte(g.stdout), &list); err != nil {
		t.Fatalf("gpus --json: %v\n%s", err, g.stdout)
	}
	if list.Source != "run" {
		t.Errorf("gpus --run-dir: source %q, want run", list.Source)
	}
	for _, cards := range [][]gpuCardJSON{list.Cards, s.GPUs} {
		c0, c1 := gpuFindCard(t, cards, 0), gpuFindCard(t, cards, 1)
		if c0.State != "quarantined" || !strings.Contains(c0.Reason, "2 failed attempts in a row") || c0.Until == "" {
			t.Errorf("card 0: state %q, reason %q, until %q; want quarantined after 2 failed attempts in a row, with an end", c0.State, c0.Reason, c0.Until)
		}
		if c1.State != "ok" {
			t.Errorf("card 1: state %q, want ok", c1.State)
		}
	}
	table := gpuGS(t, nil, "gpus", "--run-dir", runDir)
	if !strings.Contains(table.stdout, "quarantined: 2 failed attempts in a row") {
		t.Errorf("gpus table does not show card 0 quarantined:\n%s", table.stdout)
	}
}

// An nvidia-smi that hangs at the start holds no CPU task back: the CPU
// tasks run to their end while nvidia-smi has not answered (its timeout is
// a minute here), and status says why the GPU task waits. No timing is
// asserted: the CPU tasks completing before nvidia-smi's first answer is
// the proof.
func TestHangingNvidiaSMIHoldsNoCPUTaskBack(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Mode: fakegpu.ModeHang, Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	wf, runDir := m.workflow(`
scheduling:
  nvidia_smi_timeout: 1m
tasks:
  - id: cpu1
    args: [true]
  - id: cpu2
    dependencies: [cpu1]
    args: [true]
  - id: gpu
    resources: {device: cuda, memory_mib: 1000}
    args: [true]
`)
	run := startGPURun(t, m.env, wf)
	var tk gpuTaskJSON
	waitFor(t, 50*time.Second, "the CPU tasks to complete while nvidia-smi has not answered", func() bool {
		s, ok := gpuPollStatus(t, runDir)
		if !ok {
			return false
		}
		tk = s.task(t, "gpu")
		return s.task(t, "cpu2").State == "complete"
	})
	if tk.State != "pending" || !strings.Contains(tk.Waiting, "nvidia-smi has not answered yet") {
		t.Errorf("gpu: %s, waiting %q; want pending until nvidia-smi answers", tk.State, tk.Waiting)
	}
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := run.wait(t)
	r.want(t, 1)
	if !strings.Contains(r.stdout, "complete  cpu2") {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// A broken nvidia-smi (the driver fails, or it hangs) never stops CPU
// tasks; the GPU task never starts and, after gpu_unknown_timeout, fails
// with nvidia-smi's message; the run exits 1. No hung nvidia-smi is left
// behind.
func TestGPUBrokenNvidiaSMI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode fakegpu.Mode
		want string
	}{
		{fakegpu.ModeDriverFailure, "couldn't communicate with the NVIDIA driver"},
		{fakegpu.ModeHang, "nvidia-smi timed out after 500ms"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			m := newFakeMachine(t, fakegpu.State{Mode: tc.mode, Cards: []fakegpu.Card{gpuCard(0, 40960)}})
			gpuRan := filepath.Join(m.dir, "gpu-ran")
			wf, runDir := m.workflow(`
scheduling:
  gpu_unknown_timeout: 3s
  gpu_poll_interval: 200ms
  nvidia_smi_timeout: 500ms
tasks:
  - id: cpu1
    args: ` + sh("echo one > cpu1.out") + `
  - id: cpu2
    dependencies: [cpu1]
    args: ` + sh("sleep 0.3; echo two > cpu2.out") + `
  - id: gpu
    resources: {device: cuda, memory_mib: 1000}
    args: ` + sh("touch "+q(gpuRan)) + `
  - id: after-gpu
    dependencies: [gpu]
    args: [true]
`)
			run := startGPURun(t, m.env, wf)
			var tk gpuTaskJSON
			var unknown string
			waitFor(t, 20*time.Second, "the CPU tasks to complete while the GPU task waits", func() bool {
				if run.exited() {
					return true
				}
				s, ok := gpuPollStatus(t, runDir)
				if !ok {
					return false
				}
				tk, unknown = s.task(t, "gpu"), s.GPUUnknown
				return s.task(t, "cpu2").State == "complete" && tk.State == "pending" && strings.Contains(tk.Waiting, tc.want)
			})
			if !strings.Contains(tk.Waiting, "GPU state unknown") || !strings.Contains(tk.Waiting, tc.want) {
				t.Errorf("gpu's waiting reason = %q; want GPU state unknown, with %q", tk.Waiting, tc.want)
			}
			if !strings.Contains(unknown, tc.want) {
				t.Errorf("status gpu_unknown = %q; want it to contain %q", unknown, tc.want)
			}
			r := run.wait(t)
			r.want(t, 1)
			if r.took < 3*time.Second {
				t.Errorf("the run ended after %s, before gpu_unknown_timeout (3s)", r.took)
			}
			// The plain output says why GPU tasks wait, once.
			if n := strings.Count(r.stdout, "GPU tasks wait"); n != 1 || !regexp.MustCompile(`gpu +.*`+regexp.QuoteMeta(tc.want)+`.*; GPU tasks wait`).MatchString(r.stdout) {
				t.Errorf("the output says %d times that GPU tasks wait, want once with %q:\n%s", n, tc.want, r.stdout)
			}
			if !exists(filepath.Join(m.dir, "cpu1.out")) || !exists(filepath.Join(m.dir, "cpu2.out")) {
				t.Errorf("the CPU tasks did not run")
			}
			if exists(gpuRan) {
				t.Errorf("the GPU task ran while the GPU state was unknown")
			}
			s := gpuStatus(t, runDir)
			for _, id := range []string{"cpu1", "cpu2"} {
				if tk := s.task(t, id); tk.State != "complete" {
					t.Errorf("task %s: %s (%q), want complete", id, tk.State, tk.Error)
				}
			}
			tk = s.task(t, "gpu")
			if tk.State != "failed" || tk.Attempts != 0 {
				t.Errorf("gpu: state %s, attempts %d; want failed without an attempt", tk.State, tk.Attempts)
			}
			if !strings.Contains(tk.Error, "GPU state unknown") || !strings.Contains(tk.Error, tc.want) {
				t.Errorf("gpu's error = %q; want GPU state unknown, with %q", tk.Error, tc.want)
			}
			if tk := s.task(t, "after-gpu"); tk.State != "blocked" || tk.BlockedBy != "gpu" {
				t.Errorf("after-gpu: state %s, blocked_by %q; want blocked by gpu", tk.State, tk.BlockedBy)
			}
			if !strings.Contains(r.stdout, "failed  gpu: GPU state unknown") {
				t.Errorf("the summary does not say why gpu failed:\n%s", r.stdout)
			}
			waitFor(t, 5*time.Second, "no fake nvidia-smi of this test to be left running", func() bool {
				return len(gpuLeftoverSMI(t, m.state)) == 0
			})
		})
	}
}

// gpuLeftoverSMI returns the PIDs of live fake nvidia-smi processes reading
// state file state.
func gpuLeftoverSMI(t *testing.T, state string) []int {
	smi := fakeSMIBin(t)
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		environ, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		arg0, _, _ := bytes.Cut(cmdline, []byte{0})
		if string(arg0) == smi && bytes.Contains(environ, []byte(fakegpu.EnvState+"="+state+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A card nvidia-smi reports lost is not used; the other card is.
func TestGPULostCard(t *testing.T) {
	t.Parallel()
	lost := gpuCard(0, 81920) // spread would prefer it
	lost.Lost = true
	m := newFakeMachine(t, fakegpu.State{Mode: fakegpu.ModeLostCard, Cards: []fakegpu.Card{lost, gpuCard(1, 24000)}})
	wf, runDir := m.workflow(`
scheduling:
  max_parallel_tasks: 3
  gpu_poll_interval: 100ms
tasks:
  - id: a
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "100ms") + `
  - id: b
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "100ms") + `
  - id: c
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "100ms") + `
`)
	r := gpuGS(t, m.env, "run", wf)
	r.want(t, 0)
	s := gpuStatus(t, runDir)
	for _, id := range []string{"a", "b", "c"} {
		gpuOnCard(t, s, id, 1)
	}
	if c := gpuFindCard(t, s.GPUs, 0); c.State == "ok" || !strings.Contains(c.Reason, "lost") {
		t.Errorf("card 0: state %q, reason %q; want it not ok, as lost", c.State, c.Reason)
	}
}

// A workflow without GPU tasks never runs nvidia-smi; one with a GPU task
// does (so the counting script works).
func TestGPUNoNvidiaSMIWithoutGPUTasks(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	calls := filepath.Join(m.dir, "smi-calls")
	script := filepath.Join(m.dir, "nvidia-smi")
	writeFile(t, script, "#!/bin/sh\necho \"$*\" >> "+q(calls)+"\nexec "+q(fakeSMIBin(t))+" \"$@\"\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"GPUSCHED_NVIDIA_SMI=" + script, fakegpu.EnvState + "=" + m.state}
	cpu := writeFile(t, filepath.Join(m.dir, "cpu.yaml"), `
tasks:
  - id: a
    args: [true]
  - id: b
    dependencies: [a]
    resources: {device: cpu}
    args: `+sh("echo ok")+`
`)
	gpuGS(t, env, "validate", cpu).want(t, 0)
	gpuGS(t, env, "run", cpu).want(t, 0)
	gpuGS(t, env, "status", cpu).want(t, 0)
	if exists(calls) {
		t.Fatalf("nvidia-smi ran for a workflow without GPU tasks: %q", readFile(t, calls))
	}
	withGPU := writeFile(t, filepath.Join(m.dir, "gpu.yaml"), `
tasks:
  - id: g
    resources: {device: cuda, memory_mib: 100}
    args: [true]
`)
	gpuGS(t, env, "run", withGPU).want(t, 0)
	if !exists(calls) || !strings.Contains(readFile(t, calls), "--query-gpu") {
		t.Errorf("the counting nvidia-smi was not run for a GPU workflow; the check above proves nothing")
	}
}

// A request larger than every card's capacity: validate refuses it (exit
// 2, one line naming the task and the field); run does not wait for
// nvidia-smi before starting CPU tasks, so the task fails with the same
// message when the cards are first read, without running, and the run
// exits 1. A request of exactly the capacity runs.
func TestGPURequestTooLarge(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960), gpuCard(1, 24000)}})
	marker := filepath.Join(m.dir, "marker")
	flow := func(mib int) string {
		return `
tasks:
  - id: cpu
    args: ` + sh("touch "+q(marker)) + `
  - id: big
    resources: {device: cuda, memory_mib: ` + strconv.Itoa(mib) + `}
    args: [true]
`
	}
	wf, runDir := m.workflow(flow(40960 - 512 + 1))
	r := gpuGS(t, m.env, "validate", wf)
	r.want(t, 2)
	msg := oneLineError(t, r)
	for _, want := range []string{`task "big"`, "resources.memory_mib", "40449 MiB", "card 0", "512 MiB safety margin"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	r = gpuGS(t, m.env, "run", wf)
	r.want(t, 1)
	_, why, _ := strings.Cut(msg, `task "big": `)
	if !strings.Contains(r.stdout, "failed    big: "+why) {
		t.Errorf("the run does not fail big with validate's message %q:\n%s", msg, r.stdout)
	}
	if exists(filepath.Join(runDir, "logs", "big")) || gpuStatus(t, runDir).task(t, "big").Attempts != 0 {
		t.Errorf("big ran although no card can hold it")
	}
	wf, _ = m.workflow(flow(40960 - 512))
	gpuGS(t, m.env, "run", wf).want(t, 0)
	if !exists(marker) {
		t.Errorf("the CPU task did not run once the request fit")
	}
}

// GPU tasks on a machine without nvidia-smi are refused: exit 2, a message
// naming nvidia-smi and GPUSCHED_NVIDIA_SMI, nothing run.
func TestGPUNoNvidiaSMI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: cpu
    args: `+sh("touch "+q(marker))+`
  - id: train
    resources: {device: cuda, memory_mib: 1000}
    args: [true]
`)
	for name, env := range map[string][]string{
		"missing file": {"GPUSCHED_NVIDIA_SMI=" + filepath.Join(dir, "no-such-nvidia-smi")},
		"not on PATH":  {"PATH=" + t.TempDir()},
	} {
		r := gpuGS(t, env, "run", wf)
		r.want(t, 2)
		msg := oneLineError(t, r)
		for _, want := range []string{`task "train"`, "nvidia-smi", "GPUSCHED_NVIDIA_SMI"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not contain %q", name, msg, want)
			}
		}
		if exists(marker) {
			t.Fatalf("%s: a task ran although the workflow was refused", name)
		}
	}
}

// A workflow refused because of its GPU tasks (a request larger than every
// card, or no nvidia-smi) exits 2 like any invalid workflow, and like them
// it must leave no run directory behind (see TestInvalidWritesNothing).
func TestGPURefusedWritesNothing(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	for name, tc := range map[string]struct {
		mib int
		env []string
	}{
		// A request too large for every card is found only once the run
		// reads the cards: see TestGPURequestTooLarge.
		"no nvidia-smi": {1000, []string{"GPUSCHED_NVIDIA_SMI=" + filepath.Join(m.dir, "missing")}},
	} {
		wf, runDir := m.workflow("tasks:\n  - id: big\n    resources: {device: cuda, memory_mib: " + strconv.Itoa(tc.mib) + "}\n    args: [true]\n")
		gpuGS(t, tc.env, "run", wf).want(t, 2)
		if exists(filepath.Join(m.dir, ".gpusched")) {
			t.Errorf("%s: exit 2, but the run left %v", name, listTree(t, filepath.Join(m.dir, ".gpusched")))
		}
		os.RemoveAll(filepath.Dir(runDir))
	}
}

// "gpusched status" while a run is starting says there is no run yet, or
// shows it; it does not fail telling the user to run the workflow to
// upgrade a state database that is simply being created.
func TestGPUStatusWhileRunStarts(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
	for i := range 10 {
		wf, runDir := m.workflow("tasks:\n  - id: t\n    resources: {device: cuda, memory_mib: 10}\n    args: [true]\n")
		run := startGPURun(t, m.env, wf)
		for !run.exited() {
			r := gpuGS(t, nil, "status", "--json", "--run-dir", runDir)
			if strings.Contains(r.stderr, "upgrade") {
				t.Fatalf("run %d: status while the run starts: exit %d, %s", i, r.code, r.stderr)
			}
		}
		run.wait(t).want(t, 0)
		os.RemoveAll(filepath.Dir(runDir))
	}
}

// A job that runs out of memory (it grows to 20000 MiB on a card where
// foreign use leaves about 15000 free) fails like CUDA; its retry asks for
// more than the 5000 MiB it was admitted with, waits until that fits, and
// completes.
func TestGPUOutOfMemoryRetry(t *testing.T) {
	t.Parallel()
	c := gpuCard(0, 40960)
	c.ForeignMiB = 25000
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{c}})
	wf, runDir := m.workflow(`
scheduling:
  gpu_poll_interval: 100ms
  gpu_cooldown: 0
tasks:
  - id: train
    retries: 1
    resources: {device: cuda, memory_mib: 5000}
    args: ` + m.job("--mem", "5000", "--grow-to", "20000", "--grow-after", "300ms", "--duration", "400ms") + `
`)
	run := startGPURun(t, m.env, wf)
	var tk gpuTaskJSON
	waitFor(t, 20*time.Second, "train's first attempt to fail and the retry to wait", func() bool {
		if run.exited() {
			return true
		}
		s, ok := gpuPollStatus(t, runDir)
		if !ok {
			return false
		}
		tk = s.task(t, "train")
		// First it waits out its retry delay, then for room on the card.
		return tk.Attempts == 1 && tk.State == "pending" && strings.Contains(tk.Waiting, "needs ")
	})
	if tk.State != "pending" || tk.MemoryMiB <= 5000 || !strings.Contains(tk.Waiting, fmt.Sprintf("needs %d MiB", tk.MemoryMiB)) {
		t.Errorf("after the OOM: state %s, memory_mib %d, waiting %q; want pending, asking for more than 5000 MiB",
			tk.State, tk.MemoryMiB, tk.Waiting)
	}
	m.update(func(s *fakegpu.State) { s.Cards[0].ForeignMiB = 0 })
	r := run.wait(t)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "retry     train") {
		t.Errorf("no retry line:\n%s", r.stdout)
	}
	tk = gpuStatus(t, runDir).task(t, "train")
	if tk.State != "complete" || len(tk.History) != 2 {
		t.Fatalf("train: state %s after %d attempts (error %q); want complete after 2", tk.State, len(tk.History), tk.Error)
	}
	first, second := tk.History[0], tk.History[1]
	if first.MemRequestedMiB != 5000 || !strings.Contains(first.Error, "out of memory") {
		t.Errorf("first attempt: mem_requested_mib %d, error %q; want 5000 and an out-of-memory error", first.MemRequestedMiB, first.Error)
	}
	// At least the 15000 MiB the failed allocation asked for, plus the margin.
	if second.MemRequestedMiB < 15000+512 {
		t.Errorf("second attempt: mem_requested_mib %d; want at least 15512 after the OOM", second.MemRequestedMiB)
	}
	if first.ExitCode == nil || *first.ExitCode != 1 || gpuOf(second) != 0 {
		t.Errorf("first attempt exit %s, second on card %d", intp(first.ExitCode), gpuOf(second))
	}
	ooms := 0
	for _, e := range m.events() {
		if e.Kind == fakegpu.EventOOM {
			ooms++
		}
	}
	if ooms != 1 {
		t.Errorf("%d out-of-memory events recorded, want 1 (the first attempt's)", ooms)
	}
	log := gpuGS(t, nil, "logs", "train", "--run-dir", runDir, "--attempt", "1")
	if !strings.Contains(log.stdout, "CUDA out of memory. Tried to allocate 15000 MiB") {
		t.Errorf("attempt 1's log does not show the CUDA error:\n%s", log.stdout)
	}
}

// A GPU task sees exactly its card, numbered as nvidia-smi does; a CPU task
// sees CUDA_VISIBLE_DEVICES set and empty, whatever gpusched was started
// with.
func TestGPUTaskEnvironment(t *testing.T) {
	t.Parallel()
	// spread puts the GPU task on card 1, the larger.
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 16000), gpuCard(1, 40960)}})
	show := func() string {
		return sleeper("-env", "CUDA_VISIBLE_DEVICES", "-env", "CUDA_DEVICE_ORDER", "-env", "GPUSCHED_GPU_INDEX",
			"-env", "GPUSCHED_GPU_UUID", "-env", "GPUSCHED_GPU_MEMORY_MIB")
	}
	wf, runDir := m.workflow(`
scheduling:
  gpu_cooldown: 0
tasks:
  - id: gpu
    resources: {device: cuda, memory_mib: 1234}
    args: ` + show() + `
  - id: gpu-sh
    dependencies: [gpu]
    resources: {device: cuda, memory_mib: 100}
    args: ` + sh(`echo "CVD=[$CUDA_VISIBLE_DEVICES] ORDER=[$CUDA_DEVICE_ORDER] UUID=[$GPUSCHED_GPU_UUID]"`) + `
  - id: cpu
    args: ` + show() + `
`)
	env := append([]string{"CUDA_VISIBLE_DEVICES=3", "CUDA_DEVICE_ORDER=FASTEST_FIRST"}, m.env...)
	gpuGS(t, env, "run", wf).want(t, 0)
	s := gpuStatus(t, runDir)
	gpuOnCard(t, s, "gpu", 1)
	gpuOnCard(t, s, "gpu-sh", 1)

	logs := func(id string) string {
		r := gpuGS(t, nil, "logs", id, "--run-dir", runDir)
		r.want(t, 0)
		return r.stdout
	}
	want := strings.Join([]string{
		"CUDA_VISIBLE_DEVICES=1",
		"CUDA_DEVICE_ORDER=PCI_BUS_ID",
		"GPUSCHED_GPU_INDEX=1",
		"GPUSCHED_GPU_UUID=" + gpuUUID(1),
		"GPUSCHED_GPU_MEMORY_MIB=1234",
	}, "\n") + "\n"
	if got := logs("gpu"); got != want {
		t.Errorf("GPU task environment:\n%s\nwant:\n%s", got, want)
	}
	if got, want := logs("gpu-sh"), "CVD=[1] ORDER=[PCI_BUS_ID] UUID=["+gpuUUID(1)+"]\n"; got != want {
		t.Errorf("GPU task under sh -c printed %q, want %q", got, want)
	}
	if got := logs("cpu"); !strings.HasPrefix(got, "CUDA_VISIBLE_DEVICES=\n") {
		t.Errorf("CPU task environment:\n%s\nwant CUDA_VISIBLE_DEVICES set and empty", got)
	}
}

// visible_gpus restricts the tasks to the cards listed, by index or by
// uuid; the other cards show as hidden. A list that matches no card is
// refused.
func TestGPUVisibleGPUs(t *testing.T) {
	t.Parallel()
	for name, visible := range map[string]string{"index": "[1]", "uuid": "[" + gpuUUID(1) + "]", "uuid lower case": "[" + strings.ToLower(gpuUUID(1)) + "]"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// spread would prefer card 0, the larger.
			m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 81920), gpuCard(1, 24000)}})
			var b strings.Builder
			b.WriteString("scheduling:\n  max_parallel_tasks: 4\n  gpu_poll_interval: 100ms\n  visible_gpus: " + visible + "\ntasks:\n")
			for i := range 4 {
				fmt.Fprintf(&b, "  - id: t%d\n    resources: {device: cuda, memory_mib: 2000}\n    args: %s\n", i, m.job("--mem", "2000", "--duration", "100ms"))
			}
			wf, runDir := m.workflow(b.String())
			gpuGS(t, m.env, "run", wf).want(t, 0)
			s := gpuStatus(t, runDir)
			for i := range 4 {
				gpuOnCard(t, s, fmt.Sprintf("t%d", i), 1)
			}
			if c := gpuFindCard(t, s.GPUs, 0); c.State != "hidden" {
				t.Errorf("card 0: state %q, want hidden", c.State)
			}
			for _, e := range m.events() {
				if e.Index != 1 {
					t.Errorf("a job used card %d", e.Index)
				}
			}
		})
	}
	t.Run("no match", func(t *testing.T) {
		t.Parallel()
		m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960)}})
		wf, _ := m.workflow("scheduling:\n  visible_gpus: [3]\ntasks:\n  - id: t\n    resources: {device: cuda, memory_mib: 10}\n    args: [true]\n")
		r := gpuGS(t, m.env, "validate", wf)
		r.want(t, 2)
		if msg := oneLineError(t, r); !strings.Contains(msg, `task "t"`) || !strings.Contains(msg, "visible_gpus") {
			t.Errorf("error %q does not name the task and visible_gpus", msg)
		}
		r = gpuGS(t, m.env, "run", wf)
		r.want(t, 1)
		if !strings.Contains(r.stdout, "failed    t: resources.memory_mib: no card matches visible_gpus") {
			t.Errorf("run output:\n%s", r.stdout)
		}
	})
}

// gpus --live with a workflow reads nvidia-smi now with the workflow's
// settings: total, foreign (including other processes) and available =
// total - margin - foreign. Without nvidia-smi it exits 1 with one line.
func TestGPUsLive(t *testing.T) {
	t.Parallel()
	foreign := exec.Command(sleeperBin, "-sleep", "1m")
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })
	c0 := gpuCard(0, 40960)
	c0.ForeignMiB = 3000
	c0.Name = "NVIDIA Fake A100"
	m := newFakeMachine(t, fakegpu.State{
		Cards:     []fakegpu.Card{c0, gpuCard(1, 24576)},
		Processes: []fakegpu.Process{{PID: foreign.Process.Pid, GPUUUID: gpuUUID(1), UsedMiB: 2000}},
	})
	wf, _ := m.workflow(`
scheduling:
  gpu_safety_margin_mib: 1000
  visible_gpus: [0, 1]
tasks:
  - id: t
    resources: {device: cuda, memory_mib: 10}
    args: [true]
`)
	type card struct {
		total, foreign, available int64
		procs                     int
	}
	check := func(args []string, margin int64) {
		t.Helper()
		r := gpuGS(t, m.env, args...)
		r.want(t, 0)
		var out struct {
			Source string        `json:"source"`
			Cards  []gpuCardJSON `json:"cards"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("gpus --json: %v\n%s", err, r.stdout)
		}
		if out.Source != "live" || len(out.Cards) != 2 {
			t.Fatalf("gpus %v: source %q, %d cards; want live, 2\n%s", args, out.Source, len(out.Cards), r.stdout)
		}
		want := []card{{40960, 3000, 40960 - margin - 3000, 0}, {24576, 2000, 24576 - margin - 2000, 1}}
		for i, w := range want {
			c := gpuFindCard(t, out.Cards, i)
			got := card{c.TotalMiB, c.ForeignMiB, c.AvailableMiB, c.ForeignProcs}
			if got != w || c.UUID != gpuUUID(i) || c.State != "ok" || len(c.Tasks) != 0 {
				t.Errorf("gpus %v: card %d = %+v (uuid %s, state %s, %d tasks), want %+v (uuid %s, ok, no task)",
					args, i, got, c.UUID, c.State, len(c.Tasks), w, gpuUUID(i))
			}
		}
		if gpuFindCard(t, out.Cards, 0).Name != "NVIDIA Fake A100" {
			t.Errorf("card 0's name is not nvidia-smi's")
		}
	}
	check([]string{"gpus", "--json", "--live", wf}, 1000)
	check([]string{"gpus", "--json", wf}, 1000) // no run yet: live too
	check([]string{"gpus", "--json"}, 512)      // no workflow: the default margin

	table := gpuGS(t, m.env, "gpus", "--live", wf)
	table.want(t, 0)
	if !strings.Contains(table.stdout, "live reading of nvidia-smi") || !strings.Contains(table.stdout, "NVIDIA Fake A100") {
		t.Errorf("gpus table:\n%s", table.stdout)
	}

	r := gpuGS(t, []string{"GPUSCHED_NVIDIA_SMI=/nonexistent"}, "gpus")
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "nvidia-smi") || !strings.Contains(msg, "/nonexistent") {
		t.Errorf("error %q does not name nvidia-smi and the missing path", msg)
	}
	broken := newFakeMachine(t, fakegpu.State{Mode: fakegpu.ModeDriverFailure, Cards: []fakegpu.Card{gpuCard(0, 1000)}})
	r = gpuGS(t, broken.env, "gpus", "--json")
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "couldn't communicate with the NVIDIA driver") {
		t.Errorf("error %q does not quote nvidia-smi", msg)
	}
}

// gpu_placement: pack puts the first task on the card with the least
// memory that holds it, spread on the one with the most.
func TestGPUPlacement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		placement    string
		totals       [2]int64
		foreign      [2]int64
		want, second int
	}{
		{"pack", [2]int64{24576, 40960}, [2]int64{0, 0}, 0, 0},
		{"pack", [2]int64{40960, 24576}, [2]int64{0, 0}, 1, 1},
		{"spread", [2]int64{24576, 40960}, [2]int64{0, 0}, 1, 1},
		{"spread", [2]int64{40960, 24576}, [2]int64{0, 0}, 0, 0},
		// Same totals; foreign memory makes the difference.
		{"pack", [2]int64{40960, 40960}, [2]int64{0, 20000}, 1, 1},
		{"spread", [2]int64{40960, 40960}, [2]int64{0, 20000}, 0, 0},
		{"", [2]int64{40960, 40960}, [2]int64{20000, 0}, 1, 1}, // spread by default
	} {
		name := fmt.Sprintf("%s-%d-%d-foreign-%d-%d", gpuOr(tc.placement, "default"), tc.totals[0], tc.totals[1], tc.foreign[0], tc.foreign[1])
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c0, c1 := gpuCard(0, tc.totals[0]), gpuCard(1, tc.totals[1])
			c0.ForeignMiB, c1.ForeignMiB = tc.foreign[0], tc.foreign[1]
			m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{c0, c1}})
			sched := "  max_parallel_tasks: 1\n  gpu_cooldown: 0\n"
			if tc.placement != "" {
				sched += "  gpu_placement: " + tc.placement + "\n"
			}
			wf, runDir := m.workflow("scheduling:\n" + sched + `tasks:
  - id: first
    priority: 1
    resources: {device: cuda, memory_mib: 5000}
    args: [true]
  - id: second
    resources: {device: cuda, memory_mib: 5000}
    args: [true]
`)
			gpuGS(t, m.env, "run", wf).want(t, 0)
			s := gpuStatus(t, runDir)
			gpuOnCard(t, s, "first", tc.want)
			gpuOnCard(t, s, "second", tc.second)
		})
	}
}

func gpuOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
