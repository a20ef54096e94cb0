package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/procfs"
)

// startChild starts sleeper with args as the leader of its own process
// group, a child of this process that nothing waits for: as an attempt
// looks to a subreaper once the scheduler that started it died.
func startChild(t *testing.T, args ...string) executor.Process {
	t.Helper()
	cmd := exec.Command(sleeper, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	return executor.Process{PID: pid, PGID: pid, StartTicks: local.StartTicks(pid)}
}

// An adopted attempt ends with its leader's exit status, its leader
// reaped; one that had exited before it was adopted too.
func TestAdoptExitStatus(t *testing.T) {
	for _, wait := range []bool{false, true} {
		p := startChild(t, "-sleep", "100ms", "-exit", "3")
		if wait {
			for procfs.Alive(p.PID) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		since := time.Now()
		r := (&local.Executor{}).Adopt(context.Background(), executor.Job{}, p, since)
		if r.Reason != executor.Exited || r.ExitCode != 3 || !r.Started || !r.Start.Equal(since) || r.Err != nil {
			t.Errorf("exited before adoption %v: %+v; want exited with 3, started at %v", wait, r, since)
		}
		if _, ok := procfs.Read(p.PID); ok {
			t.Errorf("exited before adoption %v: the leader %d is still there (not reaped)", wait, p.PID)
		}
	}
}

// The timeout of an adopted attempt counts from when it started running,
// not from its adoption; whatever it left in its group is killed.
func TestAdoptTimeout(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	p := startChild(t, "-sleep", "1h", "-grandchild", "-pidfile", pidfile)
	var grandchild int
	for grandchild == 0 {
		b, _ := os.ReadFile(pidfile)
		if f := strings.Fields(string(b)); len(f) == 2 {
			grandchild, _ = strconv.Atoi(f[1])
		}
		time.Sleep(10 * time.Millisecond)
	}
	job := executor.Job{Timeout: time.Hour, KillGrace: 50 * time.Millisecond}
	r := (&local.Executor{}).Adopt(context.Background(), job, p, time.Now().Add(-time.Hour))
	if r.Reason != executor.TimedOut {
		t.Errorf("adopted an hour after it began, with a timeout of an hour: %+v; want timed out at once", r)
	}
	deadline := time.Now().Add(5 * time.Second) // SIGKILL takes a moment to land
	for procfs.Alive(grandchild) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if procfs.Alive(grandchild) {
		t.Errorf("the attempt's grandchild %d outlived it", grandchild)
	}
}

// Stopping an adopted attempt (its context) stops it as Execute would.
func TestAdoptCancel(t *testing.T) {
	p := startChild(t, "-sleep", "1h")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := (&local.Executor{}).Adopt(ctx, executor.Job{KillGrace: time.Second}, p, time.Now())
	if r.Reason != executor.Cancelled || procfs.Alive(p.PID) {
		t.Errorf("cancelled: %+v (leader alive: %v); want cancelled, gone", r, procfs.Alive(p.PID))
	}
}

// A process that is not this one's child is not adopted: it is left alone.
func TestAdoptNotChild(t *testing.T) {
	self := executor.Process{PID: os.Getpid(), PGID: os.Getpid(), StartTicks: local.StartTicks(os.Getpid())}
	r := (&local.Executor{}).Adopt(context.Background(), executor.Job{}, self, time.Now())
	if r.Reason != executor.Lost || !errors.Is(r.Err, local.ErrNotChild) {
		t.Errorf("adopting this very process: %+v; want lost, ErrNotChild", r)
	}
	p := startChild(t, "-sleep", "1h")
	p.StartTicks++
	r = (&local.Executor{}).Adopt(context.Background(), executor.Job{}, p, time.Now())
	if r.Reason != executor.Lost || !procfs.Alive(p.PID) {
		t.Errorf("a child whose start time differs from the handle's: %+v, alive %v; want lost, left alone", r, procfs.Alive(p.PID))
	}
}
