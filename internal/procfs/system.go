package procfs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
)

// PIDs lists the processes /proc shows (thread-group leaders, in the
// order the kernel gives them).
func PIDs() ([]int, error) {
	f, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// LastPID returns the PID the kernel gave last in this PID namespace (the
// last field of /proc/loadavg). PIDs are given in increasing order up to
// PIDMax, then again from the bottom, skipping those in use.
func LastPID() (int, error) {
	b, err := readFile("/proc/loadavg", make([]byte, 0, 128))
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 5 {
		return 0, errors.New("read /proc/loadavg: no last PID")
	}
	pid, err := strconv.Atoi(string(f[4]))
	if err != nil {
		return 0, errors.New("read /proc/loadavg: bad last PID " + strconv.Quote(string(f[4])))
	}
	return pid, nil
}

// PIDMax returns the limit on PIDs: every PID is below it
// (/proc/sys/kernel/pid_max).
func PIDMax() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(bytes.TrimSpace(b)))
}

// Forks returns how many processes and threads the machine has created
// since boot (the "processes" line of /proc/stat): every PID handed out
// since counts there, in any PID namespace.
func Forks() (uint64, error) {
	b, err := readFile("/proc/stat", make([]byte, 0, 8192))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("processes ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("read /proc/stat: no processes line")
}
