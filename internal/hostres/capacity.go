package hostres

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Machine reads one machine's files.
type Machine struct {
	// Root is where the machine's files are: "" is this machine's own
	// (/proc, /sys); a test gives a folder holding proc/... and sys/...
	Root string
	// CPUs is how many cores this process may run on (its CPU affinity);
	// nil means runtime.NumCPU, which counts them so on Linux.
	CPUs func() int
}

// Capacity is what this process's tasks may use of the machine, with
// where each figure comes from, for a person.
type Capacity struct {
	// CPUs is the cores: the CPU affinity, bounded by the CPU quota of
	// this process's cgroup and those above it (rounded up).
	CPUs     int
	CPUsFrom string
	// MemoryMiB is the memory: the smallest memory limit of this
	// process's cgroup and those above it, else the machine's MemTotal
	// (the smaller of the two when both are known). It is all of it:
	// Reserve says how much of it admission leaves aside.
	MemoryMiB  int64
	MemoryFrom string
}

// The share of memory admission leaves to the system and to gpusched
// itself: a tenth, at most MaxReserveMiB.
const MaxReserveMiB = 4096

// Reserve is the memory, of memMiB in all, that admission leaves aside:
// a tenth of it, at most MaxReserveMiB.
func Reserve(memMiB int64) int64 { return min(memMiB/10, MaxReserveMiB) }

// Capacity reads what this process's tasks may use. A figure that cannot
// be read at all (no /proc/meminfo) is an error; missing cgroup files are
// not (no limit there).
func (m Machine) Capacity() (Capacity, error) {
	c := Capacity{CPUs: runtime.NumCPU(), CPUsFrom: "CPU affinity"}
	if m.CPUs != nil {
		c.CPUs = m.CPUs()
	}
	total, err := m.memTotalMiB()
	if err != nil {
		return Capacity{}, err
	}
	c.MemoryMiB, c.MemoryFrom = total, "MemTotal"
	groups := m.cgroups()
	if quota, where := groups.cpuQuota(); quota > 0 && quota < c.CPUs {
		c.CPUs, c.CPUsFrom = quota, where
	}
	if limit, where := groups.memoryLimitMiB(); limit > 0 && limit < c.MemoryMiB {
		c.MemoryMiB, c.MemoryFrom = limit, where
	}
	return c, nil
}

func (m Machine) path(p string) string { return filepath.Join(cmpOr(m.Root, "/"), p) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// memTotalMiB reads MemTotal from /proc/meminfo.
func (m Machine) memTotalMiB() (int64, error) {
	b, err := os.ReadFile(m.path("proc/meminfo"))
	if err != nil {
		return 0, fmt.Errorf("read memory size: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 {
			break
		}
		return kb / 1024, nil
	}
	return 0, errors.New("read memory size: /proc/meminfo has no MemTotal")
}

// cgroupDirs are the folders of this process's cgroups, innermost first,
// each up to the root of its hierarchy: the cgroup v2 ones, and the v1
// ones of the cpu and memory controllers.
type cgroupDirs struct {
	v2, cpu, memory []string
}

// cgroups finds this process's cgroups: where each hierarchy is mounted
// (mountinfo), and its place in each (/proc/self/cgroup).
func (m Machine) cgroups() cgroupDirs {
	var out cgroupDirs
	b, err := os.ReadFile(m.path("proc/self/cgroup"))
	if err != nil {
		return out
	}
	place := map[string]string{} // "" for v2, else a v1 controller -> path
	for line := range strings.Lines(string(b)) {
		// "0::/a/b" (v2); "4:memory:/a" or "3:cpu,cpuacct:/a" (v1).
		f := strings.SplitN(strings.TrimRight(line, "\n"), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			place[""] = f[2]
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			place[ctl] = f[2]
		}
	}
	mounts, err := os.Open(m.path("proc/self/mountinfo"))
	if err != nil {
		return out
	}
	defer mounts.Close()
	sc := bufio.NewScanner(mounts)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// "36 25 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, p := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(p) < 3 || strings.Contains(f[4], `\`) {
			continue
		}
		root, at := f[3], f[4]
		switch p[0] {
		case "cgroup2":
			if path, ok := place[""]; ok && out.v2 == nil {
				out.v2 = m.upward(root, at, path)
			}
		case "cgroup":
			for _, opt := range strings.Split(p[2], ",") {
				path, ok := place[opt]
				switch {
				case !ok:
				case opt == "cpu" && out.cpu == nil:
					out.cpu = m.upward(root, at, path)
				case opt == "memory" && out.memory == nil:
					out.memory = m.upward(root, at, path)
				}
			}
		}
	}
	return out
}

