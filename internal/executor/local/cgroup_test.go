package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/gpusched/gpusched/internal/procfs"
	"github.com/gpusched/gpusched/internal/testbin"
)

func needCgroups(t *testing.T) string {
	t.Helper()
	base := cgroupBase()
	if base == "" {
		t.Skip("no usable cgroup v2 here (not mounted, or this process's cgroup is not writable)")
	}
	return base
}

func sleeperBin(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Build("cmd/sleeper")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func newToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	return "cgroup-test-" + hex.EncodeToString(b)
}

func testJob(t *testing.T, args ...string) executor.Job {
	root := t.TempDir()
	return executor.Job{
		TaskID: "t", Attempt: 1,
		Args:      append([]string{sleeperBin(t)}, args...),
		Env:       []string{"PATH=" + os.Getenv("PATH")},
		LogRoot:   root,
		LogPath:   filepath.Join(root, "logs", "t", "attempt-1.log"),
		KillGrace: 100 * time.Millisecond,
		Token:     newToken(t),
	}
}

func readPIDs(t *testing.T, path string, n int) []int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if f := strings.Fields(string(b)); len(f) >= n {
			pids := make([]int, len(f))
			for i := range f {
				pids[i], _ = strconv.Atoi(f[i])
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lists fewer than %d PIDs after 10s", path, n)
		}
	}
}

func gone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if !procfs.Alive(pid) {
			return true
		}
	}
	return false
}

// TestCgroupCatchesWhatTheTokenCannot: a grandchild that leaves the group
// and clears its environment is out of the token scan's reach (see
// docs/processes.md); the attempt's cgroup still holds it, and it is
// killed with the attempt, whose cgroup is then removed.
func TestCgroupCatchesWhatTheTokenCannot(t *testing.T) {
	needCgroups(t)
	for _, withCgroup := range []bool{false, true} {
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := testJob(t, "-grandchild", "-escape", "setsid", "-clear-env", "-pidfile", pidfile, "-exit", "0")
		var inCgroup string
		r := (&Executor{Cgroups: withCgroup}).Execute(context.Background(), j, executor.Hooks{Running: func(p executor.Running) { inCgroup = cgroupOf(p.PID) }})
		if r.Err != nil || r.ExitCode != 0 {
			t.Fatalf("result = %+v", r)
		}
		escapee := readPIDs(t, pidfile, 2)[1]
		if !withCgroup {
			if procfs.Alive(escapee) {
				syscall.Kill(escapee, syscall.SIGKILL)
			} else {
				t.Error("without a cgroup the env-clearing escapee was killed: the test does not show what the cgroup adds")
			}
			continue
		}
		name := cgroupName(j.Token)
		if !strings.HasSuffix(inCgroup, "/"+name) {
			t.Errorf("the leader ran in cgroup %q, want one named %s", inCgroup, name)
		}
		if !gone(escapee) {
			t.Errorf("the env-clearing escapee %d survived its attempt", escapee)
			syscall.Kill(escapee, syscall.SIGKILL)
		}
		if _, err := os.Stat(filepath.Join(cgroupBase(), name)); !os.IsNotExist(err) {
			t.Errorf("the attempt's cgroup is still there: %v", err)
		}
	}
}

// useCgroupBase points this process's cgroup use at base for one test.
func useCgroupBase(t *testing.T, base string) {
	cgroupBase()
	old, oldOwn, oldOff := cgroups.base, cgroups.own, cgroups.off.Load()
	cgroups.base = base
	if rel, ok := strings.CutPrefix(base, old); ok && old != "" {
		cgroups.own = filepath.Join(oldOwn, rel)
	}
	cgroups.off.Store(false)
	t.Cleanup(func() { cgroups.base, cgroups.own = old, oldOwn; cgroups.off.Store(oldOff) })
}

// TestCgroupFallbackNotACgroup: where the cgroup folder is no cgroup v2 (no
// cgroup.kill), cgroups are turned off and the token scan does the work.
func TestCgroupFallbackNotACgroup(t *testing.T) {
	useCgroupBase(t, t.TempDir())
	pidfile := filepath.Join(t.TempDir(), "pids")
	j := testJob(t, "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-exit", "0")
	if r := (&Executor{Cgroups: true}).Execute(context.Background(), j, executor.Hooks{}); r.Err != nil || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	if !cgroups.off.Load() {
		t.Error("cgroups still on after a folder without cgroup.kill")
	}
	if escapee := readPIDs(t, pidfile, 2)[1]; !gone(escapee) {
		t.Errorf("escapee %d survived", escapee)
		syscall.Kill(escapee, syscall.SIGKILL)
	}
}

// TestCgroupFallbackStartRefused: a cgroup that takes no processes (here
// a "domain invalid" one, beside a threaded sibling) makes the start into
// it fail; the attempt starts without it, and cgroups are turned off.
func TestCgroupFallbackStartRefused(t *testing.T) {
	base := needCgroups(t)
	parent := filepath.Join(base, "gpusched-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroup(parent) })
	sibling := filepath.Join(parent, "threaded")
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sibling, "cgroup.type"), []byte("threaded"), 0); err != nil {
		t.Skipf("cannot make a threaded cgroup here: %v", err)
	}
	useCgroupBase(t, parent)
	var in string
	j := testJob(t, "-exit", "0")
	r := (&Executor{Cgroups: true}).Execute(context.Background(), j, executor.Hooks{Running: func(p executor.Running) { in = cgroupOf(p.PID) }})
	if !r.Started || r.Err != nil || r.ExitCode != 0 {
		t.Fatalf("result = %+v, want the job run without its cgroup", r)
	}
	if strings.Contains(in, "gpusched-test-") {
		t.Errorf("the job ran in cgroup %s", in)
	}
	if !cgroups.off.Load() {
		t.Error("cgroups still on after a start into one failed")
	}
	if _, err := os.Stat(filepath.Join(parent, cgroupName(j.Token))); !os.IsNotExist(err) {
		t.Errorf("the refused cgroup is still there: %v", err)
	}
}

// TestKillStaleCgroup: after a crash, the attempt's cgroup, found by its
// token, is emptied and removed, even of processes that carry no token.
func TestKillStaleCgroup(t *testing.T) {
	needCgroups(t)
	token := newToken(t)
	cg := newCgroup(token)
	if cg == nil {
		t.Fatal("newCgroup = nil where cgroups work")
	}
	cmd := exec.Command("sleep", "3600")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: cg.fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	unix.Close(cg.fd)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n, err := KillStale(executor.Process{}, token)
	if err != nil || n != 1 {
		t.Errorf("KillStale = %d, %v; want the one process of the cgroup", n, err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the process in the stale cgroup survived")
	}
	if _, err := os.Stat(cg.path); !os.IsNotExist(err) {
		t.Errorf("the stale cgroup is still there: %v", err)
	}
}
