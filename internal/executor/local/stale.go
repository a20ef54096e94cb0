package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// staleWait bounds how long KillStale waits for what it killed to go.
const staleWait = 5 * time.Second

// KillStale kills what is left of an attempt started by a scheduler that
// died: the process group of p, identified beyond PID reuse by the leader's
// start time; the attempt's cgroup, when this machine gives attempts one
// and it is still there; and every process whose environment carries
// token (which finds the attempt's processes even when the scheduler died
// before it saved p, or when they left the group). It returns how many
// processes it signalled, after waiting (up to a few seconds) for them to
// be gone. A PID that now belongs to another process is left alone.
func KillStale(p executor.Process, token string) (int, error) {
	deadline := time.Now().Add(staleWait)
	victims, err := killGroup(p)
	if base := cgroupBase(); base != "" && token != "" {
		path := filepath.Join(base, cgroupName(token))
		if _, serr := os.Stat(path); serr == nil {
			for _, pid := range cgroupPIDs(path) {
				if !slices.Contains(victims, pid) {
					victims = append(victims, pid)
				}
			}
			killCgroup(path, deadline)
			_ = removeCgroup(path)
		}
	}
	t := &tracker{self: os.Getpid(), token: token} // no leader known: every process is read
	var held []victim
	for _, pid := range t.carriers() {
		if v, ok := grab(pid, t.carries); ok {
			v.signal(unix.SIGKILL)
			held = append(held, v)
			if !slices.Contains(victims, pid) {
				victims = append(victims, pid)
			}
		}
	}
	waitGone(held, deadline)
	for _, pid := range victims {
		for procfs.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(victims), err
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
	pids, err := procfs.PIDs()
	if err != nil {
		return nil
	}
	var out []int
	for _, pid := range pids {
		st, ok := procfs.Read(pid)
		if ok && !st.Zombie() && st.PGID == pgid && st.StartTicks >= since {
			out = append(out, pid)
		}
	}
	return out
}
