package cli

import (
	"os"
	"runtime/debug"
	"sync"
)

// lessGCPercent is the garbage collector's GOGC while a command builds a
// heap it keeps: status reading a run it prints once, plan (the workflow
// and the run directory, read at the same time), a run loading its
// tasks (reads the workflow, opens the run directory, submits). With the
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
