package daemon

import (
	"sync"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/budget"
)

// The GPU memory budget the scheduler chose for a task that learns it
// (gpu_mib_auto), as the queue shows it. The scheduler chooses it when
// the task is submitted (again, for a retry or a restart) and saves it
// in the task's definition, which its record does not carry: the queue
// reads the definition once per submission, and keeps what it said.

// budgetCache holds, by the scheduler's task id, what the queue showed of
// the budgets of tasks not finished.
type budgetCache struct {
	mu sync.Mutex
	m  map[string]shownBudget // guarded by mu
}

// shownBudget is a budget chosen at one submission of a task.
type shownBudget struct {
	submitted time.Time // the submission it was chosen at
	mib       int64
	source    string
	note      string
}

// show sets t's budget fields for task rec, which learns its GPU memory
// budget: from what was read at rec's submission, or read now.
func (c *budgetCache) show(d *Daemon, t *client.TaskInfo, rec *gpusched.Record) {
	c.mu.Lock()
	b, ok := c.m[rec.ID]
	c.mu.Unlock()
	if !ok || !b.submitted.Equal(rec.Submitted) {
		st, found, err := d.sched.Lookup(rec.ID)
		if err != nil {
			d.log.Printf("read task %s: %v", rec.ID, err)
		}
		r := st.Spec.Resources
		if !found || err != nil || !r.MemoryAuto || r.Budget == nil {
			return // being submitted: not chosen yet
		}
		b = shownBudget{submitted: rec.Submitted, mib: r.MemoryMiB, source: string(r.Budget.Source),
			note: budget.Describe(budget.GPUMemory, r.MemoryMiB, r.Budget)}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]shownBudget{}
		}
		c.m[rec.ID] = b
		c.mu.Unlock()
	}
	t.GPUMiB, t.GPUMiBSource, t.GPUBudget = b.mib, b.source, b.note
}

// forget drops what is kept of finished task id.
func (c *budgetCache) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}
