package nvidiasmi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// answer is what the fake runner returns for one query.
type answer struct {
	out string
	err error
}

// fakeRunner is a RunFunc that answers from a table keyed by the query
// flag and records the calls it gets.
type fakeRunner struct {
	answers map[string]answer
	calls   [][]string
}

func (f *fakeRunner) run(_ context.Context, bin string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, append([]string{bin}, args...))
	a, ok := f.answers[args[0]]
	if !ok {
		return nil, fmt.Errorf("unexpected args %q", args)
	}
	return []byte(a.out), a.err
}

var errExit = errors.New("exit status 9")

const (
	twoCards = gpuHeader +
		"0, GPU-a, NVIDIA H200, 143771 MiB, 32362 MiB, 110796 MiB\n" +
		"1, GPU-b, NVIDIA H200, 143771 MiB, [N/A], [N/A]\n"
	appsHeader = "pid, gpu_uuid, used_memory [MiB]\n"
	lostLine   = "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n"
)

func TestProbeQuery(t *testing.T) {
	driver := string(readCapture(t, "fail-driver-not-loaded-couldnt-communicate.txt"))
	tests := []struct {
		name     string
		gpus     answer
		apps     answer
		wantGPUs []int // indices of the cards returned
		wantApps []int // pids of the processes returned
		lost     []int // card indices that problems name
		wantErr  error // matched with errors.Is when set
		errHas   []string
	}{
		{
			name:     "two cards, one process",
			gpus:     answer{out: twoCards},
			apps:     answer{out: appsHeader + "42, GPU-a, 1000 MiB\n"},
			wantGPUs: []int{0, 1},
			wantApps: []int{42},
		},
		{
			name:     "no processes",
			gpus:     answer{out: twoCards},
			apps:     answer{out: appsHeader},
			wantGPUs: []int{0, 1},
		},
		{
			name:   "driver not loaded",
			gpus:   answer{out: driver, err: errExit},
			errHas: []string{"exit status 9", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"},
		},
		{
			name:    "error message with exit 0",
			gpus:    answer{out: driver},
			wantErr: ErrBadOutput,
			errHas:  []string{"NVIDIA-SMI has failed"},
		},
		{
			name:    "header only",
			gpus:    answer{out: gpuHeader},
			wantErr: ErrBadOutput,
			errHas:  []string{"no card rows", "header only"},
		},
		{
			name:    "empty output",
			gpus:    answer{},
			wantErr: ErrBadOutput,
			errHas:  []string{"(no output)"},
		},
		{
			name:   "failure with rows but no lost card is an error",
			gpus:   answer{out: twoCards, err: errors.New("exit status 14")},
			errHas: []string{"exit status 14"},
		},
		{
			name:     "lost card, exit non-zero",
			gpus:     answer{out: lostLine + gpuHeader + "0, GPU-a, X, 100 MiB, 0 MiB, 100 MiB\n", err: errors.New("exit status 15")},
			apps:     answer{out: lostLine + appsHeader, err: errors.New("exit status 15")},
			wantGPUs: []int{0},
			lost:     []int{1, 1},
		},
		{
			name:     "lost card, exit 0",
			gpus:     answer{out: gpuHeader + lostLine + "0, GPU-a, X, 100 MiB, 0 MiB, 100 MiB\n"},
			apps:     answer{out: appsHeader},
			wantGPUs: []int{0},
			lost:     []int{1},
		},
		{
			name:    "every card lost",
			gpus:    answer{out: lostLine + gpuHeader, err: errors.New("exit status 15")},
			wantErr: ErrBadOutput,
			errHas:  []string{"Unable to determine the device handle for GPU1"},
		},
		{
			name:   "apps query fails",
			gpus:   answer{out: twoCards},
			apps:   answer{out: "Failed to initialize NVML: Driver/library version mismatch\n", err: errors.New("exit status 18")},
			errHas: []string{"apps", "exit status 18", "Driver/library version mismatch"},
		},
		{
			name:    "apps output without header",
			gpus:    answer{out: twoCards},
			apps:    answer{out: "No running processes found\n"},
			wantErr: ErrBadOutput,
			errHas:  []string{"No running processes found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRunner{answers: map[string]answer{GPUQuery: tt.gpus, AppsQuery: tt.apps}}
			p := &Probe{Bin: "/opt/nvidia-smi", Run: f.run}
			snap, err := p.Query(context.Background())
			if tt.wantErr != nil || tt.errHas != nil {
				if err == nil {
					t.Fatalf("Query() = %+v, want an error", snap)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("error %q is not %v", err, tt.wantErr)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				if !reflect.DeepEqual(snap, Snapshot{}) {
					t.Errorf("error came with a snapshot: %+v", snap)
				}
				return
			}
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			var idx, pids, lost []int
			for _, g := range snap.GPUs {
				idx = append(idx, g.Index)
			}
			for _, a := range snap.Apps {
				pids = append(pids, a.PID)
			}
			for _, pr := range snap.Problems {
				if pr.NamesCard() {
					lost = append(lost, pr.GPUIndex)
				}
			}
			if !slices.Equal(idx, tt.wantGPUs) || !slices.Equal(pids, tt.wantApps) || !slices.Equal(lost, tt.lost) {
				t.Errorf("cards %v, pids %v, lost %v; want %v, %v, %v", idx, pids, lost, tt.wantGPUs, tt.wantApps, tt.lost)
			}
			// Processes first, then cards: see Query for why.
			want := [][]string{{"/opt/nvidia-smi", AppsQuery, Format}, {"/opt/nvidia-smi", GPUQuery, Format}}
			if !reflect.DeepEqual(f.calls, want) {
				t.Errorf("calls = %q, want %q", f.calls, want)
			}
		})
	}
}

func TestProbeCardNumbers(t *testing.T) {
	f := &fakeRunner{answers: map[string]answer{GPUQuery: {out: twoCards}, AppsQuery: {out: appsHeader}}}
	snap, err := (&Probe{Bin: "x", Run: f.run}).Query(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, b := snap.GPUs[0], snap.GPUs[1]
	if !a.Usable() || a.Free != MiB(110796) || a.Unavailable() != MiB(143771-110796) {
		t.Errorf("card 0 = %+v", a)
	}
	if b.Usable() || !strings.Contains(b.Unusable, "memory.free unknown") {
		t.Errorf("card 1 with [N/A] free is usable or says %q", b.Unusable)
	}
}

// blockRun waits for ctx and returns its error, as a hung nvidia-smi would.
func blockRun(ctx context.Context, _ string, _ ...string) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestProbeTimeout(t *testing.T) {
	var calls atomic.Int32
	run := func(ctx context.Context, bin string, args ...string) ([]byte, error) {
		calls.Add(1)
		return blockRun(ctx, bin, args...)
	}
	p := &Probe{Bin: "x", Timeout: 50 * time.Millisecond, Run: run}
	_, err := p.Query(context.Background())
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "nvidia-smi timed out after 50ms") {
		t.Fatalf("err = %v, want a timeout after 50ms", err)
	}
	// A hung nvidia-smi hangs for the second question too: one timeout
	// per reading is enough to wait.
	if n := calls.Load(); n != 1 {
		t.Errorf("nvidia-smi was run %d times after it hung; want 1", n)
	}
}

func TestProbeCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Probe{Bin: "x", Run: blockRun}).Query(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestProbeDefaults(t *testing.T) {
	var got time.Duration
	run := func(ctx context.Context, _ string, args ...string) ([]byte, error) {
		d, _ := ctx.Deadline()
		got = time.Until(d)
		if args[0] == GPUQuery {
			return []byte(twoCards), nil
		}
		return []byte(appsHeader), nil
	}
	if _, err := (&Probe{Bin: "x", Run: run}).Query(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got <= DefaultTimeout-time.Second || got > DefaultTimeout {
		t.Errorf("deadline %v away, want about %v", got, DefaultTimeout)
	}
}

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBin(t *testing.T) {
	dir := t.TempDir()
	fake := script(t, dir, "nvidia-smi", "exit 0\n")
	empty := t.TempDir()
	tests := []struct {
		name    string
		env     string
		path    string
		want    string
		wantErr bool
	}{
		{name: "env wins", env: fake, path: empty, want: fake},
		{name: "path", env: "", path: dir, want: fake},
		{name: "env names a missing file", env: filepath.Join(empty, "nope"), path: dir, wantErr: true},
		{name: "nowhere", env: "", path: empty, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvBin, tt.env)
			t.Setenv("PATH", tt.path)
			got, err := Bin()
			if tt.wantErr {
				if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "GPUSCHED_NVIDIA_SMI") ||
					!strings.Contains(err.Error(), "nvidia-smi not found") {
					t.Fatalf("Bin() = %q, %v; want ErrNotFound mentioning GPUSCHED_NVIDIA_SMI", got, err)
				}
				_, qerr := (&Probe{}).Query(context.Background())
				if !errors.Is(qerr, ErrNotFound) {
					t.Errorf("Query() error = %v, want ErrNotFound", qerr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Bin() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestExecRun(t *testing.T) {
	dir := t.TempDir()
	ok := script(t, dir, "ok", `printf '%s\n' "$@"; echo 'Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error' >&2`+"\n")
	out, err := ExecRun(context.Background(), ok, "a", "b c")
	want := "a\nb c\nUnable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n"
	if err != nil || string(out) != want {
		t.Fatalf("ExecRun = %q, %v; want %q (stdout then stderr)", out, err, want)
	}

	fail := script(t, dir, "fail", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n")
	out, err = ExecRun(context.Background(), fail)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 9 || !strings.HasPrefix(string(out), "NVIDIA-SMI has failed") {
		t.Fatalf("ExecRun = %q, %v; want exit 9 with the message", out, err)
	}
	_, err = (&Probe{Bin: fail}).Query(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exit status 9") || !strings.Contains(err.Error(), "couldn't communicate") {
		t.Fatalf("Query() error = %v, want exit 9 quoting the message", err)
	}
}

func TestExecRunKillsHungGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The shell waits on a child that holds stdout open, as a hung
	// nvidia-smi with helpers would: killing the shell alone would leave
	// the pipe open.
	hang := script(t, dir, "hang", "sleep 1000 &\necho $! > "+pidFile+"\nwait\n")
	start := time.Now()
	_, err := (&Probe{Bin: hang, Timeout: 300 * time.Millisecond}).Query(context.Background())
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "nvidia-smi timed out after 300ms") {
		t.Fatalf("err = %v, want a timeout after 300ms", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Query took %v after a 300ms timeout", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The orphaned child is reaped by someone else; wait until it is gone
	// or a zombie.
	deadline := time.Now().Add(5 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d of the hung script survived the timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// Whatever a broken nvidia-smi prints (binary junk, a line of a megabyte,
// escape sequences, invalid UTF-8), the errors and problems that quote it
// are one line of at most 500 bytes, the junk quoted and cut.
func TestJunkOutputGivesShortLines(t *testing.T) {
	mega := strings.Repeat("A", 1<<20)
	var junk strings.Builder
	for i := range 4096 {
		junk.WriteByte(byte(i*7 + i/256)) // every byte value, NUL, ESC, \r, invalid UTF-8 included
	}
	bin := junk.String()
	row := func(cells ...string) string { return strings.Join(cells, ", ") + "\n" }
	outputs := map[string]answer{
		"a megabyte line":                   {out: mega},
		"a megabyte line, exit 9":           {out: mega + "\n", err: errExit},
		"binary junk":                       {out: bin},
		"binary junk, exit 9":               {out: bin, err: errExit},
		"junk before the header":            {out: bin + "\n" + twoCards},
		"junk after the header":             {out: gpuHeader + bin},
		"junk cells":                        {out: gpuHeader + row("0", "GPU-"+bin, mega, bin, bin, mega)},
		"megabyte error line naming a card": {out: "Unable to determine the device handle for GPU1: 0000:34:00.0: " + mega + bin + "\n" + twoCards, err: errExit},
		"only an error line of junk":        {out: "Failed to initialize NVML: " + bin, err: errExit},
	}
	check := func(t *testing.T, what, s string) {
		t.Helper()
		if len(s) > 500 || strings.ContainsAny(s, "\n\r\x00\x1b") || !utf8.ValidString(s) {
			t.Errorf("%s of %d bytes is not one short line: %.600q", what, len(s), s)
		}
	}
	for name, a := range outputs {
		t.Run(name, func(t *testing.T) {
			for _, apps := range []answer{{out: appsHeader}, a} {
				f := &fakeRunner{answers: map[string]answer{GPUQuery: a, AppsQuery: apps}}
				snap, err := (&Probe{Bin: "/opt/nvidia-smi", Run: f.run}).Query(context.Background())
				if err != nil {
					check(t, "error", err.Error())
					continue
				}
				for _, p := range snap.Problems {
					check(t, "problem", p.String())
					if len(p.Text) > maxText {
						t.Errorf("Problem.Text of %d bytes", len(p.Text))
					}
				}
				for _, g := range snap.GPUs {
					check(t, "unusable reason", g.Unusable)
				}
			}
			gpus, problems := ParseGPUs([]byte(a.out))
			for _, p := range problems {
				check(t, "problem", p.String())
			}
			for _, g := range gpus {
				check(t, "unusable reason", g.Unusable)
			}
		})
	}
}
