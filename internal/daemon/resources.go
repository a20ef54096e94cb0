package daemon

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// The machine's cores, host memory and custom resources. The daemon's
// scheduler admits every user's tasks against what the daemon gives tasks
// (gpusched daemon --cpus, --memory-mib-host, --resource; by default the
// cores and memory this process may use, and no custom resource), as
// gpusched run admits a workflow's against its scheduling settings. The
// daemon declares the capacities; a task only says what it takes, and
// one that asks for more than there is, or for a resource the daemon does
// not declare, is refused at submit.

// hostRequest checks what task inner takes of the machine and sets it in
// r.
func (d *Daemon) hostRequest(inner string, t *client.Task, r *gpusched.ResourceRequest) error {
	s := d.sched.Settings() // totals with their defaults filled in
	switch {
	case t.CPUs < 0:
		return errorf(http.StatusBadRequest, "task %q: cpus must not be negative, got %d", inner, t.CPUs)
	case t.MemoryMiBHost < 0:
		return errorf(http.StatusBadRequest, "task %q: memory_mib_host must not be negative, got %d", inner, t.MemoryMiBHost)
	case t.MemoryMiBHostMax < 0:
		return errorf(http.StatusBadRequest, "task %q: memory_mib_host_max must not be negative, got %d", inner, t.MemoryMiBHostMax)
	case t.MemoryMiBHostAuto && t.MemoryMiBHost != 0:
		return errorf(http.StatusBadRequest, "task %q: memory_mib_host and memory_mib_host_auto: give one", inner)
	case t.MemoryMiBHostMax != 0 && !t.MemoryMiBHostAuto:
		return errorf(http.StatusBadRequest, "task %q: memory_mib_host_max caps a budget learned from history: it goes with memory_mib_host_auto", inner)
	case s.CPUs > 0 && t.CPUs > s.CPUs:
		return errorf(http.StatusBadRequest, "task %q: resources.cpus: asks for %d cpus; this daemon's tasks may take %d in all (gpusched daemon --cpus)",
			inner, t.CPUs, s.CPUs)
	case s.MemoryMiBHost > 0 && t.MemoryMiBHost > s.MemoryMiBHost:
		return errorf(http.StatusBadRequest, "task %q: resources.memory_mib_host: asks for %d MiB; this daemon's tasks may take %d MiB of host memory in all (gpusched daemon --memory-mib-host)",
			inner, t.MemoryMiBHost, s.MemoryMiBHost)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Resources)) {
		n := t.Resources[name]
		total, ok := s.Resources[name]
		switch {
		case !ok:
			return errorf(http.StatusBadRequest, "task %q: resources.%s: %s", inner, name, undeclared(name, s.Resources))
		case n < 1:
			return errorf(http.StatusBadRequest, "task %q: resources.%s: takes at least 1 unit, got %d", inner, name, n)
		case n > total:
			return errorf(http.StatusBadRequest, "task %q: resources.%s: asks for %d of %q, which has %d in all (gpusched daemon --resource %s=%d)",
				inner, name, n, name, total, name, total)
		}
	}
	r.CPUs, r.MemoryMiBHost, r.Counters = t.CPUs, t.MemoryMiBHost, t.Resources
	r.MemoryHostAuto, r.MemoryHostMaxMiB = t.MemoryMiBHostAuto, t.MemoryMiBHostMax
	return nil
}

// undeclared says that the daemon does not declare custom resource name.
func undeclared(name string, declared map[string]int) string {
	if len(declared) == 0 {
		return "this daemon declares no custom resources; its admin declares them (gpusched daemon --resource " + name + "=N), or run the workflow with --local"
	}
	return "this daemon does not declare " + `"` + name + `"` + " (it declares " + strings.Join(slices.Sorted(maps.Keys(declared)), ", ") +
		"); its admin declares them (gpusched daemon --resource " + name + "=N), or run the workflow with --local"
}
