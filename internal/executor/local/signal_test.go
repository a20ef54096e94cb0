package local

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// Signal stops and continues an attempt's process group, and refuses a
// handle whose process is not the one it names (a recycled PID).
func TestSignalStopsAndContinuesTheGroup(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	h := EncodeHandle(executor.Process{PID: pid, PGID: pid, StartTicks: StartTicks(pid)})
	state := func() byte { st, _ := procfs.Read(pid); return st.State }

	if err := Signal(h, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for state() != 'T' { // the kernel stops it asynchronously; no deadline but the test's
	}
	if err := Signal(h, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for state() == 'T' {
	}
	stale := EncodeHandle(executor.Process{PID: pid, PGID: pid, StartTicks: StartTicks(pid) + 1})
	if err := Signal(stale, syscall.SIGSTOP); err == nil {
		t.Error("Signal sent to a process whose start time differs from the handle's")
	}
	if st := state(); st == 'T' {
		t.Errorf("state %c after a refused SIGSTOP", st)
	}
}
