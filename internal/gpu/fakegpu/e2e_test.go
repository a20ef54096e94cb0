package fakegpu

// End-to-end tests: the fake binaries run as real processes, and the real
// probe (package nvidiasmi) reads the fake nvidia-smi.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
)

// Paths of the fake binaries, built once by TestMain.
var fakeSMI, fakeJob string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakegpu-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeSMI, fakeJob = filepath.Join(dir, "fake-nvidia-smi"), filepath.Join(dir, "fake-gpu-job")
	for bin, pkg := range map[string]string{
		fakeSMI: "github.com/gpusched/gpusched/cmd/fake-nvidia-smi",
		fakeJob: "github.com/gpusched/gpusched/cmd/fake-gpu-job",
	} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// machine is a fake GPU machine for one test: its state file is in
// $FAKE_GPU_STATE for the test and for the processes it starts.
type machine struct {
	t      *testing.T
	state  string
	record string
}

func newMachine(t *testing.T, s State) *machine {
	t.Helper()
	dir := t.TempDir()
	m := &machine{t: t, state: filepath.Join(dir, "state.json"), record: filepath.Join(dir, "events.jsonl")}
	if err := Save(m.state, s); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvState, m.state)
	return m
}

func (m *machine) probe(timeout time.Duration) (nvidiasmi.Snapshot, error) {
	return (&nvidiasmi.Probe{Bin: fakeSMI, Timeout: timeout}).Query(context.Background())
}

// mustProbe returns a snapshot with no problems.
func (m *machine) mustProbe() nvidiasmi.Snapshot {
	m.t.Helper()
	snap, err := m.probe(10 * time.Second)
	if err != nil {
		m.t.Fatalf("probe: %v", err)
	}
	if len(snap.Problems) > 0 {
		m.t.Fatalf("probe problems: %v", snap.Problems)
	}
	return snap
}

