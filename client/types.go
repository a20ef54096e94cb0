package client

import (
	"fmt"
	"time"
)

// APIVersion is the version of the daemon's protocol this client speaks.
// The daemon serves a range of versions (Version.APIMin to APIMax);
// GET /v1/version and POST /v1/shutdown never change, so that any client
// can tell what runs and stop it.
const APIVersion = 1

// Version is what GET /v1/version answers: which gpusched serves, where,
// and the API versions it speaks.
type Version struct {
	Build    string    `json:"build"`   // the daemon's gpusched version
	APIMin   int       `json:"api_min"` // the oldest API version it serves
	APIMax   int       `json:"api_max"` // the newest
	PID      int       `json:"pid"`
	Mode     string    `json:"mode"` // "user" or "system"
	UID      int       `json:"uid"`  // the user it runs as
	Socket   string    `json:"socket"`
	StateDir string    `json:"state_dir"`
	Started  time.Time `json:"started"`
}

// Duration is a time.Duration written in JSON as Go writes durations
// ("90s", "1h30m").
type Duration time.Duration

// MarshalText writes the duration as "1h30m0s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration as time.ParseDuration does.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// Task is a task to submit. Zero values are the daemon's defaults.
type Task struct {
	// ID names the task within its run (letters, digits and "_.:@+=,-");
	// a command run's single task needs none.
	ID string `json:"id,omitempty"`
	// Command is the argv, run without a shell.
	Command []string `json:"command"`
	// Dependencies name tasks of the same run that must end first:
	// complete, unless DependencyOn says otherwise.
	Dependencies []string `json:"dependencies,omitempty"`
	// DependencyOn gives, by dependency (as Dependencies names it), when
	// it is satisfied if not by its completion: "failure" (it fails, is
	// cancelled or blocked) or "any" (it ends, whichever way); "success"
	// is the default.
	DependencyOn map[string]string `json:"dependency_on,omitempty"`
	// After names tasks of other runs, by the daemon's ids ("12",
	// "13/train"; a run's id means all its tasks), that must complete
	// first.
	After []string `json:"after,omitempty"`
	// AfterOn gives, by an id of After as given, when it is satisfied if
	// not by completion: "failure" or "any", as DependencyOn.
	AfterOn  map[string]string `json:"after_on,omitempty"`
	Priority int               `json:"priority,omitempty"` // higher starts first
	// GPUMiB is a GPU memory budget: the task needs a card with that much
	// free. Exclusive asks for a card to itself. Neither: a CPU task.
	GPUMiB    int64 `json:"gpu_mib,omitempty"`
	Exclusive bool  `json:"exclusive,omitempty"`
	// GPUs is how many cards a GPU task takes, all at once, each with
	// GPUMiB free (exclusive: to itself); 0 or 1: one. A daemon that does
	// not know it refuses the task rather than run it on one card.
	GPUs int `json:"gpus,omitempty"`
	// GPUMiBAuto: a GPU task whose budget the daemon learns from the
	// peaks of the same task in its owner's earlier runs (same id
	// within its run, command and dir); GPUMiB must be 0 then.
	// GPUMiBMax is the first budget and the most a learned one may be
	// (0: the scheduler's default first budget).
	GPUMiBAuto bool  `json:"gpu_mib_auto,omitempty"`
	GPUMiBMax  int64 `json:"gpu_mib_max,omitempty"`
	// CPUs is the cores the task takes of those the daemon gives tasks
	// (gpusched daemon --cpus); 0: 1. MemoryMiBHost is its host memory
	// budget, in MiB, of the daemon's --memory-mib-host; 0: none. Both
	// are budgets for admission: the process is not limited.
	CPUs          int   `json:"cpus,omitempty"`
	MemoryMiBHost int64 `json:"memory_mib_host,omitempty"`
	// MemoryMiBHostAuto: the daemon learns the host memory budget from
	// the peak resident memory of the same task in its owner's earlier
	// runs, as GPUMiBAuto does (MemoryMiBHost must be 0 then);
	// MemoryMiBHostMax is the first budget and the most a learned one
	// may be (0: the scheduler's default first budget).
	MemoryMiBHostAuto bool  `json:"memory_mib_host_auto,omitempty"`
	MemoryMiBHostMax  int64 `json:"memory_mib_host_max,omitempty"`
	// Resources are the units the task takes of the daemon's custom
	// resources ({"licenses": 1}), which the daemon declares (gpusched
	// daemon --resource licenses=2); one it does not declare is refused.
	Resources map[string]int `json:"resources,omitempty"`
	Timeout   Duration       `json:"timeout,omitempty"` // per attempt
	// Retries is how many extra attempts a failing task gets; nil: the
	// daemon's default.
	Retries          *int     `json:"retries,omitempty"`
	RetryDelay       Duration `json:"retry_delay,omitempty"`
	RetryOnExitCodes []int    `json:"retry_on_exit_codes,omitempty"`
	RetryOnTimeout   bool     `json:"retry_on_timeout,omitempty"`
	// Env is added to the run's environment for this task.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory; empty: the run's.
	Dir           string   `json:"dir,omitempty"`
	Artifacts     []string `json:"artifacts,omitempty"`
	HashArtifacts bool     `json:"hash_artifacts,omitempty"`
	OnComplete    []string `json:"on_complete,omitempty"`
	OnFailure     []string `json:"on_failure,omitempty"`
}

