package gpusched

import (
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// SlurmSettings are what a task asks of Slurm (sbatch's --partition,
// --account, --qos, --constraint, --cpus-per-task, --mem, extra
// arguments as they are, and the GPU types its budget chooses from).
type SlurmSettings = task.SlurmSettings

// RemoteJob is an attempt's job in a batch system (Slurm), as that system
// last said of it (Attempt.Job): its id, state, node, and why it waits.
type RemoteJob = task.RemoteJob

// TaskSpec describes one task: what to run, after what, with what priority
// and resources, and what to do when it fails. The zero value of every field
// but ID is a usable default. The JSON names are those of workflow files.
type TaskSpec struct {
	// ID names the task; unique within a scheduler. Letters, digits and
	// "_.:@+=,-", not starting with "." or "-", at most 200 bytes: it also
	// names the task's log files (logs/ID.attempt-N.log).
	ID string `json:"id"`
	// Kind selects the Handler that turns the task into a command; empty
	// means "command" (CommandHandler).
	Kind string `json:"kind,omitempty"`
	// Dependencies are the ids of tasks that must end first: complete,
	// unless DependencyOn says otherwise.
	Dependencies []string `json:"dependencies,omitempty"`
	// DependencyOn gives, by dependency id, when a dependency is satisfied
	// if not by its completion: AfterFailure (a clean-up that runs when
	// it fails) or AfterAny (an aggregate that runs on a partial sweep).
	// Each id must be one of Dependencies; one it does not name is
	// AfterSuccess. A task whose condition can no longer be met is
	// blocked, and says why (Record.Error, BlockedBy, NotNeeded). Like
	// Dependencies, conditions are not part of the task's definition:
	// changing one does not make a completed task run again.
	DependencyOn map[string]DependencyCondition `json:"dependency_on,omitempty"`
	// Payload is the handler's input. For "command": the argv, a []string,
	// run without a shell.
	Payload any `json:"payload,omitempty"`
	// Priority orders ready tasks: higher starts first; ties go by
	// submission order.
	Priority int `json:"priority,omitempty"`
	// Resources is what the task needs to start: its device and, for a GPU
	// task, its GPU memory budget.
	Resources ResourceRequest `json:"resources,omitzero"`
	// Executor names the executor that runs the task's attempts; empty
	// means the scheduler's default, "local" (subprocesses on this
	// machine). SubmitMany refuses a name it has no executor for. It is not
	// part of the task's definition: a task completed on one executor stays
	// complete when it is submitted again naming another.
	Executor string `json:"executor,omitempty"`
	// Slurm is what the task asks of Slurm when the slurm executor runs
	// it (partition, account, memory...; see docs/slurm.md); nil asks for
	// nothing. Other executors ignore it. Like Executor, it is not part
	// of the task's definition.
	Slurm *SlurmSettings `json:"slurm,omitempty"`
	// Timeout bounds each attempt; 0 means the queue's default, NoTimeout
	// none.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Retries is how many extra attempts a failing task gets; 0 means the
	// queue's default, NoRetries none.
	Retries int `json:"retries,omitempty"`
	// RetryDelay is the wait before the first retry; each further retry
	// waits twice as long, up to Scheduling.RetryDelayMax. 0 means the
	// queue's default, NoRetryDelay none.
	RetryDelay time.Duration `json:"retry_delay,omitempty"`
	// RetryOnExitCodes, when not empty, limits retries to attempts that
	// exited with one of these codes (1 to 255): any other failure is
	// final. A CUDA out-of-memory failure is retried whatever its code.
	RetryOnExitCodes []int `json:"retry_on_exit_codes,omitempty"`
	// RetryOnTimeout retries attempts stopped at their timeout; by default
	// they are not retried.
	RetryOnTimeout bool `json:"retry_on_timeout,omitempty"`
	// Env is added to the environment gpusched was started with, for every
	// attempt; with CleanEnv it is the whole environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the attempts' working directory; empty means the scheduler's.
	Dir string `json:"dir,omitempty"`
	// Artifacts are the files (or folders) the task must produce, relative
	// to Dir. An attempt that exits 0 completes only if each exists; a
	// completed task whose artifacts went missing or changed runs again when
	// the run resumes.
	Artifacts []string `json:"artifacts,omitempty"`
	// HashArtifacts makes resume compare the artifacts' content (SHA-256),
	// not only their size and modification time.
	HashArtifacts bool `json:"hash_artifacts,omitempty"`
	// HashInputs makes resume compare the inputs' content (SHA-256) when
	// their size or modification time changed: a file touched but not
	// changed is the same input. Files are hashed when an attempt starts,
	// and at resume those whose size or time changed.
	HashInputs bool `json:"hash_inputs,omitempty"`
	// Inputs are the files the task reads, relative to Dir: paths, globs
	// ("data/*.csv", path.Match syntax) and folders ("src/": every file
	// under it). What they were when the attempt that completed the task
	// started is saved; when a run resumes, a completed task whose inputs
	// differ (a file changed, added or removed) runs again, and what
	// depends on it too, with the reason "input changed: params.json". A
	// path or glob that names nothing is no error: the set is empty, and a
	// file that appears later is an added input. See docs/workflow.md.
	Inputs []string `json:"inputs,omitempty"`
	// OnComplete, for the command kind, is an argv run once the task has
	// completed (at least once: again after a crash until it exits 0), with
	// GPUSCHED_TASK_ID and GPUSCHED_EVENT_ID set.
	OnComplete []string `json:"on_complete,omitempty"`
	// OnFailure, for the command kind, is an argv run once the task has
	// failed for good, its retries spent (at least once, as OnComplete),
	// with GPUSCHED_TASK_ID, GPUSCHED_EVENT_ID, GPUSCHED_EXIT_CODE,
	// GPUSCHED_ATTEMPTS and GPUSCHED_ERROR set (see FailureEvent). A
	// blocked or cancelled task has not failed: nothing runs for it.
	// Like OnComplete, it is not part of the task's definition.
	OnFailure []string `json:"on_failure,omitempty"`
	// CleanEnv makes Env the attempts' whole environment: nothing is
	// inherited from the scheduler's own (gpusched's variables, such as
	// GPUSCHED_TASK_ID and CUDA_VISIBLE_DEVICES, are still set). A daemon
	// runs a task with its submitter's environment so. It is part of the
	// task's definition: changing it makes a completed task run again.
	CleanEnv bool `json:"clean_env,omitempty"`
	// Owner is the Unix user the task belongs to, by decimal uid ("1000"):
	// its attempts run as that user (the scheduler must run as root to run
	// them as another), and fair share between users counts its use against
	// that user. Empty: the scheduler's own user. It is part of the task's
	// definition. A daemon sets it to the submitter's uid. Its logs are
	// created with that user's rights, so the folder they go in must let
	// the user create files: a daemon's tasks are RUN/TASK, and it makes
	// each run's folder, logs/RUN, the run's owner's.
	Owner string `json:"owner,omitempty"`
}

// DependencyCondition says when a dependency is satisfied (see
// TaskSpec.DependencyOn): Slurm's afterok, afternotok and afterany. It is
// written and read as its name: "success", "failure" or "any".
type DependencyCondition uint8

// The conditions.
const (
	// AfterSuccess, the default: the dependency must complete. If it
	// fails, is cancelled or is blocked, the task is blocked.
	AfterSuccess = DependencyCondition(task.AfterSuccess)
	// AfterFailure: the dependency must end without succeeding: fail for
	// good (its retries spent), be cancelled, or be blocked by a failure
	// upstream. If it completes, the task is not needed: it is blocked,
	// with Record.NotNeeded set, which is no failure of the run.
	AfterFailure = DependencyCondition(task.AfterFailure)
	// AfterAny: the dependency must end, whichever way.
	AfterAny = DependencyCondition(task.AfterAny)
)

// String returns the condition's name: "success", "failure" or "any".
func (c DependencyCondition) String() string { return task.Condition(c).String() }

// MarshalText writes the condition's name.
func (c DependencyCondition) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a condition's name.
func (c *DependencyCondition) UnmarshalText(b []byte) error {
	v, err := task.ParseCondition(string(b))
	*c = DependencyCondition(v)
	return err
}

// ResourceRequest is what a task needs to start: its device, for a CUDA
// task a GPU memory budget in MiB on each of its cards (used for
// admission, not enforced as a limit on the process), whether it needs its
// cards to itself, and how many cards it takes at once; and what it takes
// of the machine while it runs (see docs/workflow.md, "CPU, memory and
// custom resources"), none of which is a limit on the process either.
// The cores, host memory and custom resources are not part of the task's
// definition: changing them does not make a completed task run again.
type ResourceRequest struct {
	Device    Device `json:"device,omitempty"` // empty means CPU
	MemoryMiB int64  `json:"memory_mib,omitempty"`
	Exclusive bool   `json:"exclusive,omitempty"`
	// GPUs is how many cards a CUDA task takes, each with MemoryMiB free
	// (and to itself when Exclusive), admitted all at once or not at all;
	// 0 means 1, the most is 64. The task sees them all in
	// CUDA_VISIBLE_DEVICES, closest cards preferred (docs/gpu.md).
	GPUs int `json:"gpus,omitempty"`
	// MemoryAuto has the scheduler choose a CUDA task's GPU memory budget
	// when the task is submitted, from the peaks the same task reached in
	// its recent attempts (see docs/gpu.md, "Budgets learned from
	// history"); MemoryMiB given with it is replaced by the budget chosen.
	// The task's definition holds the word auto, not the number: a new
	// choice does not make a completed task run again.
	MemoryAuto bool `json:"memory_auto,omitempty"`
	// MemoryMaxMiB, with MemoryAuto, is the budget when nothing is known
	// of the task yet and the most a learned budget may be; 0: the first
	// budget is DefaultAutoMemoryMiB, and only the cards cap it. Not part
	// of the definition.
	MemoryMaxMiB int64 `json:"memory_mib_max,omitempty"`
	// Budget, for an auto budget, says how the scheduler chose MemoryMiB
	// (in StoredTask, Lookup and what handlers see); it is set at submit,
	// whatever a TaskSpec submitted holds.
	Budget *MemoryBudget `json:"budget,omitempty"`
	// CPUs is the cores it takes of Scheduling.CPUs; 0 means 1.
	CPUs int `json:"cpus,omitempty"`
	// MemoryMiBHost is its host memory budget in MiB, taken of
	// Scheduling.MemoryMiBHost; 0: none declared (it takes none). An
	// attempt whose resident memory goes far over it is reported
	// (Attempt.OverHostMemory).
	MemoryMiBHost int64 `json:"memory_mib_host,omitempty"`
	// Counters are the units it takes of custom resources, by name
	// (Scheduling.Resources declares them). A workflow file writes them as
	// keys of resources: {licenses: 1}.
	Counters map[string]int `json:"counters,omitempty"`
	// MemoryHostAuto has the scheduler choose MemoryMiBHost when the task
	// is submitted, from the peak resident memory (RSS) of its recent
	// attempts, by the rule MemoryAuto follows for GPU memory (docs/gpu.md,
	// "Budgets learned from history"); MemoryMiBHost given with it is
	// replaced by the budget chosen. Capped by the host memory the
	// scheduler gives tasks (Scheduling.MemoryMiBHost) for a task run on
	// this machine.
	MemoryHostAuto bool `json:"memory_host_auto,omitempty"`
	// MemoryHostMaxMiB, with MemoryHostAuto, is the budget when nothing
	// is known of the task yet and the most a learned budget may be; 0:
	// the first budget is DefaultAutoHostMemoryMiB.
	MemoryHostMaxMiB int64 `json:"memory_mib_host_max,omitempty"`
	// HostBudget, with MemoryHostAuto, says how the scheduler chose
	// MemoryMiBHost, as Budget does for MemoryMiB; set at submit.
	HostBudget *MemoryBudget `json:"host_budget,omitempty"`
}

// GPU reports whether the request needs a GPU.
func (r ResourceRequest) GPU() bool { return r.Device == CUDA }

// Device is what a task runs on: CPU or CUDA.
type Device string

// The devices.
const (
	CPU  Device = "cpu"
	CUDA Device = "cuda"
)

// NoTimeout as TaskSpec.Timeout means no timeout even if the queue has a
// default; NoRetries as TaskSpec.Retries means no retries; NoRetryDelay as
// TaskSpec.RetryDelay means retry at once.
const (
	NoTimeout    time.Duration = -1
	NoRetries    int           = -1
	NoRetryDelay time.Duration = -1
)

// Record is what happened to a task: its state, every attempt, the last exit
// code, and why it failed, was blocked or waits.
type Record struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// Paused: the task was paused (Scheduler.Pause) and not resumed since.
	// A paused pending task waits with WaitPaused; a paused running one
	// runs on, and waits paused if it is to run again. A task that
	// finishes is no longer paused.
	Paused bool `json:"paused,omitempty"`
	// NotNeeded: the task is blocked because the condition of one of its
	// dependencies can no longer be met and no failure is behind that: it
	// runs on the failure of a dependency that completed (BlockedBy), or
	// after one that was not needed either. It is not a failure of the
	// run (OK).
	NotNeeded bool `json:"not_needed,omitempty"`
	// Attempts lists every attempt, oldest first, including those of earlier
	// runs on the same run directory.
	Attempts []Attempt `json:"attempts"`
	// ExitCode is the exit code of the last finished attempt, if it exited.
	ExitCode *int `json:"exit_code"`
	// Error says why the task failed, was blocked or was cancelled.
	Error string `json:"error,omitempty"`
	// BlockedBy names the failed or cancelled task that blocked this one;
	// for a task not needed, the task that completed.
	BlockedBy string `json:"blocked_by,omitempty"`
	// Submitted is when the task was (last) submitted.
	Submitted time.Time `json:"submitted,omitzero"`
	// Artifacts are the files it produced, as they were when it completed.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// RetryAt is when a pending task that failed may start again, while it
	// waits out its retry delay (or a back-off after a fault of the
	// environment); zero otherwise.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Rerun says why a task that had run before on this run directory ran
	// (or runs) again in the latest run ("definition changed: args",
	// "artifact missing: out/x", ...); empty when it was kept or is new.
	Rerun string `json:"rerun,omitempty"`
	// Waiting says why a pending task has not started, as the scheduler
	// decided it; for a running task, WaitQueued while its attempt waits
	// in the batch system that runs it; the zero value otherwise.
	Waiting WaitReason `json:"waiting,omitzero"`
}