// job is a fake-gpu-job process.
type job struct {
	cmd    *exec.Cmd
	line   string // the first line it printed; "" if it printed none
	stderr *syncBuffer
	once   sync.Once
	status int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// jobEnv returns the test's environment without CUDA settings, plus env.
func jobEnv(env ...string) []string {
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CUDA_") })
	return append(base, env...)
}

// startJob starts fake-gpu-job and returns once it has printed its first
// line (it holds its memory then) or exited without one. The job is
// killed at the end of the test if it still runs. It may be called from
// several goroutines at once.
func (m *machine) startJob(env []string, args ...string) (*job, error) {
	j := &job{cmd: exec.Command(fakeJob, args...), stderr: &syncBuffer{}}
	j.cmd.Env = jobEnv(env...)
	j.cmd.Stderr = j.stderr
	stdout, err := j.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := j.cmd.Start(); err != nil {
		return nil, err
	}
	m.t.Cleanup(func() {
		j.cmd.Process.Kill()
		j.wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	j.line = strings.TrimSuffix(line, "\n")
	go io.Copy(io.Discard, stdout)
	return j, nil
}

// mustStartJob is startJob for the test's own goroutine.
func (m *machine) mustStartJob(env []string, args ...string) *job {
	m.t.Helper()
	j, err := m.startJob(env, args...)
	if err != nil {
		m.t.Fatal(err)
	}
	return j
}

// startJobs starts n identical jobs at once.
func (m *machine) startJobs(n int, env []string, args ...string) []*job {
	m.t.Helper()
	jobs := make([]*job, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { jobs[i], errs[i] = m.startJob(env, args...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		m.t.Fatal(err)
	}
	return jobs
}

// wait waits for the job to exit and returns its exit status, -1 when a
// signal killed it.
func (j *job) wait() int {
	j.once.Do(func() {
		err := j.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			j.status = ee.ExitCode()
		default:
			j.status = -2
		}
	})
	return j.status
}

// runJob runs fake-gpu-job to the end.
func (m *machine) runJob(env []string, args ...string) (stdout, stderr string, status int) {
	m.t.Helper()
	j := m.mustStartJob(env, args...)
	status = j.wait()
	return j.line, j.stderr.String(), status
}

func (m *machine) events() []Event {
	m.t.Helper()
	ev, err := ReadEvents(m.record)
	if err != nil {
		m.t.Fatal(err)
	}
	return ev
}

func (m *machine) processes() []Process {
	m.t.Helper()
	s, err := Load(m.state)
	if err != nil {
		m.t.Fatal(err)
	}
	s.DropDead()
	return s.Processes
}

func TestProbeReadsFakeSMI(t *testing.T) {
	me := os.Getpid()
	m := newMachine(t, State{
		Cards: []Card{
			{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", TotalMiB: 143771, ForeignMiB: 1000, ReservedMiB: 614},
			{Index: 1, UUID: "GPU-bbbb", TotalMiB: 24576},
		},
		Processes: []Process{{PID: me, GPUUUID: "GPU-aaaa", UsedMiB: 2000, Name: "trainer"}},
	})
	snap := m.mustProbe()
	wantGPUs := []nvidiasmi.GPU{
		{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: nvidiasmi.MiB(143771),
			Used: nvidiasmi.MiB(3000), Free: nvidiasmi.MiB(140157), Line: 2},
		{Index: 1, UUID: "GPU-bbbb", Name: DefaultName, Total: nvidiasmi.MiB(24576),
			Used: nvidiasmi.MiB(0), Free: nvidiasmi.MiB(24576), Line: 3},
	}
	wantApps := []nvidiasmi.App{{PID: me, GPUUUID: "GPU-aaaa", Used: nvidiasmi.MiB(2000), Line: 2}}
	if !slices.Equal(snap.GPUs, wantGPUs) || !slices.Equal(snap.Apps, wantApps) {
		t.Errorf("snapshot:\n got %+v\n     %+v\nwant %+v\n     %+v", snap.GPUs, snap.Apps, wantGPUs, wantApps)
	}
	// The reserved 614 MiB is in Unavailable but not in Used.
	if got := snap.GPUs[0].Unavailable(); got != nvidiasmi.MiB(3614) {
		t.Errorf("Unavailable() = %v, want 3614 MiB", got)
	}
}

func TestFailureModes(t *testing.T) {
	cards := func() []Card {
		return []Card{
			{Index: 0, UUID: "GPU-aaaa", TotalMiB: 1000},
			{Index: 1, UUID: "GPU-bbbb", TotalMiB: 1000},
			{Index: 2, UUID: "GPU-cccc", TotalMiB: 1000},
		}
	}
	t.Run("driver failure", func(t *testing.T) {
		newMachine(t, State{Mode: ModeDriverFailure, Cards: cards()})
		assertDriverFailure(t)
	})
	t.Run("no state variable", func(t *testing.T) {
		t.Setenv(EnvState, "")
		assertDriverFailure(t)
	})
	t.Run("missing state file", func(t *testing.T) {
		t.Setenv(EnvState, filepath.Join(t.TempDir(), "gone.json"))
		assertDriverFailure(t)
	})
	t.Run("hang", func(t *testing.T) {
		m := newMachine(t, State{Mode: ModeHang, Cards: cards()})
		start := time.Now()
		_, err := m.probe(300 * time.Millisecond)
		if !errors.Is(err, nvidiasmi.ErrTimeout) || !strings.Contains(err.Error(), "nvidia-smi timed out after 300ms") {
			t.Fatalf("err = %v, want a timeout", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("probe took %v", d)
		}
	})
	t.Run("lost card", func(t *testing.T) {
		s := State{Mode: ModeLostCard, Cards: cards(),
			Processes: []Process{{PID: os.Getpid(), GPUUUID: "GPU-bbbb", UsedMiB: 5}}}
		s.Cards[1].Lost = true
		m := newMachine(t, s)
		snap, err := m.probe(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		for _, g := range snap.GPUs {
			idx = append(idx, g.Index)
		}
		var named []string
		for _, p := range snap.Problems {
			if p.NamesCard() {
				named = append(named, fmt.Sprintf("%s:%d:%s", p.Source, p.GPUIndex, p.BusID))
			}
		}
		if !slices.Equal(idx, []int{0, 2}) || len(snap.Apps) != 0 ||
			!slices.Equal(named, []string{"gpu:1:0000:02:00.0", "apps:1:0000:02:00.0"}) {
			t.Errorf("cards %v, apps %+v, lost %v", idx, snap.Apps, named)
		}
	})
	t.Run("na", func(t *testing.T) {
		s := State{Mode: ModeNA, Cards: cards(),
			Processes: []Process{{PID: os.Getpid(), GPUUUID: "GPU-aaaa", UsedMiB: 5}}}
		s.Cards[0].NA = true
		m := newMachine(t, s)
		snap := m.mustProbe()
		if g := snap.GPUs[0]; g.Usable() || g.Unusable != `memory.total unknown ("[N/A]"); memory.free unknown ("[N/A]")` {
			t.Errorf("card 0: usable %v, %q", g.Usable(), g.Unusable)
		}
		if !snap.GPUs[1].Usable() || len(snap.Apps) != 1 || snap.Apps[0].Used.Known {
			t.Errorf("cards %+v, apps %+v", snap.GPUs, snap.Apps)
		}
	})
}

func assertDriverFailure(t *testing.T) {
	t.Helper()
	_, err := (&nvidiasmi.Probe{Bin: fakeSMI}).Query(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exit status 9") ||
		!strings.Contains(err.Error(), "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("err = %v, want exit 9 quoting the driver message", err)
	}
}

func oneCard(total, foreign, reserved int64) State {
	return State{Cards: []Card{{Index: 0, UUID: "GPU-aaaa", TotalMiB: total, ForeignMiB: foreign, ReservedMiB: reserved}}}
}

func TestJobsRegisterConcurrently(t *testing.T) {
	m := newMachine(t, oneCard(10000, 0, 0))
	const n = 8
	jobs := m.startJobs(n, []string{"CUDA_VISIBLE_DEVICES=GPU-aaaa"}, "--mem", "100", "--duration", "1m", "--record", m.record)
	for _, j := range jobs {
		want := fmt.Sprintf("fake-gpu-job pid=%d gpu=GPU-aaaa mem=100 index=0", j.cmd.Process.Pid)
		if j.line != want {
			t.Fatalf("job printed %q, want %q (stderr %q)", j.line, want, j.stderr.String())
		}
	}
	snap := m.mustProbe()
	if len(snap.Apps) != n || snap.GPUs[0].Used != nvidiasmi.MiB(100*n) {
		t.Fatalf("after %d jobs: used %v, %d apps", n, snap.GPUs[0].Used, len(snap.Apps))
	}
	for _, j := range jobs {
		j.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, j := range jobs {
		if s := j.wait(); s != 143 {
			t.Errorf("job exited %d after SIGTERM, want 143", s)
		}
	}
	snap = m.mustProbe()
	if len(snap.Apps) != 0 || snap.GPUs[0].Used != nvidiasmi.MiB(0) {
		t.Errorf("after SIGTERM: used %v, apps %+v", snap.GPUs[0].Used, snap.Apps)
	}
	var starts, ends int
	for _, e := range m.events() {
		switch {
		case e.Kind == EventStart:
			starts++
		case e.Kind == EventEnd && e.Exit == 143 && e.Signal == "terminated" && e.MemMiB == 100:
			ends++
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	if starts != n || ends != n {
		t.Errorf("%d starts, %d ends, want %d each", starts, ends, n)
	}
}

// TestJobsNeverOvercommit starts more jobs at once than the card holds:
// the room check and the registration are one locked step, so exactly as
// many as fit get in and the others fail with the CUDA OOM message.
func TestJobsNeverOvercommit(t *testing.T) {
	m := newMachine(t, oneCard(1200, 100, 100)) // 1000 MiB free
	jobs := m.startJobs(6, []string{"CUDA_VISIBLE_DEVICES=0"}, "--mem", "300", "--duration", "1m", "--record", m.record)
	var in int
	for _, j := range jobs {
		if j.line != "" {
			in++
			continue
		}
		if s := j.wait(); s != 1 || !strings.HasPrefix(j.stderr.String(), "RuntimeError: CUDA out of memory. Tried to allocate 300 MiB (GPU 0; 1200 MiB total capacity; ") {
			t.Errorf("refused job: status %d, stderr %q", s, j.stderr.String())
		}
	}
	if in != 3 {
		t.Errorf("%d jobs got 300 MiB of 1000 MiB free, want 3", in)
	}
	// Replay the record: what the jobs hold never exceeds what was free.
	held := int64(0)
	for _, e := range m.events() {
		switch e.Kind {
		case EventStart:
			if e.FreeMiB < e.MemMiB || e.FreeMiB != 1000-held {
				t.Errorf("start %+v with %d MiB held", e, held)
			}
			held += e.MemMiB
		case EventOOM:
			if e.FreeMiB != 1000-held || e.FreeMiB >= e.MemMiB {
				t.Errorf("oom %+v with %d MiB held", e, held)
			}
		}
	}
}

func TestJobOOMMessage(t *testing.T) {
	m := newMachine(t, oneCard(1000, 200, 100))
	stdout, stderr, status := m.runJob([]string{"CUDA_VISIBLE_DEVICES=GPU-aaaa"}, "--mem", "800")
	want := "RuntimeError: CUDA out of memory. Tried to allocate 800 MiB (GPU 0; 1000 MiB total capacity; 700 MiB free)\n"
	if status != 1 || stdout != "" || stderr != want {
		t.Errorf("status %d, stdout %q, stderr %q; want 1, %q", status, stdout, stderr, want)
	}
	if p := m.processes(); len(p) != 0 {
		t.Errorf("refused job registered: %+v", p)
	}
}

func TestKilledJobMemoryDisappears(t *testing.T) {
	m := newMachine(t, oneCard(1000, 0, 0))
	j := m.mustStartJob([]string{"CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}, "--mem", "500", "--duration", "1m")
	snap := m.mustProbe()
	if len(snap.Apps) != 1 || snap.Apps[0].PID != j.cmd.Process.Pid || snap.GPUs[0].Free != nvidiasmi.MiB(500) {
		t.Fatalf("running job: free %v, apps %+v", snap.GPUs[0].Free, snap.Apps)
	}
	if err := j.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: a zombie holds no GPU memory.
	waitExitNoReap(t, j.cmd.Process.Pid)
	snap = m.mustProbe()
	if len(snap.Apps) != 0 || snap.GPUs[0].Free != nvidiasmi.MiB(1000) {
		t.Errorf("killed job (zombie): free %v, apps %+v", snap.GPUs[0].Free, snap.Apps)
	}
	if s := j.wait(); s != -1 {
		t.Errorf("status %d, want killed", s)
	}
	snap = m.mustProbe()
	if len(snap.Apps) != 0 || snap.GPUs[0].Free != nvidiasmi.MiB(1000) {
		t.Errorf("killed job (reaped): free %v, apps %+v", snap.GPUs[0].Free, snap.Apps)
	}
	// The next job may take the whole card: the dead entry is dropped.
	if _, stderr, s := m.runJob([]string{"CUDA_VISIBLE_DEVICES=0"}, "--mem", "1000"); s != 0 {
		t.Errorf("job after the kill: status %d, stderr %q", s, stderr)
	}
}

func TestJobDevices(t *testing.T) {
	// Index 1 is the biggest card: CUDA's default order puts it first.
	s := State{Cards: []Card{
		{Index: 0, UUID: "GPU-small", TotalMiB: 6144},
		{Index: 1, UUID: "GPU-big", TotalMiB: 11264},
	}}
	lost := s
	lost.Cards = []Card{s.Cards[0], s.Cards[1]}
	lost.Cards[0].Lost = true
	tests := []struct {
		name       string
		state      *State // nil: no state variable
		env        []string
		args       []string
		wantOut    string // %d is the job's pid
		wantErr    string
		wantStatus int
	}{
		{name: "uuid", state: &s, env: []string{"CUDA_VISIBLE_DEVICES=GPU-small"}, args: []string{"--mem", "1"},
			wantOut: "fake-gpu-job pid=%d gpu=GPU-small mem=1 index=0"},
		{name: "index in default order", state: &s, env: []string{"CUDA_VISIBLE_DEVICES=0"}, args: []string{"--mem", "1"},
			wantOut: "fake-gpu-job pid=%d gpu=GPU-big mem=1 index=1"},
		{name: "index in bus order", state: &s, env: []string{"CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID"},
			args: []string{"--mem", "1"}, wantOut: "fake-gpu-job pid=%d gpu=GPU-small mem=1 index=0"},
		{name: "exit status", state: &s, env: []string{"CUDA_VISIBLE_DEVICES=1"}, args: []string{"--mem", "1", "--exit", "3"},
			wantOut: "fake-gpu-job pid=%d gpu=GPU-small mem=1 index=0", wantStatus: 3},
		{name: "empty CUDA_VISIBLE_DEVICES", state: &s, env: []string{"CUDA_VISIBLE_DEVICES="}, args: []string{"--mem", "1"},
			wantErr: "RuntimeError: CUDA error: no CUDA-capable device is detected\n", wantStatus: 1},
		{name: "no CUDA_VISIBLE_DEVICES", state: &s, args: []string{"--mem", "1"},
			wantErr: "RuntimeError: CUDA error: no CUDA-capable device is detected\n", wantStatus: 1},
		{name: "no such index", state: &s, env: []string{"CUDA_VISIBLE_DEVICES=7"}, args: []string{"--mem", "1"},
			wantErr: "RuntimeError: CUDA error: no CUDA-capable device is detected\n", wantStatus: 1},
		{name: "no GPU needed", state: &s, args: []string{"--exit", "4"},
			wantOut: "fake-gpu-job pid=%d gpu=none mem=0 index=-1", wantStatus: 4},
		{name: "no driver", env: []string{"CUDA_VISIBLE_DEVICES=0"}, args: []string{"--mem", "1"},
			wantErr: "RuntimeError: Found no NVIDIA driver on your system.\n", wantStatus: 1},
		{name: "lost card", state: &lost, env: []string{"CUDA_VISIBLE_DEVICES=GPU-small"}, args: []string{"--mem", "1"},
			wantErr: "RuntimeError: CUDA error: unknown error\n", wantStatus: 1},
		{name: "bad flag", state: &s, args: []string{"--mem", "-1"},
			wantErr: "fake-gpu-job: --mem must not be negative\n", wantStatus: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *machine
			if tt.state != nil {
				m = newMachine(t, *tt.state)
			} else {
				t.Setenv(EnvState, "")
				m = &machine{t: t}
			}
			j := m.mustStartJob(tt.env, tt.args...)
			status := j.wait()
			wantOut := tt.wantOut
			if wantOut != "" {
				wantOut = fmt.Sprintf(wantOut, j.cmd.Process.Pid)
			}
			if status != tt.wantStatus || j.line != wantOut || j.stderr.String() != tt.wantErr {
				t.Errorf("status %d, stdout %q, stderr %q\nwant   %d, %q, %q",
					status, j.line, j.stderr.String(), tt.wantStatus, wantOut, tt.wantErr)
			}
			if tt.state != nil {
				if p := m.processes(); len(p) != 0 {
					t.Errorf("left registered: %+v", p)
				}
			}
		})
	}
}

func TestJobGrows(t *testing.T) {
	m := newMachine(t, oneCard(1000, 0, 0))
	env := []string{"CUDA_VISIBLE_DEVICES=0"}
	_, stderr, status := m.runJob(env, "--mem", "100", "--grow-to", "300", "--grow-after", "10ms", "--record", m.record)
	if status != 0 {
		t.Fatalf("status %d, stderr %q", status, stderr)
	}
	type step struct {
		kind       string
		mem, free  int64
		exitStatus int
	}
	var got []step
	for _, e := range m.events() {
		got = append(got, step{e.Kind, e.MemMiB, e.FreeMiB, e.Exit})
	}
	want := []step{{EventStart, 100, 1000, 0}, {EventGrow, 300, 900, 0}, {EventEnd, 300, 1000, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}

func TestJobGrowthRefused(t *testing.T) {
	m := newMachine(t, oneCard(1000, 800, 0)) // 200 MiB free
	env := []string{"CUDA_VISIBLE_DEVICES=GPU-aaaa"}
	line, stderr, status := m.runJob(env, "--mem", "100", "--grow-to", "300", "--duration", "1m", "--record", m.record)
	wantErr := "RuntimeError: CUDA out of memory. Tried to allocate 200 MiB (GPU 0; 1000 MiB total capacity; 100 MiB free)\n"
	if status != 1 || stderr != wantErr || !strings.HasSuffix(line, "mem=100 index=0") {
		t.Errorf("status %d, stdout %q, stderr %q; want 1 and %q", status, line, stderr, wantErr)
	}
	var kinds []string
	for _, e := range m.events() {
		kinds = append(kinds, fmt.Sprintf("%s:%d:%d", e.Kind, e.MemMiB, e.Exit))
	}
	if want := []string{"start:100:0", "oom:200:0", "end:100:1"}; !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
	if p := m.processes(); len(p) != 0 {
		t.Errorf("left registered: %+v", p)
	}
}

// cardSteps are the recorded events as "kind:card:MiB".
func (m *machine) cardSteps() []string {
	var steps []string
	for _, e := range m.events() {
		steps = append(steps, fmt.Sprintf("%s:%d:%d", e.Kind, e.Index, e.MemMiB))
	}
	return steps
}

// A job given two cards takes its memory on each, so nvidia-smi lists its
// process on both; it grows on each and gives both back at its end.
func TestJobOnTwoCards(t *testing.T) {
	m := newMachine(t, State{Cards: []Card{
		{Index: 0, UUID: "GPU-aaaa", TotalMiB: 1000},
		{Index: 1, UUID: "GPU-bbbb", TotalMiB: 1000},
		{Index: 2, UUID: "GPU-cccc", TotalMiB: 1000},
	}})
	env := []string{"CUDA_VISIBLE_DEVICES=2,0", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}
	j := m.mustStartJob(env, "--mem", "100", "--duration", "1m", "--record", m.record)
	if want := fmt.Sprintf("fake-gpu-job pid=%d gpu=GPU-cccc,GPU-aaaa mem=100 index=2,0", j.cmd.Process.Pid); j.line != want {
		t.Fatalf("job printed %q, want %q (stderr %q)", j.line, want, j.stderr.String())
	}
	snap := m.mustProbe()
	onCard := map[string]int64{}
	for _, a := range snap.Apps {
		if a.PID == j.cmd.Process.Pid {
			onCard[a.GPUUUID] += a.Used.MiB
		}
	}
	if len(onCard) != 2 || onCard["GPU-cccc"] != 100 || onCard["GPU-aaaa"] != 100 {
		t.Errorf("nvidia-smi lists the job's memory by card as %v; want 100 MiB on GPU-cccc and on GPU-aaaa", onCard)
	}
	used := map[int]int64{}
	for _, g := range snap.GPUs {
		used[g.Index] = g.Used.MiB
	}
	if used[0] != 100 || used[1] != 0 || used[2] != 100 {
		t.Errorf("cards' used memory %v; want 100 on cards 0 and 2, none on 1", used)
	}
	j.cmd.Process.Signal(syscall.SIGTERM)
	if s := j.wait(); s != 143 {
		t.Errorf("status %d after SIGTERM, want 143", s)
	}
	if got, want := m.cardSteps(), []string{"start:2:100", "start:0:100", "end:2:100", "end:0:100"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if p := m.processes(); len(p) != 0 {
		t.Errorf("left registered: %+v", p)
	}
}

// When one of a job's cards has too little room, it takes nothing on any:
// the allocation is all or nothing, and only the refusal is recorded.
func TestJobOnTwoCardsRefused(t *testing.T) {
	m := newMachine(t, State{Cards: []Card{
		{Index: 0, UUID: "GPU-aaaa", TotalMiB: 1000},
		{Index: 1, UUID: "GPU-bbbb", TotalMiB: 1000, ForeignMiB: 950},
	}})
	line, stderr, status := m.runJob([]string{"CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb"}, "--mem", "100", "--record", m.record)
	wantErr := "RuntimeError: CUDA out of memory. Tried to allocate 100 MiB (GPU 1; 1000 MiB total capacity; 50 MiB free)\n"
	if status != 1 || line != "" || stderr != wantErr {
		t.Errorf("status %d, stdout %q, stderr %q; want 1, nothing, %q", status, line, stderr, wantErr)
	}
	if got, want := m.cardSteps(), []string{"oom:1:100"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if p := m.processes(); len(p) != 0 {
		t.Errorf("left registered: %+v", p)
	}
}
