package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/testbin"
)

var sleeper string

func TestMain(m *testing.M) {
	sleeper = testbin.MustBuild("cmd/sleeper")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	executortest.Run(t, func(*testing.T) executor.Executor { return &local.Executor{} }, sleeper)
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
