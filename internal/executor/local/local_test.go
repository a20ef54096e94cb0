package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/procfs"
	"github.com/gpusched/gpusched/internal/testbin"
)

var sleeper string

func TestMain(m *testing.M) {
	if os.Getenv(emfileHelperVar) != "" {
		os.Exit(emfileHelper())
	}
	sleeper = testbin.MustBuild("cmd/sleeper")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// harness holds e to the conformance suite. Its attempts die with the
// process that runs them: a restart means a fresh Executor, whose Recover
// reports every orphan Lost and kills what is left of it.
func harness(e func() *local.Executor) executortest.Harness {
	return executortest.Harness{
		New:     func(*testing.T) executor.Executor { return e() },
		Sleeper: sleeper,
	}
}

func TestConformance(t *testing.T) {
	h := harness(func() *local.Executor { return &local.Executor{} })
	executortest.Run(t, h)
	executortest.RunLocal(t, h)
}

// TestConformanceCgroups holds the executor with a cgroup per attempt to
// the same suite (where the machine has none, it falls back to the token,
// and the suite's cgroup test is skipped).
func TestConformanceCgroups(t *testing.T) {
	h := harness(func() *local.Executor { return &local.Executor{Cgroups: true} })
	executortest.Run(t, h)
	executortest.RunLocal(t, h)
}

func TestStartTicks(t *testing.T) {
	if local.StartTicks(os.Getpid()) == 0 {
		t.Error("StartTicks of this process is 0")
	}
	if local.StartTicks(1<<30) != 0 {
		t.Error("StartTicks of a PID that cannot exist is not 0")
	}
}

func startGroup(t *testing.T, args ...string) (*exec.Cmd, executor.Process) {
	t.Helper()
	cmd := exec.Command(sleeper, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	pid := cmd.Process.Pid
	return cmd, executor.Process{PID: pid, PGID: pid, StartTicks: local.StartTicks(pid)}
}

func TestKillStale(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	cmd, p := startGroup(t, "-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // reap the leader like init would
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); len(pids) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(pidfile)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
	}
	n, err := local.KillStale(p, "")
	if err != nil || n != 2 {
		t.Fatalf("KillStale = %d, %v; want 2 processes killed", n, err)
	}
	<-exited
	for _, pid := range pids {
		if executortest.Alive(pid) {
			t.Errorf("process %d survived KillStale", pid)
		}
	}
}

func TestKillStaleSparesRecycledPID(t *testing.T) {
	_, p := startGroup(t, "-sleep", "1h")
	p.StartTicks++ // as if the PID now belonged to a newer process
	if n, err := local.KillStale(p, ""); n != 0 || err != nil {
		t.Fatalf("KillStale = %d, %v; want nothing killed", n, err)
	}
	if !executortest.Alive(p.PID) {
		t.Error("KillStale killed a process whose start time did not match")
	}
}

func TestKillStaleFindsTokenWithoutHandle(t *testing.T) {
	token := "test-token-" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(sleeper, "-sleep", "1h")
	cmd.Env = append(os.Environ(), local.TokenVar+"="+token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // it even left our group
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command(sleeper, "-sleep", "1h")
	other.Env = append(os.Environ(), local.TokenVar+"="+token+"0") // a different attempt
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	// The kernel lets a vfork parent go on before the child's exec has
	// put its environment in place; until then a child of this process
	// is rightly taken for one just started, not a stale one.
	waitEnviron(t, cmd.Process.Pid)
	n, err := local.KillStale(executor.Process{}, token)
	if err != nil || n != 1 {
		t.Fatalf("KillStale = %d, %v; want the one process with the token", n, err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the process with the token survived")
	}
	if !executortest.Alive(other.Process.Pid) {
		t.Error("a process with another token was killed")
	}
}

// emfileHelperVar makes the test binary run emfileHelper instead of the
// tests: a child process whose descriptors can be used up without harm.
const emfileHelperVar = "GPUSCHED_TEST_EMFILE_HELPER"

// emfileOutcome is what emfileHelper saw with k descriptors free.
type emfileOutcome struct {
	Free        int
	Started     bool
	Environment bool // errors.Is(Err, executor.ErrEnvironment)
	Command     bool // errors.Is(Err, executor.ErrCommand)
	Err         string
}

// emfileHelper lowers its descriptor limit, uses up every descriptor but
// k, and runs a job, for k = 0, 1, ...: it prints what happened as JSON.
func emfileHelper() int {
	lim := unix.Rlimit{Cur: 64, Max: 64}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 1
	}
	var fill []*os.File
	refill := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return
			}
			fill = append(fill, f)
		}
	}
	root := os.Getenv("GPUSCHED_TEST_ROOT")
	var out []emfileOutcome
	for k := 0; k <= 8; k++ {
		refill()
		for range k {
			fill[len(fill)-1].Close()
			fill = fill[:len(fill)-1]
		}
		j := executor.Job{
			Args:    []string{os.Getenv("GPUSCHED_TEST_SLEEPER"), "-exit", "0"},
			LogRoot: root,
			LogPath: filepath.Join(root, "logs", strconv.Itoa(k), "attempt-1.log"),
		}
		r := (&local.Executor{}).Execute(context.Background(), j, executor.Hooks{})
		o := emfileOutcome{Free: k, Started: r.Started, Environment: errors.Is(r.Err, executor.ErrEnvironment), Command: errors.Is(r.Err, executor.ErrCommand)}
		if r.Err != nil {
			o.Err = r.Err.Error()
		}
		out = append(out, o)
	}
	for _, f := range fill {
		f.Close()
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// TestTooManyOpenFiles runs jobs in a child process with every descriptor
// used up but a few: failing to open the log and failing to start for
// lack of descriptors are the environment's fault, not the command's.
func TestTooManyOpenFiles(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), emfileHelperVar+"=1", "GPUSCHED_TEST_SLEEPER="+sleeper, "GPUSCHED_TEST_ROOT="+t.TempDir())
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, b)
	}
	var out []emfileOutcome
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("helper printed %q: %v", b, err)
	}
	var logFault, startFault, ran bool
	for _, o := range out {
		t.Logf("%d free: %+v", o.Free, o)
		switch {
		case o.Started:
			ran = true
		case !o.Environment || o.Command:
			t.Errorf("with %d descriptors free: %q is not (only) an environment fault", o.Free, o.Err)
		case strings.Contains(o.Err, "log"):
			logFault = true
		case strings.HasPrefix(o.Err, "start "):
			startFault = true
		}
		if !o.Started && !strings.Contains(o.Err, "too many open files") {
			t.Errorf("with %d descriptors free: error %q does not say why", o.Free, o.Err)
		}
	}
	if !logFault || !startFault || !ran {
		t.Errorf("want a log that could not be opened, a process that could not start and, with enough descriptors, a job that ran; got %v, %v, %v", logFault, startFault, ran)
	}
}

// waitEnviron waits until the environment of process pid can be read.
func waitEnviron(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if env, err := procfs.Environ(pid, nil); err == nil && len(env) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the environment of process %d never appeared", pid)
		}
	}
}
