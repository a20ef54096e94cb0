package local

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// An attempt's cgroup holds every process it starts, wherever they go
// (another process group, another session, a cleared environment), unless
// one moves itself to another cgroup, which takes privileges. It is made in
// the cgroup v2 hierarchy, as a child of the cgroup gpusched runs in, and
// the leader is started inside it (clone3 with CLONE_INTO_CGROUP), so no
// child can be forked before it is there. At the attempt's end, cgroup.kill
// (Linux 5.14) kills all of them at once and the folder is removed.
//
// A cgroup is made for each attempt and never used again: Linux (6.18 at
// least) kills at once any process started with CLONE_INTO_CGROUP into a
// cgroup that cgroup.kill was ever written to. Making, first using and
// removing a cgroup costs some 0.3 ms of CPU on the development VM, 7-10% of a
// no-op task, which is why attempts get one only when Executor.Cgroups
// asks (see docs/benchmarks.md).
//
// It is used only where it works: cgroup2 mounted, gpusched's own cgroup
// writable (root, or a delegated subtree), cgroup.kill present, and a
// start into it succeeding. The first time one of these fails, cgroups are
// not tried again by this process; the token scan and the process group
// remain.

// cgroups is what this process knows about the cgroup v2 hierarchy.
var cgroups struct {
	once sync.Once
	base string      // folder attempts' cgroups are made in; "" when none
	own  string      // gpusched's cgroup as /proc/PID/cgroup names it
	off  atomic.Bool // set when they turned out not to work
	kill atomic.Bool // set once cgroup.kill was seen
	seq  atomic.Uint64
}

// cgroupBase returns the folder attempts' cgroups are made in, or "".
func cgroupBase() string {
	cgroups.once.Do(func() { cgroups.base, cgroups.own = findCgroupBase() })
	if cgroups.off.Load() {
		return ""
	}
	return cgroups.base
}

// findCgroupBase returns the folder of this process's own cgroup in the
// cgroup2 hierarchy and its name there, or "" when there is none.
func findCgroupBase() (dir, name string) {
	mount := cgroup2Mount()
	if mount == "" {
		return "", ""
	}
	name = cgroupOf(os.Getpid())
	if name == "" {
		return "", ""
	}
	return filepath.Join(mount, name), name
}

// cgroupOf returns the cgroup v2 of process pid, as /proc/PID/cgroup
// names it ("/a/b", relative to where cgroup2 is mounted), or "".
func cgroupOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::"); ok {
			if !strings.HasPrefix(p, "/") || strings.Contains(p, " (deleted)") {
				return ""
			}
			return p
		}
	}
	return ""
}

// cgroup2Mount returns where the cgroup2 hierarchy is mounted, or "".
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// "36 25 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) >= 5 && !strings.Contains(f[4], `\`) {
			return f[4]
		}
	}
	return ""
}

// cgroupName names the cgroup of the attempt with token: a digest of the
// token, so that a scheduler resuming after a crash finds it again, or a
// name unique to this process when there is no token.
func cgroupName(token string) string {
	if token == "" {
		return "gpusched-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(cgroups.seq.Add(1), 10)
	}
	sum := sha256.Sum256([]byte(token))
	return "gpusched-" + hex.EncodeToString(sum[:10])
}

// cgroup is one attempt's cgroup.
type cgroup struct {
	path    string // its folder
	name    string // as /proc/PID/cgroup names it
	fd      int    // the folder, for CLONE_INTO_CGROUP
	removed bool
}

// holds reports whether process pid is in the cgroup or one below it.
func (c *cgroup) holds(pid int) bool {
	g := cgroupOf(pid)
	return g == c.name || strings.HasPrefix(g, c.name+"/")
}

