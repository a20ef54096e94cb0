package cli

import (
	"os"
	"runtime/debug"
	"sync"

	"github.com/gpusched/gpusched/internal/hostres"
)

// lessGCPercent is the garbage collector's GOGC while a command builds a
// heap it keeps: status reading a run it prints once, plan (the workflow
// and the run directory, read at the same time); a run loading its tasks
// turns it off instead (collectNone). With the
// default GOGC=100 the collector marks that heap again every time it
// doubles, and frees little. On 100,000 tasks GOGC=400 saved about 0.1 s
// of status's CPU and 0.3-0.4 s of a run's before its first start, for the
// same peak memory in status and up to 10% more in a run
// (docs/benchmarks.md, the "Fourth round" subsections).
const lessGCPercent = 400

// collectLess has the garbage collector run less often (lessGCPercent),
// unless $GOGC says how often it should, and returns what gives it its
// setting back; a second call of that does nothing.
func collectLess() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(lessGCPercent)
	var once sync.Once
	return func() { once.Do(func() { debug.SetGCPercent(old) }) }
}

// loadingMemoryShare is the share of the memory this process may use
// (its cgroup's limit, else the machine's) up to which a run's loading
// goes without garbage collection (collectNone).
const loadingMemoryShare = 4 // a quarter

// collectNone turns the garbage collector off while a run loads its
// tasks (reads the workflow and the run directory's state, submits),
// unless $GOGC or $GOMEMLIMIT says how it should run; it runs all the
// same once the heap reaches a quarter of the memory this process may
// use (a memory limit). It returns what gives the collector back its
// settings; a second call of that does nothing.
//
// Loading builds a heap that lives on: at GOGC=400 a resume of 100,000
// tasks still collected three times before its first start, the last
// during the submission (0.36 s, 300 MB live), and with the state read on
// one goroutine while the workflow is parsed on another, a collection
// made both slower by as much as they overlapped (system time up
// threefold). Off, the first start came 0.4 s sooner for 0.9 s less CPU,
// and the peak grew little (496 -> 513 MB): docs/benchmarks.md, "Seventh
// round: the parse and the load". Where the memory cannot be read,
// collectLess.
func collectNone() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	c, err := hostres.Machine{}.Capacity()
	if err != nil || c.MemoryMiB <= 0 {
		return collectLess()
	}
	limit := c.MemoryMiB << 20 / loadingMemoryShare
	oldLimit := debug.SetMemoryLimit(limit)
	oldPercent := debug.SetGCPercent(-1)
	var once sync.Once
	return func() {
		once.Do(func() {
			debug.SetGCPercent(oldPercent)
			debug.SetMemoryLimit(oldLimit)
		})
	}
}
