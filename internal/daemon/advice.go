package daemon

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/budget"
	"github.com/gpusched/gpusched/internal/task"
)

// budgets serves GET /v1/budgets: for each task of the caller's runs
// (root: everyone's) that asks for GPU memory or sets a host memory
// budget, once per task as memory_mib: auto tells them apart (see
// budget.go), what it asked for and what it used at peak over its recent
// attempts, by the rule gpusched suggest applies to a run directory.
// Oldest first, by the task's newest run.
func (d *Daemon) budgets(w http.ResponseWriter, _ *http.Request, p peer) error {
	type key struct {
		uid              int
		inner, dir, argv string
	}
	type group struct {
		rn  *run      // its newest run
		m   *taskMeta // its task there
		ids []string  // the scheduler's ids of it, one a run, newest first, at most historyTasks
	}
	all := d.runs.all()
	byKey := map[key]*group{}
	var groups []*group // newest run first
	for i := len(all) - 1; i >= 0; i-- {
		rn := all[i]
		if !owns(p, rn) {
			continue
		}
		for j := range rn.tasks {
			m := &rn.tasks[j]
			k := key{rn.uid, m.inner, m.dir, strings.Join(m.command, "\x00")}
			g := byKey[k]
			if g == nil {
				g = &group{rn: rn, m: m}
				byKey[k] = g
				groups = append(groups, g)
			}
			if len(g.ids) < historyTasks {
				g.ids = append(g.ids, qualify(rn.id, m.inner))
			}
		}
	}
	out := client.Budgets{Budgets: []client.Budget{}}
	for _, g := range slices.Backward(groups) {
		st, ok, err := d.lookupStored(g.ids[0])
		if err != nil {
			return err
		}
		if !ok {
			continue // being submitted
		}
		r := st.Spec.Resources
		gpu, host := r.GPU(), r.MemoryHostAuto || r.MemoryMiBHost > 0
		if !gpu && !host {
			continue
		}
		var attempts []task.Attempt
		for _, a := range d.attemptsOf(g.ids) {
			attempts = append(attempts, task.Attempt(a))
		}
		name := g.m.inner
		if g.rn.kind == client.KindCommand {
			name = g.rn.name
		}
		base := client.Budget{Task: showID(g.rn, g.m.inner), Name: name, Owner: g.rn.user, UID: g.rn.uid, Runs: len(g.ids),
			Command: g.m.command, Dir: g.m.dir, Ran: len(attempts) > 0}
		if gpu {
			b := base
			b.Resource, b.MemoryAuto, b.MemoryMaxMiB, b.Exclusive = budget.GPUMemory.String(), r.MemoryAuto, r.MemoryMaxMiB, r.Exclusive
			if !r.MemoryAuto {
				b.MemoryMiB = r.MemoryMiB
			}
			out.Budgets = append(out.Budgets, advised(b, budget.GPUMemory, attempts))
		}
		if host {
			b := base
			b.Resource, b.MemoryAuto, b.MemoryMaxMiB = budget.HostMemory.String(), r.MemoryHostAuto, r.MemoryHostMaxMiB
			if !r.MemoryHostAuto {
				b.MemoryMiB = r.MemoryMiBHost
			}
			out.Budgets = append(out.Budgets, advised(b, budget.HostMemory, attempts))
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// advised is b with the advice of attempts (oldest first, of several
// runs of the task: every one counts) for res.
func advised(b client.Budget, res budget.Resource, attempts []task.Attempt) client.Budget {
	ad := budget.Advise(res, attempts, 1)
	b.AskedMiB, b.PeakMiB, b.Attempts, b.ProposedMiB, b.Flag = ad.AskedMiB, ad.PeakMiB, ad.Attempts, ad.ProposedMiB, string(ad.Flag)
	return b
}