// newCgroup makes the cgroup of the attempt with token, or returns nil
// when cgroups cannot be used here. A leftover of the same attempt (from a
// scheduler that died) is emptied and used.
func newCgroup(token string) *cgroup {
	base := cgroupBase()
	if base == "" {
		return nil
	}
	path, name := "", ""
	for try := 0; path == ""; try++ {
		if try == 3 {
			return nil
		}
		name = cgroupName(token)
		p := filepath.Join(base, name)
		err := unix.Mkdir(p, 0o755)
		switch {
		case err == nil:
		case err == unix.EEXIST && token != "":
			// A leftover of this attempt (a scheduler that died): empty
			// it and make it anew, since a killed one takes no process.
			killCgroup(p, time.Now().Add(killWait))
			if removeCgroup(p) != nil || unix.Mkdir(p, 0o755) != nil {
				return nil
			}
		case err == unix.EEXIST:
			continue // a leftover of a dead process with our PID: next name
		case err == unix.EACCES || err == unix.EPERM || err == unix.EROFS || err == unix.ENOENT || err == unix.ENOTDIR:
			cgroups.off.Store(true) // not ours to write: never here
			return nil
		default:
			return nil // short of something (EAGAIN, ENOSPC...): not this time
		}
		path = p
	}
	if !cgroups.kill.Load() {
		if unix.Access(filepath.Join(path, "cgroup.kill"), unix.W_OK) != nil {
			// Before Linux 5.14: no way to kill a cgroup at once.
			cgroups.off.Store(true)
			_ = removeCgroup(path)
			return nil
		}
		cgroups.kill.Store(true)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = removeCgroup(path)
		return nil
	}
	return &cgroup{path: path, name: filepath.Join(cgroups.own, name), fd: fd}
}

// failed is called when the leader could not be started into the cgroup
// but could without it: cgroups are not tried again.
func (c *cgroup) failed() {
	cgroups.off.Store(true)
	c.remove(time.Now())
}

// pids lists the processes in the cgroup.
func (c *cgroup) pids() []int { return cgroupPIDs(c.path) }

// kill kills every process in the cgroup, waits until deadline for it to
// be empty and removes it. Removing it first, which fails while a process
// is in it (a zombie does not count), tells for one system call that there
// is nothing to kill, as at most attempts' ends. A cgroup that cannot be
// removed (a process stuck in the kernel) is left behind.
func (c *cgroup) kill(deadline time.Time) {
	if c.removed {
		return
	}
	if err := unix.Rmdir(c.path); err != unix.EBUSY && err != unix.ENOTEMPTY {
		c.removed = true
		return
	}
	killCgroup(c.path, deadline)
	c.removed = removeCgroup(c.path) == nil
}

// remove removes the cgroup, after waiting until deadline for it to be
// empty, and lets go of it.
func (c *cgroup) remove(deadline time.Time) {
	if !c.removed {
		waitEmpty(c.path, deadline)
		c.removed = removeCgroup(c.path) == nil
	}
	unix.Close(c.fd)
}

// cgroupPIDs lists the processes in the cgroup at path (not those of its
// children).
func cgroupPIDs(path string) []int {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for f := range bytes.FieldsSeq(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killCgroup kills every process in the cgroup at path and below, and
// waits until deadline for them to be gone.
func killCgroup(path string, deadline time.Time) {
	fd, err := unix.Open(filepath.Join(path, "cgroup.kill"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, err = unix.Write(fd, []byte("1"))
	unix.Close(fd)
	if err == nil {
		waitEmpty(path, deadline)
	}
}

// cgroupEmpty reports whether no live process is left in the cgroup at
// path or below (zombies do not count); a cgroup that cannot be read
// counts as empty.
func cgroupEmpty(path string) bool {
	var buf [64]byte
	fd, err := unix.Open(filepath.Join(path, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	return err != nil || !bytes.Contains(buf[:max(n, 0)], []byte("populated 1"))
}

// waitEmpty waits until no live process is left in the cgroup at path or
// deadline passes.
func waitEmpty(path string, deadline time.Time) {
	for pause := 100 * time.Microsecond; !cgroupEmpty(path) && time.Now().Before(deadline); pause = min(2*pause, 20*time.Millisecond) {
		time.Sleep(pause)
	}
}

// removeCgroup removes the cgroup at path with the cgroups below it (a
// gpusched running inside the attempt makes its own), deepest first.
func removeCgroup(path string) error {
	err := unix.Rmdir(path)
	if err != unix.EBUSY && err != unix.ENOTEMPTY {
		return err
	}
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if e.IsDir() {
			_ = removeCgroup(filepath.Join(path, e.Name()))
		}
	}
	return unix.Rmdir(path)
}
