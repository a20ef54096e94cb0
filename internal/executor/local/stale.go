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

// staleWait bounds how long KillStaleMany waits for what it killed to go.
const staleWait = 5 * time.Second

// Stale is an attempt started by a scheduler that died, whose outcome is
// lost: its process group (zero when the scheduler died before saving it)
// and its token.
type Stale struct {
	Process executor.Process
	Token   string
}

// KillStale kills what is left of one stale attempt; see KillStaleMany.
func KillStale(p executor.Process, token string) (int, error) {
	n, errs := KillStaleMany([]Stale{{Process: p, Token: token}})
	return n[0], errs[0]
}

// KillStaleMany kills what is left of attempts started by a scheduler that
// died: for each, the process group of its Process, identified beyond PID
// reuse by the leader's start time; its cgroup, when this machine gives
// attempts one and it is still there; and every process whose environment
// carries its token (which finds its processes even when the scheduler
// died before it saved the Process, or when they left the group). The
// process table is read once for all of them. It returns, for each, how
// many processes it signalled, after waiting (up to a few seconds) for
// them to be gone. A PID that now belongs to another process is left alone.
func KillStaleMany(attempts []Stale) ([]int, []error) {
	deadline := time.Now().Add(staleWait)
	victims := make([][]int, len(attempts))
	errs := make([]error, len(attempts))
	byToken := map[string]int{}
	var pids []int
	listed := false
	list := func() []int {
		if !listed {
			pids, _ = procfs.PIDs()
			listed = true
		}
		return pids
	}
	for i, a := range attempts {
		victims[i], errs[i] = killGroup(a.Process, list)
		if a.Token != "" {
			byToken[a.Token] = i
		}
		if base := cgroupBase(); base != "" && a.Token != "" {
			path := filepath.Join(base, cgroupName(a.Token))
			if _, serr := os.Stat(path); serr == nil {
				for _, pid := range cgroupPIDs(path) {
					if !slices.Contains(victims[i], pid) {
						victims[i] = append(victims[i], pid)
					}
				}
				killCgroup(path, deadline)
				_ = removeCgroup(path)
			}
		}
	}
	var held []victim
	if len(byToken) > 0 {
		self := os.Getpid()
		t := &tracker{self: self} // no leader known: every process is read
		owner := func(pid int) (int, bool) {
			for tok, i := range byToken {
				t.token = tok
				if t.carries(pid) {
					return i, true
				}
			}
			return 0, false
		}
		for _, pid := range list() {
			if pid == self {
				continue
			}
			env, err := procfs.Environ(pid, t.buf)
			t.buf = env[:0]
			if err != nil {
				continue
			}
			if len(env) > 0 {
				// Most processes: the token, if any, is there to read.
				v, ok := procfs.EnvValue(env, executor.TokenVar)
				if _, ours := byToken[v]; !ok || !ours {
					continue
				}
			}
			i, ok := owner(pid)
			if !ok {
				continue
			}
			if v, ok := grab(pid, func(pid int) bool { j, ok := owner(pid); return ok && j == i }); ok {
				v.signal(unix.SIGKILL)
				held = append(held, v)
				if !slices.Contains(victims[i], pid) {
					victims[i] = append(victims[i], pid)
				}
			}
		}
	}
	waitGone(held, deadline)
	n := make([]int, len(attempts))
	for i, vs := range victims {
		for _, pid := range vs {
			for procfs.Alive(pid) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		n[i] = len(vs)
	}
	return n, errs
}

// killGroup kills the process group of p, if p is still what it was.
// list returns the machine's processes, read once.
func killGroup(p executor.Process, list func() []int) ([]int, error) {
	if p.PID <= 0 || p.PGID <= 0 || p.StartTicks == 0 {
		return nil, nil
	}
	var victims []int
	st, _ := procfs.Read(p.PID)
	switch st := st.StartTicks; {
	case st == p.StartTicks:
		victims = groupMembers(list(), p.PGID, p.StartTicks)
		if err := syscall.Kill(-p.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return victims, fmt.Errorf("kill process group %d: %w", p.PGID, err)
		}
	case st != 0:
		return nil, nil // the PID was reused: not ours
	default:
		// The leader is gone; members of its group may remain. Only
		// processes started after the leader can be its descendants.
		victims = groupMembers(list(), p.PGID, p.StartTicks)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return victims, nil
}

// groupMembers lists the live processes among pids in process group pgid
// that started no earlier than since (clock ticks since boot).
func groupMembers(pids []int, pgid int, since uint64) []int {
	var out []int
	for _, pid := range pids {
		st, ok := procfs.Read(pid)
		if ok && !st.Zombie() && st.PGID == pgid && st.StartTicks >= since {
			out = append(out, pid)
		}
	}
	return out
}
