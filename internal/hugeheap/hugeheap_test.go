package hugeheap

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The setting is read off the kernel's file: only "madvise" asks.
func TestAskable(t *testing.T) {
	old := enabledFile
	t.Cleanup(func() { enabledFile = old })
	for setting, want := range map[string]bool{
		"always [madvise] never\n": true,
		"[always] madvise never\n": false, // the heap has them anyway
		"always madvise [never]\n": false,
	} {
		enabledFile = filepath.Join(t.TempDir(), "enabled")
		if err := os.WriteFile(enabledFile, []byte(setting), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := askable(); got != want {
			t.Errorf("%q: askable = %v, want %v", setting, got, want)
		}
	}
	enabledFile = filepath.Join(t.TempDir(), "none") // no THP in the kernel
	if askable() {
		t.Error("askable with no setting file")
	}
}

// A heap too small to be worth it is left alone: nothing allocated.
func TestPrepareSmallDoesNothing(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Prepare(MinBytes - 1)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew >= MinBytes/2 {
		t.Errorf("Prepare(MinBytes-1) allocated %d bytes", grew)
	}
}

// Where the kernel gives huge pages to memory that asks, the prepared
// memory is resident in huge pages and back with the runtime, free for
// the heap to come: not released to the kernel.
func TestPrepareBacksTheHeapWithHugePages(t *testing.T) {
	if !askable() {
		t.Skipf("%s does not say [madvise]", enabledFile)
	}
	const n = 64 << 20
	hugeBefore := anonHuge(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Prepare(n)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew < n {
		t.Fatalf("Prepare(%d) allocated only %d bytes", n, grew)
	}
	if got := anonHuge(t) - hugeBefore; got < n/2 {
		t.Errorf("AnonHugePages grew by %d bytes, want at least %d", got, n/2)
	}
	if free := after.HeapIdle - after.HeapReleased; free < n/2 {
		t.Errorf("the runtime holds %d bytes free and not released, want at least %d", free, n/2)
	}
	// The heap that comes next takes that memory: no new huge page, and
	// what the runtime asks of the kernel does not grow by the 16 MiB it
	// takes (a span or two of the runtime's own, 32 KiB, was seen once).
	keep := make([][]byte, 0, 4096)
	for range 4096 {
		keep = append(keep, make([]byte, 4096))
	}
	var later runtime.MemStats
	runtime.ReadMemStats(&later)
	if later.HeapSys > after.HeapSys+1<<20 {
		t.Errorf("16 MiB of small objects grew the heap from %d to %d bytes", after.HeapSys, later.HeapSys)
	}
	runtime.KeepAlive(keep)
}

// anonHuge is this process's memory in transparent huge pages, in bytes.
func anonHuge(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Skip(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "AnonHugePages:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no AnonHugePages in smaps_rollup")
	return 0
}