// upward lists the folders of the cgroup at path, in a hierarchy whose
// folder root is mounted at mountPoint, and of each cgroup above it up to
// the mount's: innermost first. A path outside the mount's root (the
// mount shows only part of the hierarchy) starts at the mount.
func (m Machine) upward(root, mountPoint, path string) []string {
	rel, ok := strings.CutPrefix(path, root)
	if !ok || rel != "" && root != "/" && !strings.HasPrefix(rel, "/") {
		rel = "/"
	}
	top := m.path(mountPoint)
	dir := filepath.Join(top, rel)
	if _, err := os.Stat(dir); err != nil {
		dir = top // not there in this namespace: the mount is the nearest we see
	}
	var dirs []string
	for {
		dirs = append(dirs, dir)
		if dir == top || len(dir) < len(top) {
			return dirs
		}
		dir = filepath.Dir(dir)
	}
}

// cpuQuota is the smallest CPU quota of the cgroups, in whole cores
// rounded up, and where it is set; 0 when none is.
func (g cgroupDirs) cpuQuota() (int, string) {
	best, where := 0, ""
	note := func(quota, period float64, dir, file string) {
		if quota <= 0 || period <= 0 {
			return
		}
		cores := int(math.Ceil(quota / period))
		if cores < 1 {
			cores = 1
		}
		if best == 0 || cores < best {
			best = cores
			where = fmt.Sprintf("cgroup %s %s/%s", filepath.Join(dir, file), fmtNum(quota), fmtNum(period))
		}
	}
	for _, dir := range g.v2 {
		// "max 100000" or "200000 100000"
		f := strings.Fields(readLine(filepath.Join(dir, "cpu.max")))
		if len(f) == 2 && f[0] != "max" {
			note(parseFloat(f[0]), parseFloat(f[1]), dir, "cpu.max")
		}
	}
	for _, dir := range g.cpu {
		q := readLine(filepath.Join(dir, "cpu.cfs_quota_us")) // -1: none
		p := readLine(filepath.Join(dir, "cpu.cfs_period_us"))
		note(parseFloat(q), parseFloat(p), dir, "cpu.cfs_quota_us")
	}
	return best, where
}

// memoryLimitMiB is the smallest memory limit of the cgroups, and where
// it is set; 0 when none is.
func (g cgroupDirs) memoryLimitMiB() (int64, string) {
	var best int64
	where := ""
	note := func(s, dir, file string) {
		b, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 says "no limit" with the largest multiple of the page
		// size; anything from 2^62 on is no limit.
		if err != nil || b <= 0 || b >= 1<<62 {
			return
		}
		if mib := b >> 20; best == 0 || mib < best {
			best, where = mib, "cgroup "+filepath.Join(dir, file)
		}
	}
	for _, dir := range g.v2 {
		note(readLine(filepath.Join(dir, "memory.max")), dir, "memory.max") // "max": none
	}
	for _, dir := range g.memory {
		note(readLine(filepath.Join(dir, "memory.limit_in_bytes")), dir, "memory.limit_in_bytes")
	}
	return best, where
}

// readLine returns the file's first line, trimmed; "" if it cannot be read.
func readLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

func parseFloat(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return v
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
