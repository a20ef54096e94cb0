package procfs

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Environ returns the environment pid was started with, as the kernel
// keeps it: NUL-terminated KEY=VALUE entries, as passed to its last
// execve. A process that changes its own environment later (setenv,
// unset in a shell) does not change this copy unless it overwrites it in
// place. The error is the one reading /proc/PID/environ gave: the process
// is gone (ENOENT, ESRCH) or another user's (EACCES), for example. buf, if
// big enough, is used to hold the answer.
func Environ(pid int, buf []byte) ([]byte, error) {
	return readFile("/proc/"+strconv.Itoa(pid)+"/environ", buf)
}

// readFile reads the file at path into buf, grown as needed. It uses the
// system calls directly: /proc files are read often and are small, and
// os.File's bookkeeping (the poller) costs more than the read.
func readFile(path string, buf []byte) ([]byte, error) {
	buf = buf[:0]
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return buf, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, max(512, cap(buf)))...)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// EnvValue returns the value of the first entry named name in env (as
// Environ returns it), as getenv would, and whether there is one.
func EnvValue(env []byte, name string) (string, bool) {
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if len(entry) > len(name) && entry[len(name)] == '=' && string(entry[:len(name)]) == name {
			return string(entry[len(name)+1:]), true
		}
	}
	return "", false
}

// Getenv returns the value of variable name in the environment pid was
// started with (see Environ); "" when it has none or the environment
// cannot be read.
func Getenv(pid int, name string) string {
	env, err := Environ(pid, nil)
	if err != nil {
		return ""
	}
	v, _ := EnvValue(env, name)
	return v
}
