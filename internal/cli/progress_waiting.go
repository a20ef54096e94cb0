package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// The live display's breakdown of the waiting tasks by reason: the
// scheduler saves each pending task's reason with its row (decided where
// it decides: dependencies, slots, GPU admission, retry delays), and the
// display counts them from the state database, as status reads them.

// waitInterval is the least time between two counts. A count reads every
// task's row (8 ms for 100,000 tasks); one that takes longer waits twenty
// times as long before the next, so the display never takes more than a
// twentieth of a core for it.
const waitInterval = time.Second

// waitSource gives the live display the count of waiting tasks by reason.
type waitSource interface {
	read(now time.Time) map[task.WaitKind]int
	close()
}

// waitReader counts the waiting tasks by reason, at most every
// waitInterval.
type waitReader struct {
	runDir string
	st     *store.SQLite
	next   time.Time
	last   map[task.WaitKind]int
}

func (r *waitReader) read(now time.Time) map[task.WaitKind]int {
	if now.Before(r.next) {
		return r.last
	}
	r.next = now.Add(waitInterval)
	if r.st == nil {
		st, err := store.OpenSQLiteReadOnly(filepath.Join(r.runDir, gpusched.StateFile), r.runDir)
		if err != nil {
			return r.last
		}
		r.st = st
	}
	counts, err := r.st.CountWaiting()
	if took := time.Since(now); 20*took > waitInterval {
		r.next = now.Add(20 * took)
	}
	if err != nil {
		return r.last
	}
	r.last = counts
	return counts
}

func (r *waitReader) close() {
	if r.st != nil {
		r.st.Close()
	}
}

// waitLabels word each kind of reason for the display's count.
var waitLabels = [...]string{
	task.WaitDependencies:    "for dependencies",
	task.WaitSlot:            "for a slot",
	task.WaitGPUMemory:       "for GPU memory",
	task.WaitCardReserved:    "for a reserved card",
	task.WaitCardUnavailable: "for a card in cooldown or quarantine",
	task.WaitGPUUnknown:      "for the GPU state",
	task.WaitRetryDelay:      "for a retry",
	task.WaitBackoff:         "backing off",
	task.WaitPaused:          "paused",
	task.WaitUserCap:         "at a per-user cap",
	task.WaitCPU:             "for cpus",
	task.WaitHostMemory:      "for host memory",
	task.WaitResource:        "for a custom resource",
}

// waitBreakdown says how many tasks wait for what, in the kinds' order:
// "3 for a slot, 2 for GPU memory"; "" when no count is known.
func waitBreakdown(counts map[task.WaitKind]int) string {
	var parts []string
	for k := task.WaitDependencies; int(k) < len(waitLabels); k++ {
		if n := counts[k]; n > 0 && waitLabels[k] != "" {
			parts = append(parts, fmt.Sprintf("%d %s", n, waitLabels[k]))
		}
	}
	return strings.Join(parts, ", ")
}
