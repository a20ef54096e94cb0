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
	n, err := local.KillStale(p)
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
	if n, err := local.KillStale(p); n != 0 || err != nil {
		t.Fatalf("KillStale = %d, %v; want nothing killed", n, err)
	}
	if !executortest.Alive(p.PID) {
		t.Error("KillStale killed a process whose start time did not match")
	}
}
