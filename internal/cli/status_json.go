package cli

import (
	"io"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// "gpusched status --json": the run's tasks and cards for other programs.

type taskJSON struct {
	ID       string     `json:"id"`
	State    task.State `json:"state"`
	Attempts int        `json:"attempts"`
	ExitCode *int       `json:"exit_code"`
	GPU      *int       `json:"gpu"`
	// GPUs are, for an attempt on several cards, every one of them in
	// the order chosen (gpu is the first); absent otherwise.
	GPUs      []int  `json:"gpus,omitempty"`
	Error     string `json:"error,omitempty"`
	BlockedBy string `json:"blocked_by,omitempty"`
	Waiting   string `json:"waiting,omitempty"`
	// WaitingKind is the kind of the scheduler's reason ("dependencies",
	// "slot", "gpu-memory", ...), while a scheduler runs.
	WaitingKind  task.WaitKind `json:"waiting_kind,omitempty"`
	RetryAt      *time.Time    `json:"retry_at,omitempty"` // pending after a failure: its next attempt starts no earlier
	Rerun        string        `json:"rerun,omitempty"`
	Events       []eventJSON   `json:"events_pending,omitempty"`
	Dependencies []string      `json:"dependencies"`
	Priority     int           `json:"priority"`
	MemoryMiB    int64         `json:"memory_mib,omitempty"`
	// MemorySource says how a budget learned from history (memory_mib:
	// auto) was chosen when the task was last submitted.
	MemorySource string `json:"memory_mib_source,omitempty"`
	// MemoryMiBHost and MemoryHostSource are the same for a host memory
	// budget learned from history (memory_mib_host: auto).
	MemoryMiBHost    int64      `json:"memory_mib_host,omitempty"`
	MemoryHostSource string     `json:"memory_mib_host_source,omitempty"`
	Started          *time.Time `json:"started"`
	Ended            *time.Time `json:"ended"`
	Log              *string    `json:"log"`
	// Job is the last attempt's job in a batch system (Slurm), as that
	// system last said: {"system", "id", "state", "node", "reason",
	// "queued"}; absent for a task run here. Each attempt of history
	// has its own.
	Job     *task.RemoteJob `json:"job,omitempty"`
	History []task.Attempt  `json:"history"`
	// DependencyOn gives the conditions of the dependencies that need
	// not complete: {"train-3": "any", "prep": "failure"}.
	DependencyOn map[string]gpusched.DependencyCondition `json:"dependency_on,omitempty"`
	// NotNeeded: blocked because a dependency's condition can no longer
	// be met, with no failure behind it (a clean-up after a success).
	NotNeeded bool `json:"not_needed,omitempty"`
}

// eventJSON is an event of the task's not yet delivered.
type eventJSON struct {
	ID        int64      `json:"id"`
	Kind      string     `json:"kind"` // complete, failure (on_failure) or webhook
	Attempt   int        `json:"attempt"`
	Tries     int        `json:"failed_tries"`
	LastError string     `json:"last_error,omitempty"`
	NextTry   *time.Time `json:"next_try,omitempty"`
}

// statusJSON is the document "status --json" prints.
type statusJSON struct {
	RunDir string `json:"run_dir"`
	// SchedulerPID is the running scheduler's PID, null if none runs
	// (then "running" tasks were interrupted and will run again).
	SchedulerPID *int           `json:"scheduler_pid"`
	Tasks        []taskJSON     `json:"tasks"`
	GPUs         []gpu.CardView `json:"gpus"`
	// GPUsAsOf is when the scheduler saved its view of the cards;
	// with no scheduler running, that view is of the past.
	GPUsAsOf   *time.Time `json:"gpus_as_of,omitempty"`
	GPUUnknown string     `json:"gpu_unknown,omitempty"`
	// GPUTopology is why the cards' topology (nvidia-smi topo -m)
	// could not be read, when it could not: tasks on several cards
	// then get cards without regard to how close they are.
	GPUTopology string `json:"gpu_topology,omitempty"`
}

// writeStatusJSON writes the status of the run v as JSON, indented by two
// spaces, as json.Encoder with SetIndent("", "  ") writes statusJSON
// (writeStatusDoc): one task at a time, without the whole document in
// memory.
func writeStatusJSON(w io.Writer, v *runView) error {
	doc := v.statusHead()
	return writeStatusDoc(w, &doc, len(v.rows), v.taskJSON)
}

// statusHead is the status document of v without its tasks.
func (v *runView) statusHead() statusJSON {
	doc := statusJSON{RunDir: v.dir, GPUs: v.cards, GPUUnknown: v.unknown, GPUTopology: v.topology}
	if v.pid > 0 {
		pid := v.pid
		doc.SchedulerPID = &pid
	}
	if !v.cardsAt.IsZero() {
		at := v.cardsAt
		doc.GPUsAsOf = &at
	}
	if doc.GPUs == nil {
		doc.GPUs = []gpu.CardView{}
	}
	return doc
}

// taskJSON is the i-th task of v as the status document shows it.
func (v *runView) taskJSON(i int) taskJSON {
	r := &v.rows[i]
	var spec specView
	if i < len(v.specs) {
		spec = v.specs[i]
	}
	t := taskJSON{
		ID: r.ID, State: r.State, Attempts: len(r.Attempts), ExitCode: r.ExitCode,
		Error: r.Error, BlockedBy: r.BlockedBy, NotNeeded: r.NotNeeded, Waiting: v.waitingNote(&r.Record), WaitingKind: v.waitingKind(&r.Record), Rerun: r.Rerun,
		Dependencies: spec.Dependencies, DependencyOn: spec.DependencyOn, Priority: spec.Priority, History: r.Attempts,
	}
	if spec.Resources.GPU() {
		t.MemoryMiB = max(spec.Resources.MemoryMiB, r.GPURequestMiB)
		t.MemorySource = gpuBudgetNote(spec.Resources)
	}
	if spec.Resources.MemoryHostAuto {
		t.MemoryMiBHost, t.MemoryHostSource = spec.Resources.MemoryMiBHost, hostBudgetNote(spec.Resources)
	}
	if r.State == task.Pending && !r.RetryAt.IsZero() {
		at := r.RetryAt
		t.RetryAt = &at
	}
	for _, ev := range v.pending[r.ID] {
		e := eventJSON{ID: ev.ID, Kind: ev.Kind, Attempt: ev.Attempt, Tries: ev.Tries, LastError: ev.LastError}
		if !ev.NextTry.IsZero() {
			next := ev.NextTry
			e.NextTry = &next
		}
		t.Events = append(t.Events, e)
	}
	if t.Dependencies == nil {
		t.Dependencies = []string{}
	}
	if t.History == nil {
		t.History = []task.Attempt{}
	}
	if a := r.LastAttempt(); a != nil {
		t.GPU, t.GPUs = a.GPU, a.GPUs
		start := a.Start
		t.Started = &start
		if a.Ended() {
			end := a.End
			t.Ended = &end
		}
		if a.LogPath != "" {
			lp := a.LogPath
			t.Log = &lp
		}
		t.Job = a.Job
	}
	return t
}
