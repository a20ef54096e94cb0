package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// TokenVar is the environment variable that carries an attempt's token.
const TokenVar = "GPUSCHED_ATTEMPT_TOKEN"

// KillStale kills what is left of an attempt started by a scheduler that
// died: the process group of p, identified beyond PID reuse by the leader's
// start time, and every process whose environment carries token (which
// finds the attempt's processes even when the scheduler died before it
// saved p, or when they left the group). It returns how many processes it
// signalled, after waiting (up to a few seconds) for them to be gone. A PID
// that now belongs to another process is left alone.
func KillStale(p executor.Process, token string) (int, error) {
	victims, err := killGroup(p)
	for _, pid := range withToken(token) {
		if !slices.Contains(victims, pid) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			victims = append(victims, pid)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range victims {
		for procfs.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(victims), err
}

// withToken lists the processes whose environment holds TokenVar=token.
func withToken(token string) []int {
	if token == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(TokenVar + "=" + token + "\x00")
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone, or another user's
		}
		if bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...)) {
			out = append(out, pid)
		}
	}
	return out
}

// killGroup kills the process group of p, if p is still what it was.
func killGroup(p executor.Process) ([]int, error) {
	if p.PID <= 0 || p.PGID <= 0 || p.StartTicks == 0 {
		return nil, nil
	}
	var victims []int
	st, _ := procfs.Read(p.PID)
	switch st := st.StartTicks; {
	case st == p.StartTicks:
		victims = groupMembers(p.PGID, p.StartTicks)
		if err := syscall.Kill(-p.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return victims, fmt.Errorf("kill process group %d: %w", p.PGID, err)
		}
	case st != 0:
		return nil, nil // the PID was reused: not ours
	default:
		// The leader is gone; members of its group may remain. Only
		// processes started after the leader can be its descendants.
		victims = groupMembers(p.PGID, p.StartTicks)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return victims, nil
}

// groupMembers lists live processes in process group pgid that started no
// earlier than since (clock ticks since boot).
func groupMembers(pgid int, since uint64) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procfs.Read(pid)
		if ok && !st.Zombie() && st.PGID == pgid && st.StartTicks >= since {
			out = append(out, pid)
		}
	}
	return out
}
