package procfs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
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
	var buf [128]byte
	var b []byte
	if fd := loadavg(); fd >= 0 {
		for {
			n, err := unix.Pread(fd, buf[:], 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return 0, &os.PathError{Op: "read", Path: "/proc/loadavg", Err: err}
			}
			b = buf[:n]
			break
		}
	} else {
		var err error
		if b, err = readFile("/proc/loadavg", buf[:0]); err != nil {
			return 0, err
		}
	}
	// "0.50 0.40 0.30 2/243 30581\n": the last field.
	b = bytes.TrimRight(b, "\n ")
	i := bytes.LastIndexByte(b, ' ')
	if i < 0 || bytes.Count(b, []byte{' '}) < 4 {
		return 0, errors.New("read /proc/loadavg: no last PID")
	}
	pid, err := strconv.Atoi(string(b[i+1:]))
	if err != nil {
		return 0, errors.New("read /proc/loadavg: bad last PID " + strconv.Quote(string(b[i+1:])))
	}
	return pid, nil
}

// loadavg is /proc/loadavg, opened once and then read from its start
// with pread at each LastPID (one system call instead of four: an
// attempt's end reads it): the kernel writes its text anew at every read
// from offset 0. -1 when it cannot be opened (then it is read by path).
var loadavg = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/loadavg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

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

// Children lists the children of process pid. It reads each thread's
// /proc/PID/task/TID/children where the kernel has them
// (CONFIG_PROC_CHILDREN), else every process's parent.
func Children(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	buf := make([]byte, 0, 512)
	for i, t := range tids {
		b, err := readFile(dir+"/"+t.Name()+"/children", buf[:0])
		if err != nil {
			if i == 0 && errors.Is(err, os.ErrNotExist) {
				return childrenByScan(pid)
			}
			continue // a thread that just exited
		}
		buf = b
		for f := range bytes.FieldsSeq(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// childrenByScan lists the children of pid by reading every process's
// parent.
func childrenByScan(pid int) ([]int, error) {
	pids, err := PIDs()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range pids {
		if st, ok := Read(p); ok && st.PPID == pid {
			out = append(out, p)
		}
	}
	return out, nil
}
