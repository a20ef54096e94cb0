// Package local runs jobs as subprocesses of the scheduler. Each attempt is
// the leader of its own process group; stopping it signals the whole group,
// so grandchildren go too, even those that ignore SIGTERM.
//
// Processes that leave the group (setsid, bash job control, a new process
// group) are found by the attempt's token in their environment and, when
// Executor.Cgroups asks and the machine allows one, by the attempt's
// cgroup: they are stopped with the attempt. When the leader exits, whatever is left of the attempt is
// killed at once: an attempt ends with nothing of it running. What remains
// out of reach is listed in docs/processes.md.
//
// Log files are opened without following symbolic links below the run
// directory. Start failures say whose fault they are (executor.ErrCommand,
// executor.ErrEnvironment).
package local