// Run kinds.
const (
	KindCommand  = "command"  // one command (gpusched submit -- CMD)
	KindWorkflow = "workflow" // a workflow file's tasks
)

// RunRequest is the body of POST /v1/runs: one run to submit.
type RunRequest struct {
	Kind string `json:"kind"` // KindCommand (exactly one task) or KindWorkflow
	// Name is shown in the queue (everyone sees it): the workflow file,
	// or for a command its program unless given.
	Name string `json:"name,omitempty"`
	// Dir is the tasks' working directory unless they name theirs: the
	// submitter's at submit time. Empty: the daemon's.
	Dir string `json:"dir,omitempty"`
	// Env is the tasks' whole environment: the submitter's at submit
	// time. Null (absent): the daemon's own.
	Env   map[string]string `json:"env"`
	Tasks []Task            `json:"tasks"`
	// Key, if not empty, makes the submission harmless to repeat: the
	// same key again returns the run it made.
	Key string `json:"key,omitempty"`
}

// Submitted is the answer to a submission: the run's id and its tasks'
// ids, as the daemon prints them.
type Submitted struct {
	Run   string   `json:"run"`
	Tasks []string `json:"tasks"`
}

// TaskInfo is a task as the queue shows it. Command and Dir are given to
// the task's owner and root only.
type TaskInfo struct {
	ID       string `json:"id"`   // "12" for a command run, "13/train" for a workflow's task
	Run      string `json:"run"`  // "12"
	Kind     string `json:"kind"` // the run's kind
	Name     string `json:"name"` // the run's name, or the workflow task's id
	Owner    string `json:"owner"`
	UID      int    `json:"uid"`
	State    string `json:"state"` // pending, running, complete, failed, blocked, cancelled
	Attempts int    `json:"attempts"`
	ExitCode *int   `json:"exit_code"`
	GPU      *int   `json:"gpu"` // the card of its last attempt; the first, for one on several
	// GPUs are the cards of its last attempt when it ran on several
	// (resources.gpus), in the order chosen (CUDA_VISIBLE_DEVICES's), GPU
	// first; absent for an attempt on one card or none.
	GPUs []int `json:"gpus,omitempty"`
	// Waiting says why a pending task waits, when known: "after 13/prep
	// (any outcome)" names the dependencies not ended yet, each with its
	// condition when not success (as gpusched status says it).
	Waiting string `json:"waiting"`
	// WaitingKind names the reason's kind: dependencies, slot, gpu-memory,
	// card-reserved, card-unavailable, gpu-unknown, retry-delay, backoff,
	// paused.
	WaitingKind string `json:"waiting_kind,omitempty"`
	// Paused: the task was paused (gpusched pause) and not resumed: a
	// pending one does not start, a running one runs on (stopped, with
	// pause --stop) and does not start again.
	Paused    bool       `json:"paused,omitempty"`
	Error     string     `json:"error,omitempty"`
	BlockedBy string     `json:"blocked_by,omitempty"`
	NotNeeded bool       `json:"not_needed,omitempty"` // blocked, as not needed (a clean-up after a success): no failure
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"` // the last attempt's start
	Ended     *time.Time `json:"ended,omitempty"`   // the last attempt's end
	// GPUMiB is, for a task not finished whose GPU memory budget is
	// learned from history (gpu_mib_auto), the budget the daemon chose;
	// GPUMiBSource says from what: "history" (learned from earlier
	// runs' peaks), "max" (gpu_mib_max: nothing to learn from yet),
	// "default" or "grown" (after running out of memory); GPUBudget says
	// it for a person, as gpusched status does ("memory_mib auto: 12544
	// MiB (peak 11000 MiB in 3 attempts + margin)"). Absent for other
	// tasks.
	GPUMiB       int64  `json:"gpu_mib,omitempty"`
	GPUMiBSource string `json:"gpu_mib_source,omitempty"`
	GPUBudget    string `json:"gpu_budget,omitempty"`
	// MemoryMiBHost, MemoryMiBHostSource and HostBudget are the same of
	// a host memory budget learned from history (memory_mib_host_auto):
	// HostBudget as gpusched status says it ("memory_mib_host auto: 768
	// MiB (peak 640 MiB in 2 attempts + margin)").
	MemoryMiBHost       int64  `json:"memory_mib_host,omitempty"`
	MemoryMiBHostSource string `json:"memory_mib_host_source,omitempty"`
	HostBudget          string `json:"host_budget,omitempty"`
	// Job is, for a task not finished whose attempt runs in a batch
	// system (Slurm), its job there as that system last said.
	Job     *Job     `json:"job,omitempty"`
	Command []string `json:"command,omitempty"`
	Dir     string   `json:"dir,omitempty"`
}

