package daemon

import (
	"sync"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/budget"
)

// The GPU and host memory budgets the scheduler chose for a task that
// learns them (gpu_mib_auto, memory_mib_host_auto), as the queue shows
// them. The scheduler chooses them when the task is submitted (again, for
// a retry or a restart) and saves them in the task's definition, which its
// record does not carry: the queue reads the definition once per
// submission, and keeps what it said.

// budgetCache holds, by the scheduler's task id, what the queue showed of
// the budgets of tasks not finished.
type budgetCache struct {
	mu sync.Mutex
	m  map[string]shownBudgets // guarded by mu
}

// shownBudgets are the budgets chosen at one submission of a task.
type shownBudgets struct {
	submitted time.Time // the submission they were chosen at
	gpu, host shownBudget
}

// shownBudget is one learned budget; zero: not learned.
type shownBudget struct {
	mib    int64
	source string
	note   string // as gpusched status says it
}

// chosen is the budget of r learned for req, or zero.
func chosen(r budget.Resource, mib int64, b *gpusched.MemoryBudget) shownBudget {
	if b == nil {
		return shownBudget{}
	}
	return shownBudget{mib: mib, source: string(b.Source), note: budget.Describe(r, mib, b)}
}

// show sets t's budget fields for task rec, which learns its GPU or host
// memory budget, or both: from what was read at rec's submission, or read
// now.
func (c *budgetCache) show(d *Daemon, t *client.TaskInfo, rec *gpusched.Record) {
	c.mu.Lock()
	b, ok := c.m[rec.ID]
	c.mu.Unlock()
	if !ok || !b.submitted.Equal(rec.Submitted) {
		st, found, err := d.sched.Lookup(rec.ID)
		if err != nil {
			d.log.Printf("read task %s: %v", rec.ID, err)
		}
		if !found || err != nil {
			return
		}
		r := st.Spec.Resources
		b = shownBudgets{submitted: rec.Submitted}
		if r.MemoryAuto {
			b.gpu = chosen(budget.GPUMemory, r.MemoryMiB, r.Budget)
		}
		if r.MemoryHostAuto {
			b.host = chosen(budget.HostMemory, r.MemoryMiBHost, r.HostBudget)
		}
		if b.gpu == (shownBudget{}) && b.host == (shownBudget{}) {
			return // being submitted: not chosen yet
		}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]shownBudgets{}
		}
		c.m[rec.ID] = b
		c.mu.Unlock()
	}
	t.GPUMiB, t.GPUMiBSource, t.GPUBudget = b.gpu.mib, b.gpu.source, b.gpu.note
	t.MemoryMiBHost, t.MemoryMiBHostSource, t.HostBudget = b.host.mib, b.host.source, b.host.note
}

// forget drops what is kept of finished task id.
func (c *budgetCache) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}
