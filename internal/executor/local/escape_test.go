package local

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

func TestAfter(t *testing.T) {
	for _, c := range []struct {
		pid, leader, last int
		want              bool
	}{
		{pid: 101, leader: 100, last: 200, want: true},
		{pid: 200, leader: 100, last: 200, want: true},
		{pid: 100, leader: 100, last: 200, want: false}, // the leader itself
		{pid: 99, leader: 100, last: 200, want: false},  // older
		{pid: 201, leader: 100, last: 200, want: false}, // older, from the last round
		{pid: 100, leader: 100, last: 100, want: false}, // nothing since
		// The kernel went round past the top: 32000 .. 32767, then 300 ...
		{pid: 32700, leader: 32000, last: 500, want: true},
		{pid: 400, leader: 32000, last: 500, want: true},
		{pid: 600, leader: 32000, last: 500, want: false},
		{pid: 31999, leader: 32000, last: 500, want: false},
	} {
		if got := after(c.pid, c.leader, c.last); got != c.want {
			t.Errorf("after(%d, leader %d, last %d) = %v, want %v", c.pid, c.leader, c.last, got, c.want)
		}
	}
}

// startWithEnv starts an hour-long sleep with env in a session of its own
// and returns its PID; it is killed at the end of the test.
func startWithEnv(t *testing.T, env ...string) int {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Wait for execve to put the environment in place: a child of this
	// test caught before would be taken for another attempt's leader.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st, ok := procfs.Read(cmd.Process.Pid); ok && st.EnvEnd != 0 {
			break
		}
	}
	return cmd.Process.Pid
}

// TestCarriersReadsOnlyNewerProcesses: when the fork counter says the
// kernel cannot have gone round the PIDs since the leader started, the
// scan looks only at PIDs handed out since; when it cannot tell, at every
// process.
func TestCarriersReadsOnlyNewerProcesses(t *testing.T) {
	token := "carriers-test-" + strconv.Itoa(os.Getpid())
	forks, err := procfs.Forks()
	if err != nil {
		t.Fatal(err)
	}
	older := startWithEnv(t, executor.TokenVar+"="+token)
	leader := startWithEnv(t)
	newer := startWithEnv(t, executor.TokenVar+"="+token)

	tr := &tracker{self: os.Getpid(), leader: leader, token: token, began: time.Now().Add(-time.Minute)}
	tr.forks0.Store(forks)
	if got := tr.carriers(); !slices.Equal(got, []int{newer}) {
		t.Errorf("carriers = %v, want only the process %d started after the leader", got, newer)
	}
	tr.forks0.Store(0) // not read in time: PIDs cannot tell
	if got := tr.carriers(); !slices.Contains(got, older) || !slices.Contains(got, newer) || len(got) != 2 {
		t.Errorf("carriers when PIDs cannot tell = %v, want %d and %d", got, older, newer)
	}
}

// TestCarriersSkipsLaterLeaders: a process this executor logged as the
// leader of an attempt whose tracker took a later turn is not read when
// the PIDs tell (it cannot be one of this attempt's), even if it carried
// the token; one logged with an earlier turn is, and so is every process
// when the PIDs cannot tell.
func TestCarriersSkipsLaterLeaders(t *testing.T) {
	token := "later-leaders-test-" + strconv.Itoa(os.Getpid())
	forks, err := procfs.Forks()
	if err != nil {
		t.Fatal(err)
	}
	earlierTurn := ours.take()
	leader := startWithEnv(t)
	tr := &tracker{self: os.Getpid(), leader: leader, token: token, began: time.Now().Add(-time.Minute), turn: ours.take()}
	tr.forks0.Store(forks)
	later := startWithEnv(t, executor.TokenVar+"="+token)
	ours.add(later, ours.take())
	earlier := startWithEnv(t, executor.TokenVar+"="+token)
	ours.add(earlier, earlierTurn)
	other := startWithEnv(t, executor.TokenVar+"="+token)

	got := tr.carriers()
	slices.Sort(got)
	want := []int{earlier, other}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("carriers = %v, want %v: not the later leader %d", got, want, later)
	}
	tr.forks0.Store(0) // PIDs cannot tell: every process is read
	if got := tr.carriers(); !slices.Contains(got, later) {
		t.Errorf("carriers when PIDs cannot tell = %v, want %d among them", got, later)
	}
}

// TestInOrderUsesForkCount: a long attempt is judged by the machine's fork
// counter, read soon after its start.
func TestInOrderUsesForkCount(t *testing.T) {
	tr := newTracker("fork-count-test", nil)
	defer tr.abandon()
	tr.leader = os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for tr.forks0.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if tr.forks0.Load() == 0 {
		t.Skip("the fork counter sample came too late on this loaded machine")
	}
	tr.began = time.Now().Add(-wrapWindow()) // past its window: the counter decides
	if !tr.inOrder() {
		t.Error("inOrder = false with a fork count that moved little")
	}
	// As if half the PIDs had been handed out since the sample. A machine
	// that has not forked that often since boot cannot pretend it has.
	f1, err := procfs.Forks()
	if err != nil || f1 <= pidSpace()/2+1 {
		t.Skipf("this machine has forked %d times since boot, fewer than half of the %d PIDs", f1, pidSpace())
	}
	tr.forks0.Store(f1 - pidSpace()/2 - 1)
	if tr.inOrder() {
		t.Error("inOrder = true when the kernel may have gone round the PIDs")
	}
}

// TestCarriesDuringExec: a process read just as its execve runs shows an
// empty environment for a moment; it must still be seen as a carrier. (Its
// parent is this test, which the tracker does not take for gpusched: the
// children of gpusched itself are other attempts' leaders.)
func TestCarriesDuringExec(t *testing.T) {
	tr := &tracker{self: -1, token: "exec-test-" + strconv.Itoa(os.Getpid())}
	for range 20 {
		cmd := exec.Command("sleep", "3600")
		cmd.Env = []string{executor.TokenVar + "=" + tr.token, "PAD=" + strings.Repeat("x", 10000)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ok := tr.carries(cmd.Process.Pid) // at once: Start returns inside execve
		cmd.Process.Kill()
		cmd.Wait()
		if !ok {
			t.Fatal("a process that had just exec'd was not seen to carry its token")
		}
	}
}