// Job is an attempt's job in a batch system (Slurm), as that system last
// said of it, in its own words.
type Job struct {
	System string `json:"system,omitempty"` // "Slurm"
	ID     string `json:"id"`               // empty while submission waits
	State  string `json:"state,omitempty"`  // PENDING, RUNNING, COMPLETING...
	Node   string `json:"node,omitempty"`   // where it runs, once known
	// Reason is why it waits (Priority, Resources...), or, before a job
	// exists, why submission waits.
	Reason string `json:"reason,omitempty"`
	// Queued: it waits there (or to be submitted there); its command has
	// not started.
	Queued bool `json:"queued,omitempty"`
}

// Finished reports whether nothing more happens to the task.
func (t *TaskInfo) Finished() bool {
	switch t.State {
	case "complete", "failed", "blocked", "cancelled":
		return true
	}
	return false
}

// Queue is the answer of GET /v1/tasks.
type Queue struct {
	Tasks []TaskInfo `json:"tasks"`
}

// QueueOptions select the tasks Queue returns. By default: the tasks not
// finished, of every user.
type QueueOptions struct {
	All    bool     // finished tasks too
	User   string   // only this user's (a name or a uid)
	States []string // only tasks in these states (then finished ones too)
	IDs    []string // only these tasks or runs
}

// RunInfo is a run as GET /v1/runs shows it; Dir goes to its owner and
// root only.
type RunInfo struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	UID     int       `json:"uid"`
	Created time.Time `json:"created"`
	Tasks   int       `json:"tasks"`
	Dir     string    `json:"dir,omitempty"`
}

// CancelRequest is the body of POST /v1/cancel and WaitRequest that of
// POST /v1/wait: tasks or runs by id.
type (
	CancelRequest struct {
		IDs []string `json:"ids"`
	}
	WaitRequest struct {
		IDs []string `json:"ids"`
	}
)

// PauseRequest is the body of POST /v1/pause: tasks or runs by id (none:
// every task of the caller's, every task for root); Stop also stops the
// running ones (SIGSTOP to their process groups).
type PauseRequest struct {
	IDs  []string `json:"ids"`
	Stop bool     `json:"stop,omitempty"`
}

// ResumeRequest is the body of POST /v1/resume (no ids: every paused task
// of the caller's, every one for root), and RetryRequest that of POST
// /v1/retry (ids required).
type (
	ResumeRequest struct {
		IDs []string `json:"ids"`
	}
	RetryRequest struct {
		IDs []string `json:"ids"`
	}
)

// Paused is the answer to a pause: the tasks it paused (or stopped);
// Resumed to a resume: the tasks it resumed; Retried to a retry: every
// task made pending again, the named ones and those they had blocked.
type (
	Paused struct {
		Paused []string `json:"paused"`
	}
	Resumed struct {
		Resumed []string `json:"resumed"`
	}
	Retried struct {
		Retried []string `json:"retried"`
	}
)

// Cancelled is the answer to a cancel: the tasks it stopped or that will
// never start (finished ones are left as they are).
type Cancelled struct {
	Cancelled []string `json:"cancelled"`
}

// WaitLine is one line of POST /v1/wait's stream: a task that finished
// (Task), then, once all have, End.
type WaitLine struct {
	Task *TaskInfo `json:"task,omitempty"`
	End  bool      `json:"end,omitempty"`
}

// LogLine is one line of GET /v1/logs's stream: Attempt when the log of
// an attempt begins, then its output as Text (UTF-8) or Data (other
// bytes, base64 in JSON), then End with the task's state once it ends
// (or, without follow, once the log is read).
type LogLine struct {
	Attempt int    `json:"attempt,omitempty"`
	Text    string `json:"text,omitempty"`
	Data    []byte `json:"data,omitempty"`
	End     bool   `json:"end,omitempty"`
	State   string `json:"state,omitempty"`
}

