package local

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// KillStale kills what is left of an attempt started by a scheduler that
// died: the process group of p, identified beyond PID reuse by the leader's
// start time. It returns how many processes it signalled, after waiting (up
// to a few seconds) for them to be gone. A PID that now belongs to another
// process is left alone.
func KillStale(p executor.Process) (int, error) {
	if p.PID <= 0 || p.PGID <= 0 || p.StartTicks == 0 {
		return 0, nil
	}
	var victims []int
	switch st := StartTicks(p.PID); {
	case st == p.StartTicks:
		victims = groupMembers(p.PGID, p.StartTicks)
		if err := syscall.Kill(-p.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return 0, fmt.Errorf("kill process group %d: %w", p.PGID, err)
		}
	case st != 0:
		return 0, nil // the PID was reused: not ours
	default:
		// The leader is gone; members of its group may remain. Only
		// processes started after the leader can be its descendants.
		victims = groupMembers(p.PGID, p.StartTicks)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range victims {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(victims), nil
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
		fields, ok := statFields(pid)
		if !ok || len(fields) < 20 || fields[0] == "Z" {
			continue
		}
		g, _ := strconv.Atoi(fields[2])
		start, _ := strconv.ParseUint(fields[19], 10, 64)
		if g == pgid && start >= since {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid is a live process, not a zombie.
func alive(pid int) bool {
	fields, ok := statFields(pid)
	return ok && len(fields) > 0 && fields[0] != "Z"
}

// statFields returns the fields of /proc/PID/stat after the command name:
// [0] is the state, [2] the process group, [19] the start time.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}