// OK reports whether the task ended as its run wants: it completed, or it
// was blocked as not needed (NotNeeded). A run whose tasks are all OK
// succeeded.
func (r Record) OK() bool {
	return r.State == StateComplete || r.State == StateBlocked && r.NotNeeded
}

// LastAttempt returns the most recent attempt, or nil if none ran.
func (r *Record) LastAttempt() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}

// Attempt is one execution of a task's command.
type Attempt struct {
	// Number counts attempts from 1; it keeps counting across resumed runs.
	Number int `json:"number"`
	// Start and End bracket the attempt; End is zero while it runs.
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// ExitCode is the process's exit status; nil if it was killed by a
	// signal, never started, or is still running.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the process, e.g. "SIGKILL".
	Signal string `json:"signal,omitempty"`
	// TimedOut is set when gpusched stopped the attempt at its timeout.
	TimedOut bool `json:"timed_out,omitempty"`
	// Cancelled is set when the attempt was stopped by a cancellation
	// (Scheduler.Cancel, Run's context, Ctrl-C).
	Cancelled bool `json:"cancelled,omitempty"`
	// Interrupted is set when the scheduler itself died during the attempt;
	// such an attempt is not counted as the task's failure.
	Interrupted bool `json:"interrupted,omitempty"`
	// NotCharged is set when the attempt failed for a reason that is not the
	// task's own (the environment could not set it up; another process took
	// the GPU memory it was promised): it did not use up a retry. Error
	// says why.
	NotCharged bool `json:"not_charged,omitempty"`
	// Adopted is set when the attempt outlived the scheduler that started
	// it and was adopted by a later one (it kept running, or its end was
	// recorded from what its supervisor wrote).
	Adopted bool `json:"adopted,omitempty"`
	// EndReason says how it ended, as its executor tells: exited,
	// signalled, timed-out, cancelled, lost, preempted, node-failure,
	// infrastructure, unrunnable; empty while it runs or for attempts
	// recorded before gpusched knew.
	EndReason string `json:"end_reason,omitempty"`
	// Error says why the attempt failed when the exit code alone doesn't:
	// the command could not start, the handler rejected the result, ...
	Error string `json:"error,omitempty"`
	// LogPath is the file holding the attempt's stdout and stderr.
	LogPath string `json:"log_path,omitempty"`
	// PID is the process id of the attempt's leader, once it started.
	PID int `json:"pid,omitempty"`
	// GPU is the index of the card the attempt ran on; nil for CPU tasks.
	// For an attempt on several cards, the first of them.
	GPU *int `json:"gpu"`
	// GPUs are, for an attempt on several cards (ResourceRequest.GPUs),
	// the indices of all of them in the order CUDA_VISIBLE_DEVICES gives
	// them, GPU first; nil for an attempt on one card or none.
	GPUs []int `json:"gpus,omitempty"`
	// GPUUUID is the UUID of the card GPU names.
	GPUUUID string `json:"gpu_uuid,omitempty"`
	// MemRequestedMiB is the GPU memory the attempt was admitted with (the
	// task's budget, or more after an out-of-memory failure), on each of
	// its cards.
	MemRequestedMiB int64 `json:"mem_requested_mib,omitempty"`
	// MemPeakMiB is the most GPU memory its processes were seen to use.
	MemPeakMiB int64 `json:"mem_peak_mib,omitempty"`
	// HostMemRequestedMiB is the host memory budget the attempt was
	// admitted with (resources.memory_mib_host); 0 when it declared none.
	HostMemRequestedMiB int64 `json:"host_mem_requested_mib,omitempty"`
	// RSSPeakMiB is the most resident memory its processes (its process
	// group) were seen to hold together, sampled every few seconds while
	// it ran on this machine; 0 when it was never sampled (it ran
	// elsewhere, or too briefly).
	RSSPeakMiB int64 `json:"rss_peak_mib,omitempty"`
	// ReadyAt is when the task last became ready before this attempt (its
	// dependencies complete, or its previous attempt failed): Start - ReadyAt
	// is the time it waited for a slot or a card.
	ReadyAt time.Time `json:"ready_at,omitzero"`
	// Job is the attempt's job in the batch system that ran it (Slurm),
	// as that system last said; nil for attempts run on this machine.
	Job *RemoteJob `json:"job,omitempty"`
}