// Event is one line of GET /v1/events: a committed transition of a task
// (or news of the GPUs), numbered by Seq within the daemon's life.
type Event struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"` // started, retrying, complete, failed, blocked, cancelled, ...
	Task     string    `json:"task,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	GPU      *int      `json:"gpu,omitempty"` // the first, for an attempt on several cards
	// GPUs are, for an attempt on several cards, all of them, GPU first.
	GPUs []int `json:"gpus,omitempty"`
	// GPUMiB is the GPU memory the attempt was admitted with (its
	// budget: as asked, learned from history, or grown after running out
	// of memory); 0 when it has no card.
	GPUMiB    int64  `json:"gpu_mib,omitempty"`
	BlockedBy string `json:"blocked_by,omitempty"`
	NotNeeded bool   `json:"not_needed,omitempty"` // blocked, as not needed: no failure
	Error     string `json:"error,omitempty"`
}

// GPUs is the answer of GET /v1/gpus: the daemon's ledger of the cards
// ("daemon"), or, while it has not read them (no GPU task yet), a reading
// of nvidia-smi now ("live"). Error says why neither could be had.
type GPUs struct {
	Source string `json:"source"`
	Error  string `json:"error,omitempty"`
	Cards  []Card `json:"cards"`
}

// Card is one GPU as the daemon's admission sees it (the form of
// gpusched gpus --json).
type Card struct {
	Index        int       `json:"index"`
	UUID         string    `json:"uuid"`
	Name         string    `json:"name"`
	TotalMiB     int64     `json:"total_mib"`
	UsedMiB      int64     `json:"used_mib"`
	FreeMiB      int64     `json:"free_mib"`
	CapacityMiB  int64     `json:"capacity_mib"`
	ForeignMiB   int64     `json:"foreign_mib"`
	ForeignProcs int       `json:"foreign_procs"`
	ChargedMiB   int64     `json:"charged_mib"`
	AvailableMiB int64     `json:"available_mib"`
	Tasks        []Holding `json:"tasks"`
	Exclusive    bool      `json:"exclusive"`
	State        string    `json:"state"`
	Reason       string    `json:"reason,omitempty"`
	Until        time.Time `json:"until,omitzero"`
	ReservedFor  string    `json:"reserved_for,omitempty"`
}

// Holding is the GPU memory a running task holds on a card.
type Holding struct {
	Task        string `json:"task"`
	PID         int    `json:"pid,omitempty"`
	RequestMiB  int64  `json:"request_mib"`
	ObservedMiB int64  `json:"observed_mib"`
	PeakMiB     int64  `json:"peak_mib"`
	Exclusive   bool   `json:"exclusive,omitempty"`
}

// ShutdownRequest is the body of POST /v1/shutdown. Without KillTasks the
// daemon exits and its running tasks keep running, supervised, to be
// adopted by the next daemon on the state directory; with it they are
// stopped first (recorded cancelled). Pending tasks stay queued either way.
type ShutdownRequest struct {
	KillTasks bool `json:"kill_tasks,omitempty"`
}

// ShuttingDown is the answer to a shutdown: the daemon that is exiting.
type ShuttingDown struct {
	PID int `json:"pid"`
}

// ErrorBody is the body of every 4xx and 5xx answer: one line.
type ErrorBody struct {
	Error string `json:"error"`
}

// Budgets is the answer of GET /v1/budgets: what gpusched suggest shows
// of the daemon's history.
type Budgets struct {
	Budgets []Budget `json:"budgets"`
}

// Budget is what a task asked for of one memory resource and what it
// really used at peak, over its recent attempts in its owner's runs.
// "The same task" is the one memory_mib: auto learns from: the same
// owner, id within its run, command and dir; each is given once, by its
// newest run's task.
type Budget struct {
	Task    string   `json:"task"` // the newest run's task ("13/train", "12")
	Name    string   `json:"name"` // its id within its run (a command run's: its run's name)
	Owner   string   `json:"owner"`
	UID     int      `json:"uid"`
	Runs    int      `json:"runs"` // the runs of it whose attempts were read
	Command []string `json:"command"`
	Dir     string   `json:"dir"`
	// Resource is "memory_mib" (GPU memory) or "memory_mib_host" (host
	// memory); MemoryMiB, MemoryAuto and MemoryMaxMiB are its setting in
	// the newest run (MemoryMiB 0 with auto).
	Resource     string `json:"resource"`
	MemoryMiB    int64  `json:"memory_mib"`
	MemoryAuto   bool   `json:"memory_auto,omitempty"`
	MemoryMaxMiB int64  `json:"memory_mib_max,omitempty"`
	Exclusive    bool   `json:"exclusive,omitempty"`
	// AskedMiB is what its last attempt was admitted with, PeakMiB the
	// largest peak over the last Attempts attempts that ended by
	// themselves with a peak seen, ProposedMiB what an auto budget would
	// ask for now (0 with no such attempt), Flag "wasted", "oom-risk" or
	// empty. Ran: some attempt of it started.
	AskedMiB    int64  `json:"asked_mib"`
	PeakMiB     int64  `json:"peak_mib"`
	Attempts    int    `json:"attempts"`
	ProposedMiB int64  `json:"proposed_mib"`
	Flag        string `json:"flag,omitempty"`
	Ran         bool   `json:"ran"`
}
