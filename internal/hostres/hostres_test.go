package hostres

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tree writes files (path -> content) under a fresh folder and returns it.
func tree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfo = "MemTotal:       65536000 kB\nMemFree:        1000 kB\nMemAvailable:   2000 kB\n"

// The cgroup v2 mount line, and this process's place in it.
const (
	mountV2  = "36 25 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
	cgroupV2 = "0::/user.slice/job.scope\n"
)

func eight() int { return 8 }

func TestCapacity(t *testing.T) {
	for _, tt := range []struct {
		name      string
		files     map[string]string
		cpus      int
		cpusFrom  string // a part of it
		mib       int64
		memFrom   string
		wantError bool
	}{
		{"no cgroup: affinity and MemTotal", map[string]string{"proc/meminfo": meminfo}, 8, "CPU affinity", 64000, "MemTotal", false},
		{"cgroup v2 without limits", map[string]string{
			"proc/meminfo": meminfo, "proc/self/mountinfo": mountV2, "proc/self/cgroup": cgroupV2,
			"sys/fs/cgroup/user.slice/job.scope/cpu.max":    "max 100000\n",
			"sys/fs/cgroup/user.slice/job.scope/memory.max": "max\n",
		}, 8, "CPU affinity", 64000, "MemTotal", false},
		{"cgroup v2 quota rounds up, the smallest limit up the tree wins", map[string]string{
			"proc/meminfo": meminfo, "proc/self/mountinfo": mountV2, "proc/self/cgroup": cgroupV2,
			"sys/fs/cgroup/user.slice/job.scope/cpu.max":    "250000 100000\n",
			"sys/fs/cgroup/user.slice/job.scope/memory.max": "17179869184\n", // 16 GiB
			"sys/fs/cgroup/user.slice/cpu.max":              "400000 100000\n",
			"sys/fs/cgroup/user.slice/memory.max":           "8589934592\n", // 8 GiB, above: it binds
		}, 3, "job.scope/cpu.max 250000/100000", 8192, "user.slice/memory.max", false},
		{"a quota above the affinity does not raise it", map[string]string{
			"proc/meminfo": meminfo, "proc/self/mountinfo": mountV2, "proc/self/cgroup": cgroupV2,
			"sys/fs/cgroup/user.slice/job.scope/cpu.max": "1600000 100000\n",
		}, 8, "CPU affinity", 64000, "MemTotal", false},
		{"a limit above MemTotal does not raise it", map[string]string{
			"proc/meminfo": meminfo, "proc/self/mountinfo": mountV2, "proc/self/cgroup": cgroupV2,
			"sys/fs/cgroup/user.slice/job.scope/memory.max": "274877906944\n",
		}, 8, "CPU affinity", 64000, "MemTotal", false},
		{"cgroup v1 cpu and memory controllers", map[string]string{
			"proc/meminfo": meminfo,
			"proc/self/mountinfo": "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
				"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"proc/self/cgroup": "4:memory:/box\n3:cpu,cpuacct:/box\n0::/\n",
			"sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_quota_us":  "100000\n",
			"sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/memory/box/memory.limit_in_bytes":  "4294967296\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":      "9223372036854771712\n", // v1's "none"
		}, 1, "cpu.cfs_quota_us 100000/100000", 4096, "memory.limit_in_bytes", false},
		{"a cgroup this namespace does not show: the mount's own files", map[string]string{
			"proc/meminfo": meminfo, "proc/self/mountinfo": mountV2, "proc/self/cgroup": "0::/elsewhere/x\n",
			"sys/fs/cgroup/cpu.max": "200000 100000\n",
		}, 2, "cgroup", 64000, "MemTotal", false},
		{"no meminfo", map[string]string{}, 0, "", 0, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Machine{Root: tree(t, tt.files), CPUs: eight}.Capacity()
			if tt.wantError {
				if err == nil {
					t.Fatalf("Capacity = %+v, want an error", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.CPUs != tt.cpus || !strings.Contains(c.CPUsFrom, tt.cpusFrom) || c.MemoryMiB != tt.mib || !strings.Contains(c.MemoryFrom, tt.memFrom) {
				t.Errorf("Capacity = %+v, want %d cpus (%s), %d MiB (%s)", c, tt.cpus, tt.cpusFrom, tt.mib, tt.memFrom)
			}
		})
	}
}

func TestReserve(t *testing.T) {
	for _, tt := range []struct{ total, want int64 }{{64000, 4096}, {8000, 800}, {2048, 204}, {0, 0}} {
		if got := Reserve(tt.total); got != tt.want {
			t.Errorf("Reserve(%d) = %d, want %d", tt.total, got, tt.want)
		}
	}
}

// This machine's own figures are sane: at least a core, some memory.
func TestCapacityOfThisMachine(t *testing.T) {
	c, err := Machine{}.Capacity()
	if err != nil {
		t.Fatal(err)
	}
	if c.CPUs < 1 || c.MemoryMiB < 64 || c.CPUsFrom == "" || c.MemoryFrom == "" {
		t.Errorf("Capacity = %+v", c)
	}
}

// stat is a /proc/PID/stat line with the process group and resident pages
// given, and a comm that holds what a parser could trip on.
func stat(pid, pgid int, pages int64) string {
	return fmt.Sprintf("%d (a) b (c) S 1 %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123 10000000 %d 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
		pid, pgid, pgid, pages)
}

func TestGroupRSS(t *testing.T) {
	page := int64(os.Getpagesize())
	mib := (1 << 20) / page // pages in a MiB
	root := tree(t, map[string]string{
		"proc/100/stat": stat(100, 100, 300*mib), // a group's leader
		"proc/101/stat": stat(101, 100, 200*mib), // its child
		"proc/200/stat": stat(200, 200, 50*mib),  // another group
		"proc/300/stat": stat(300, 300, 999*mib), // not asked about
		"proc/400/stat": stat(400, 400, 0),       // a zombie: no pages
		"proc/401/stat": "garbage",               // unreadable: skipped
		"proc/self/x":   "",                      // not a process
		"proc/meminfo":  meminfo,
	})
	got, err := Machine{Root: root}.GroupRSS([]int{100, 200, 400, 500})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int64{100: 500, 200: 50, 400: 0} // 500: gone, absent
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GroupRSS = %v, want %v", got, want)
	}
}

// A real process group: a shell and its child, in a group of their own,
// holding some memory; the sum counts both.
func TestGroupRSSOfRealProcesses(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL); cmd.Wait() })
	own := syscall.Getpgrp()
	one, err := Machine{}.GroupRSS([]int{own})
	if err != nil {
		t.Fatal(err)
	}
	if one[own] < 1 {
		t.Errorf("the test's own group holds %v MiB, want at least 1", one)
	}
	got, err := Machine{}.GroupRSS([]int{pgid, 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[pgid]; !ok || len(got) != 1 {
		t.Errorf("GroupRSS = %v, want the group %d alone", got, pgid)
	}
}

// BenchmarkGroupRSS100: one sample of 100 running tasks' process groups
// (a sleep each), among whatever else the machine runs: the cost the
// scheduler pays at each sampling tick (every 2s while tasks run).
func BenchmarkGroupRSS100(b *testing.B) {
	var pgids []int
	for range 100 {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pgids = append(pgids, cmd.Process.Pid)
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := Machine{}.GroupRSS(pgids)
		if err != nil || len(got) != 100 {
			b.Fatalf("GroupRSS: %d groups, %v", len(got), err)
		}
	}
	names, _ := os.ReadDir("/proc")
	b.ReportMetric(float64(len(names)), "proc-entries")
}
