// Package gpusched runs many CPU and NVIDIA-GPU jobs on one machine as a
// dependency graph, with durable state: kill the scheduler at any moment, run
// it again on the same run directory, and completed work is kept.
//
// # Tasks
//
// A task is described by a TaskSpec: an id, a kind (the handler that turns it
// into a command; "command" runs an argv without a shell), its dependencies,
// a priority, resources, a timeout, retries, environment and working
// directory. SubmitMany checks a batch as a whole (duplicate ids, unknown
// dependencies, cycles) and accepts all of it or none. Submit works before
// and during Run, from any goroutine, including from a handler.
//
// # Running
//
// Run starts ready tasks, higher priority first, then in submission order,
// never more than Scheduling.MaxParallelTasks at once. Each attempt runs in
// its own process group with its output in a log file under the run
// directory; a timeout stops the whole group (SIGTERM, then SIGKILL after
// Scheduling.KillGrace). A task that fails after its retries blocks every
// task downstream of it; independent branches go on. A dependency may say
// when it is satisfied instead (TaskSpec.DependencyOn): on the
// dependency's failure (a clean-up), or whichever way it ends (an
// aggregate over a partial sweep). Run returns when nothing more can run,
// with every task's Record.
//
// # State
//
// The run directory holds state.db (SQLite, WAL), the attempt logs under
// logs/, and a lock file: one scheduler per run directory at a time.
// Every transition is committed before the action it allows.
// Creating a Scheduler on a run directory used before keeps the tasks that
// completed there, when submitted again, and runs the rest: those whose
// definition, inputs (TaskSpec.Inputs: the files a task reads) or
// artifacts changed since, and what depends on them. SubmitWith and
// PlanWith take SubmitOptions to force some tasks to run again, to run
// only some, and to keep those whose artifacts were edited by hand.
package gpusched