// Ended reports whether the attempt has finished.
func (a *Attempt) Ended() bool { return !a.End.IsZero() }

// OverHostMemory reports whether the attempt's peak RSS went over its host
// memory budget by far: more than 1.5 times MemoryMiBHost. It is false
// when the task declared no budget.
func (a *Attempt) OverHostMemory() bool { return (*task.Attempt)(a).OverHostMemory() }

// Artifact is a file a task produced, as it was when the task completed.
type Artifact struct {
	Path    string    `json:"path"` // as the task spec lists it
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	SHA256  string    `json:"sha256,omitempty"` // when the task asked for hashing
}

// State is where a task stands. States are saved and printed as the
// lowercase names String returns, which other tools may rely on.
type State uint8

// The task states. A task starts pending, is running while an attempt runs,
// and ends complete, failed (its retries spent), blocked (the condition of
// a dependency can no longer be met: usually it failed or was cancelled;
// so it never started) or cancelled. Between the attempts of a retried
// task it is pending again.
const (
	StatePending   = State(task.Pending)
	StateRunning   = State(task.Running)
	StateComplete  = State(task.Complete)
	StateFailed    = State(task.Failed)
	StateBlocked   = State(task.Blocked)
	StateCancelled = State(task.Cancelled)
)

// String returns the state's name, e.g. "complete".
func (s State) String() string { return task.State(s).String() }

