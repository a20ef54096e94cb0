// Package hostres reads what this process's tasks may use of the machine
// and what they use of it: the cores (CPU affinity, bounded by a cgroup's
// CPU quota), the memory (a cgroup's memory limit, else MemTotal), and the
// resident memory of process groups. The scheduler admits tasks' cpus and
// host memory budgets against the first two (docs/workflow.md, "CPU,
// memory and custom resources") and reports tasks whose real use is far
// above their budget from the third.
//
// Everything is read from files under Machine.Root, so that tests give a
// fake tree: /proc/self/mountinfo (where cgroups are mounted),
// /proc/self/cgroup (this process's cgroups), the cgroups' cpu.max and
// memory.max (cgroup v2) or cpu.cfs_quota_us, cpu.cfs_period_us and
// memory.limit_in_bytes (cgroup v1), /proc/meminfo, and /proc/PID/stat.
package hostres
