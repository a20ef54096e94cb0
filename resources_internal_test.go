package gpusched

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/internal/hostres"
)

// fakeMachine is a machine of cores CPUs and a MemTotal of memMiB, without
// cgroups.
func fakeMachine(t *testing.T, cores int, memMiB int64) hostres.Machine {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	meminfo := []byte("MemTotal: " + itoa(memMiB*1024) + " kB\n")
	if err := os.WriteFile(filepath.Join(root, "proc", "meminfo"), meminfo, 0o644); err != nil {
		t.Fatal(err)
	}
	return hostres.Machine{Root: root, CPUs: func() int { return cores }}
}

func itoa(v int64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}

// The cores default to the machine's, raised to MaxParallelTasks so that
// -j N runs N tasks that ask nothing whatever the cores; the memory to
// MemTotal less its reserve; what the settings say wins.
func TestHostCapacityDefaults(t *testing.T) {
	m := fakeMachine(t, 2, 64000)
	for _, tt := range []struct {
		name string
		s    Scheduling
		cpus int
		mib  int64
	}{
		{"the machine's cores", Scheduling{MaxParallelTasks: 1}, 2, 64000 - 4096},
		{"raised to -j", Scheduling{MaxParallelTasks: 8}, 8, 64000 - 4096},
		{"cpus set", Scheduling{MaxParallelTasks: 8, CPUs: 3}, 3, 64000 - 4096},
		{"memory set", Scheduling{MaxParallelTasks: 1, MemoryMiBHost: 1000}, 2, 1000},
		{"both set", Scheduling{CPUs: 5, MemoryMiBHost: 7}, 5, 7},
	} {
		cpus, mib := tt.s.hostCapacity(m)
		if cpus != tt.cpus || mib != tt.mib {
			t.Errorf("%s: %d cpus, %d MiB; want %d, %d", tt.name, cpus, mib, tt.cpus, tt.mib)
		}
	}
	// A machine whose memory cannot be read: no memory limit.
	if cpus, mib := (Scheduling{MaxParallelTasks: 1}).hostCapacity(hostres.Machine{Root: t.TempDir(), CPUs: func() int { return 4 }}); cpus != 4 || mib != 0 {
		t.Errorf("unreadable machine: %d cpus, %d MiB; want 4 and no limit", cpus, mib)
	}
}
