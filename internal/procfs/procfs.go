// Package procfs reads what gpusched needs from /proc: a process's state,
// parent, process group and start time (/proc/PID/stat), the environment
// it was started with (/proc/PID/environ), the list of processes, and the
// kernel's PID counters. One parser, used by the executor (process
// handles, stale groups, processes that left their group), the nvidia-smi
// probe (which task a GPU process belongs to) and the CLI (is the
// scheduler alive).
package procfs

import (
	"strconv"
	"strings"
)

// Stat is the part of /proc/PID/stat gpusched uses.
type Stat struct {
	State      byte   // 'R', 'S', 'Z' (zombie), ...
	PPID       int    // parent
	PGID       int    // process group
	StartTicks uint64 // start time in clock ticks since boot
	Flags      uint64 // the kernel's PF_* flags
	// EnvEnd is where the process's environment ends in its memory. It is
	// 0 for a kernel thread, for a process whose execve has not yet put
	// its new environment in place, and when /proc does not show it
	// (another user's process, Linux before 3.5).
	EnvEnd uint64
}

// Zombie reports whether the process has exited and awaits its reaper.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// KernelThread reports whether the process is a kernel thread (PF_KTHREAD).
func (s Stat) KernelThread() bool { return s.Flags&0x00200000 != 0 }

// Exiting reports whether the process has begun to exit (PF_EXITING, set
// as it enters the kernel's exit path, before its children are handed to
// another parent) or has exited.
func (s Stat) Exiting() bool { return s.Zombie() || s.Flags&0x00000004 != 0 }

// Read returns pid's stat, or false if it cannot be read (no such process).
func Read(pid int) (Stat, bool) {
	// Read with raw system calls into a buffer on the stack: os.ReadFile
	// costs five more (the poller's fcntl calls, fstat) and an allocation,
	// and a handle is read at every attempt's start.
	var buf [512]byte
	b, err := readFile("/proc/"+strconv.Itoa(pid)+"/stat", buf[:0])
	if err != nil {
		return Stat{}, false
	}
	// "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return Stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) == 0 {
		return Stat{}, false
	}
	st := Stat{State: f[0][0]}
	st.PPID, _ = strconv.Atoi(f[1])
	st.PGID, _ = strconv.Atoi(f[2])
	st.Flags, _ = strconv.ParseUint(f[6], 10, 64)
	st.StartTicks, _ = strconv.ParseUint(f[19], 10, 64)
	if len(f) > 48 { // fields 50 and 51: env_start, env_end
		st.EnvEnd, _ = strconv.ParseUint(f[48], 10, 64)
	}
	return st, true
}

// Alive reports whether pid is a live process, not a zombie.
func Alive(pid int) bool {
	st, ok := Read(pid)
	return ok && !st.Zombie()
}
