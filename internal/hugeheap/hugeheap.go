// Package hugeheap backs the heap that a command is about to build, when
// it is large, with the kernel's transparent huge pages.
//
// A command that reads 100,000 tasks (status, plan, validate, a run that
// loads its workflow and state) builds a heap of 100 MB to 1.5 GB, and
// the kernel gives it one 4 KiB page per fault: 30,000 faults for
// status. On a VM where a fault costs some 8 µs that was a third of the
// command's time (docs/benchmarks.md). Go's runtime does not ask for
// huge pages, and most distributions give them only to memory that asks
// (transparent_hugepage/enabled = madvise). Prepare asks for them on the
// part of the heap the command is about to use, and has the kernel fill
// it at once: the runtime then hands that memory out again, already
// there, 2 MiB to a page (the same idea as a JVM's pre-touched heap).
package hugeheap

import (
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/hostres"
)

const (
	// MinBytes is the smallest heap worth preparing: below it, the faults
	// cost less than filling memory the command may not use.
	MinBytes = 32 << 20
	// maxShare: at most this share of the machine's memory is prepared.
	maxShare = 8
	hugePage = 2 << 20
)

// enabledFile says when the kernel gives huge pages: "[always]",
// "[madvise]" or "[never]" marks the setting.
var enabledFile = "/sys/kernel/mm/transparent_hugepage/enabled"

// Prepare backs about n bytes of the heap about to be built with huge
// pages, where the kernel gives them to memory that asks (madvise) and n
// is at least MinBytes. It allocates n bytes, asks for huge pages on
// them, has them filled (MADV_POPULATE_WRITE, Linux 5.14; older kernels
// fault them in at first use, still 2 MiB at a time), and lets the
// collector free them for the runtime to reuse. Call it early, before
// the heap grows: the runtime reuses the lowest free addresses first.
// Nothing is reported: without huge pages the command runs as before.
func Prepare(n int64) {
	if n < MinBytes || !askable() {
		return
	}
	if total := totalMemory(); total > 0 && n > total/maxShare {
		n = total / maxShare
		if n < MinBytes {
			return
		}
	}
	b := make([]byte, n+hugePage)
	// The whole huge pages inside b: madvise wants an aligned start.
	base := uintptr(unsafe.Pointer(&b[0]))
	from := int(((base + hugePage - 1) &^ (hugePage - 1)) - base)
	to := from + (len(b)-from)&^(hugePage-1)
	if from < to {
		region := b[from:to]
		if unix.Madvise(region, unix.MADV_HUGEPAGE) == nil {
			unix.Madvise(region, unix.MADV_POPULATE_WRITE)
		}
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC() // b's pages back to the runtime, for the heap to come
}

// askable reports whether the kernel gives huge pages to memory that asks
// for them and not to all memory anyway (where the heap already has them).
func askable() bool {
	b, err := os.ReadFile(enabledFile)
	return err == nil && strings.Contains(string(b), "[madvise]")
}

// totalMemory is the memory this process may use (its cgroup's limit,
// else the machine's) in bytes, 0 if unknown.
func totalMemory() int64 {
	c, err := hostres.Machine{}.Capacity()
	if err != nil || c.MemoryMiB <= 0 {
		return 0
	}
	return c.MemoryMiB << 20
}

// FileSize is the size of the file at path, 0 if it cannot be read: for
// estimates.
func FileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
