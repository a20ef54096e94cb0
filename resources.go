package gpusched

import (
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/hostres"
	"github.com/gpusched/gpusched/internal/task"
)

// hostCapacity returns the cores and host memory (MiB) s gives tasks: its
// own CPUs and MemoryMiBHost where set, else what this process may use of
// machine m (hostres), the cores raised to MaxParallelTasks and the
// memory less hostres.Reserve. Memory that cannot be read is 0: no limit.
func (s Scheduling) hostCapacity(m hostres.Machine) (cpus int, mib int64) {
	cpus, mib = s.CPUs, s.MemoryMiBHost
	if cpus > 0 && mib > 0 {
		return cpus, mib
	}
	c, err := m.Capacity()
	if err != nil {
		c.CPUs, c.MemoryMiB = cores(m), 0
	}
	if cpus <= 0 {
		cpus = max(c.CPUs, s.MaxParallelTasks, 1)
	}
	if mib <= 0 && c.MemoryMiB > 0 {
		mib = c.MemoryMiB - hostres.Reserve(c.MemoryMiB)
	}
	return cpus, mib
}

// cores is m's CPU count when its files cannot be read.
func cores(m hostres.Machine) int {
	if m.CPUs != nil {
		return m.CPUs()
	}
	return 0
}

// hostConfig is the engine's admission by the machine's resources, from
// settings with their defaults filled in.
func (s Scheduling) hostConfig() engine.HostConfig {
	return engine.HostConfig{
		CPUs: s.CPUs, MemoryMiB: s.MemoryMiBHost, Counters: s.Resources, ReserveAfter: s.GPUReserveAfter,
		SampleRSS: hostres.Machine{}.GroupRSS,
	}
}

// CheckHost makes, without a run directory, the checks of the machine's
// resources SubmitMany makes: no task may ask for more cores or host
// memory than s gives tasks in all (its CPUs and MemoryMiBHost, else what
// this machine gives this process: see Scheduling), nor for a custom
// resource s does not declare, nor for more units of one than it has.
// Tasks of an executor that places its attempts itself (slurm) are
// checked for custom resources only: this machine's cores are not theirs.
func CheckHost(s Scheduling, tasks []TaskSpec) error {
	s = s.withDefaults()
	specs := make([]*task.Spec, 0, len(tasks))
	for i := range tasks {
		if tasks[i].Resources.CPUs > 1 || tasks[i].Resources.MemoryMiBHost > 0 || len(tasks[i].Resources.Counters) > 0 {
			sp := tasks[i].spec()
			specs = append(specs, &sp)
		}
	}
	elsewhere := func(sp *task.Spec) bool { return placedByBuiltin(sp.Executor) }
	return publicError(engine.CheckHost(s.hostConfig(), specs, elsewhere))
}