// Terminal reports whether nothing more happens to a task in this state
// unless the run is resumed: complete, failed, blocked or cancelled.
func (s State) Terminal() bool { return task.State(s).Terminal() }

// MarshalText writes the state's name, so JSON carries "complete", not 2.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	v, err := task.ParseState(string(b))
	*s = State(v)
	return err
}

// WaitKind says why a pending task has not started, or (WaitQueued) why a
// running task's attempt has not started in its batch system. Kinds are saved and
// printed as the lowercase names String returns ("dependencies", "slot",
// "gpu-memory", ...), which other tools may rely on; new kinds may be added.
type WaitKind uint8

// The kinds of waiting.
const (
	// NotWaiting: the task is not pending, or no scheduler has decided
	// about it yet.
	NotWaiting = WaitKind(task.NotWaiting)
	// WaitDependencies: dependencies are not complete yet; Detail names
	// them (the first ten, then a count).
	WaitDependencies = WaitKind(task.WaitDependencies)
	// WaitSlot: it is ready, and every parallel slot is taken.
	WaitSlot = WaitKind(task.WaitSlot)
	// WaitGPUMemory: no card that takes work has room for it now; Detail
	// says what it needs and what the best card has left.
	WaitGPUMemory = WaitKind(task.WaitGPUMemory)
	// WaitCardReserved: a card would hold it, but is reserved for a task
	// that has waited longer.
	WaitCardReserved = WaitKind(task.WaitCardReserved)
	// WaitCardUnavailable: a card would hold it, but is cooling down after
	// a task left it, or quarantined after repeated failures.
	WaitCardUnavailable = WaitKind(task.WaitCardUnavailable)
	// WaitGPUUnknown: the GPUs cannot be read (Detail says why); no GPU
	// task starts meanwhile.
	WaitGPUUnknown = WaitKind(task.WaitGPUUnknown)
	// WaitRetryDelay: its last attempt failed; it waits out its retry
	// delay until Until. Detail is the attempt's error.
	WaitRetryDelay = WaitKind(task.WaitRetryDelay)
	// WaitBackoff: its last attempt failed for a fault of the environment,
	// not charged to its retries; it backs off until Until. Detail is the
	// attempt's error.
	WaitBackoff = WaitKind(task.WaitBackoff)
	// WaitPaused: it was paused (a daemon's pause) and starts only once
	// resumed.
	WaitPaused = WaitKind(task.WaitPaused)
	// WaitUserCap: its owner is at a per-user cap (running tasks or GPU
	// memory); Detail says which.
	WaitUserCap = WaitKind(task.WaitUserCap)
	// WaitQueued: the task runs (its attempt exists), and the attempt
	// waits in the batch system that runs it (Slurm's queue), or to be
	// submitted there; Detail says what that system says. The only kind
	// a running task has.
	WaitQueued = WaitKind(task.WaitQueued)
	// WaitCPU: it needs more cores than are free now, or the free ones
	// are held for a task that has waited longer; Detail says which.
	WaitCPU = WaitKind(task.WaitCPU)
	// WaitHostMemory: its host memory budget is more than is left of the
	// machine's, or what is left is held for a task that has waited
	// longer.
	WaitHostMemory = WaitKind(task.WaitHostMemory)
	// WaitResource: it needs more units of a custom resource
	// (Scheduling.Resources) than are free now; Detail names it.
	WaitResource = WaitKind(task.WaitResource)
)

// String returns the kind's name, e.g. "gpu-memory"; "" for NotWaiting.
func (k WaitKind) String() string { return task.WaitKind(k).String() }

// MarshalText writes the kind's name.
func (k WaitKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *WaitKind) UnmarshalText(b []byte) error {
	v, err := task.ParseWaitKind(string(b))
	*k = WaitKind(v)
	return err
}

// WaitReason is why a pending task has not started, from where the
// scheduler decided it: its dependencies, its place in the queue, the
// admission of GPU tasks, its retry delay.
type WaitReason struct {
	Kind WaitKind `json:"kind"`
	// Detail says more, for a person (see the kinds).
	Detail string `json:"detail,omitempty"`
	// Until, for WaitRetryDelay and WaitBackoff, is when the task may
	// start again.
	Until time.Time `json:"until,omitzero"`
}

// String says why the task waits, for a person: "waiting for prep,
// fetch", "waiting for a free slot", "needs 24000 MiB; best card 1 has
// 5047 MiB left (...)", "retry at 10:14:49 after: exit code 1".
func (w WaitReason) String() string { return w.internal().Text(time.Time{}) }

// Event is a committed transition, as given to an observer (WithObserver).
type Event struct {
	// Seq numbers the events of a scheduler's life in commit order (1, 2,
	// 3...; a scheduler opened again starts at 1). A subscriber resumes
	// after the last one it read (Scheduler.Subscribe).
	Seq  uint64
	Time time.Time
	Kind EventKind
	// TaskID is the task concerned; empty for the events about GPUs.
	TaskID string
	// Attempt is the attempt concerned: for EventStarted, EventAdopted,
	// EventJob, and for the end of an attempt (EventComplete,
	// EventRetrying, EventFailed, and EventCancelled of a running task).
	// Its Number is 0 otherwise.
	Attempt Attempt
	// BlockedBy, for EventBlocked, names the failed or cancelled task, or
	// for a task not needed the one that completed.
	BlockedBy string
	// NotNeeded, for EventBlocked: the task is not needed
	// (Record.NotNeeded), which is no failure.
	NotNeeded bool
	// Error says why: a task that failed without an attempt, a task
	// blocked, a completion handler that failed, a card quarantined, the
	// GPUs unreadable.
	Error string
	// Rerun, for EventStarted, says why a task that ran before runs again.
	Rerun string
	// Card, for EventCardQuarantined, is the card's index.
	Card int
	// RetryAt, for EventRetrying, is when the next attempt may start at the
	// earliest (a retry delay, or a back-off after a fault of the
	// environment); zero when it may start at once.
	RetryAt time.Time
	// Ended, for EventAdopted: the attempt had ended while no scheduler
	// watched it.
	Ended bool
	// Submitted, for the end of a task (EventComplete, EventFailed,
	// EventBlocked, EventCancelled), is when it was last submitted, as its
	// Record says.
	Submitted time.Time
	// Notification, for EventDeliveryFailed, says what failed to be
	// delivered: "complete" (a completion handler, on_complete),
	// "failure" (a failure event handler, on_failure), "run-end"
	// (on_run_end) or "webhook". GaveUp: it will not be tried again (a
	// webhook, after WebhookTries failures).
	Notification string
	GaveUp       bool
}

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of events.
const (
	EventStarted   EventKind = iota + 1 // an attempt started
	EventRetrying                       // an attempt failed; the task runs again
	EventComplete                       // the task completed
	EventFailed                         // the task failed for good
	EventBlocked                        // a dependency's condition can no longer be met (it failed or was cancelled; or NotNeeded)
	EventCancelled                      // the task was cancelled
	// EventDeliveryFailed: a notification could not be delivered (a
	// completion or failure handler failed, on_run_end, a webhook); it
	// will be delivered again unless Event.GaveUp.
	EventDeliveryFailed
	// EventCardQuarantined: a GPU went into quarantine; Event.Card says
	// which, Event.Error why and until when.
	EventCardQuarantined
	// EventGPUUnknown: the GPUs cannot be read (Event.Error says why, e.g.
	// "nvidia-smi timed out after 10s; GPU tasks wait"); CPU tasks go on.
	EventGPUUnknown
	// EventGPUKnown: the GPUs can be read again after EventGPUUnknown.
	EventGPUKnown
	// EventAdopted: an attempt that an earlier scheduler on this run
	// directory left running was adopted: it runs on, watched by this one
	// (Event.Attempt.Start is its real start). With Event.Ended, it had
	// ended while no scheduler watched, and its end follows, recorded from
	// its result.
	EventAdopted
	// EventJob: what the batch system running an attempt (Slurm) says of
	// it changed: Event.Attempt.Job has its job id, state, node and why
	// it waits. A running task's attempt may wait there before its
	// command starts (its Record.Waiting is then WaitQueued).
	EventJob
)

var eventKindNames = [...]string{EventStarted: "started", EventRetrying: "retrying", EventComplete: "complete",
	EventFailed: "failed", EventBlocked: "blocked", EventCancelled: "cancelled", EventDeliveryFailed: "event-failed",
	EventCardQuarantined: "card-quarantined", EventGPUUnknown: "gpu-unknown", EventGPUKnown: "gpu-known",
	EventAdopted: "adopted", EventJob: "job"}

// String returns the kind's name, as --events writes it, e.g. "started".
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }
