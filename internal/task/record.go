package task

import (
	"fmt"
	"strconv"
	"time"
)

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
	// NotCharged is set when the attempt failed for a reason that is not
	// the task's own (the environment could not set it up: too many open
	// files, a log folder that cannot be created; or another process took
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
	// PID is the process id of the attempt's leader, when it started.
	PID int `json:"pid,omitempty"`
	// GPU is the index of the card the attempt ran on; nil for CPU tasks.
	// For an attempt on several cards, the first of them.
	GPU *int `json:"gpu"`
	// GPUs are, for an attempt on several cards (resources.gpus), the
	// indices of all of them in the order chosen (CUDA_VISIBLE_DEVICES's),
	// GPU first; nil for an attempt on one card or none (see Cards).
	GPUs []int `json:"gpus,omitempty"`
	// GPUUUID is the UUID of the card GPU names.
	GPUUUID string `json:"gpu_uuid,omitempty"`
	// MemRequestedMiB is the GPU memory the attempt was admitted with (the
	// task's budget, or more after an out-of-memory failure).
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

// RemoteJob is an attempt's job in a batch system (Slurm), as that system
// last said of it. The strings are the system's own words.
type RemoteJob struct {
	// System names the batch system for people: "Slurm".
	System string `json:"system,omitempty"`
	// ID is the job's id there; empty while submission waits.
	ID string `json:"id"`
	// State is the job's state there: PENDING, RUNNING, COMPLETING...
	State string `json:"state,omitempty"`
	// Node is where it runs or ran, once known.
	Node string `json:"node,omitempty"`
	// Reason is why it waits (Priority, Resources, BeginTime...), or,
	// before a job exists, why submission waits.
	Reason string `json:"reason,omitempty"`
	// Queued: the attempt waits there (or to be submitted there); its
	// command has not started.
	Queued bool `json:"queued,omitempty"`
}

// Ended reports whether the attempt has finished.
func (a *Attempt) Ended() bool { return !a.End.IsZero() }

// An attempt whose peak RSS is more than HostMemoryOverFactor times its
// host memory budget is reported (status, the run's summary): its budget
// is far from what it uses, and admission that trusts it may overload the
// machine's memory. Sums of RSS count pages that processes share once per
// process, hence a factor well above 1.
const HostMemoryOverFactor = 1.5

// OverHostMemory reports whether the attempt's peak RSS went over its host
// memory budget by far (HostMemoryOverFactor); false when it declared no
// budget.
func (a *Attempt) OverHostMemory() bool {
	return a.HostMemRequestedMiB > 0 && float64(a.RSSPeakMiB) > HostMemoryOverFactor*float64(a.HostMemRequestedMiB)
}

// HostMemoryNote says, for a person, that the attempt used far more host
// memory than it declared: "peak RSS 4210 MiB, 2.8x its memory_mib_host
// of 1500 MiB"; "" when it did not (OverHostMemory).
func (a *Attempt) HostMemoryNote() string {
	if !a.OverHostMemory() {
		return ""
	}
	return fmt.Sprintf("peak RSS %d MiB, %.1fx its memory_mib_host of %d MiB",
		a.RSSPeakMiB, float64(a.RSSPeakMiB)/float64(a.HostMemRequestedMiB), a.HostMemRequestedMiB)
}

// Cards returns the indices of every card the attempt ran on: GPUs, or
// GPU alone, or nil for an attempt on no card of this machine.
func (a *Attempt) Cards() []int {
	switch {
	case len(a.GPUs) > 0:
		return a.GPUs
	case a.GPU != nil:
		return []int{*a.GPU}
	}
	return nil
}

// CardList writes card indices as people and the status table read them:
// "3,1"; "" for none.
func CardList(cards []int) string {
	b := make([]byte, 0, 3*len(cards))
	for i, c := range cards {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return string(b)
}

// Record is what happened to a task.
type Record struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// Paused: the task was paused (a daemon's pause) and not resumed
	// since. A paused pending task does not start (it waits, WaitPaused);
	// a paused running one runs on, and waits paused if it is to run
	// again. A task that finishes is no longer paused.
	Paused bool `json:"paused,omitempty"`
	// NotNeeded: the task is blocked because the condition of one of its
	// dependencies can no longer be met and no failure is behind that: it
	// runs on the failure of a dependency that completed (BlockedBy), or
	// after one that was not needed either. It is not a failure of the run.
	NotNeeded bool `json:"not_needed,omitempty"`
	// Attempts lists every attempt, oldest first, including those of
	// earlier runs on the same run directory.
	Attempts []Attempt `json:"attempts"`
	// ExitCode is the exit code of the last finished attempt, if it exited.
	ExitCode *int `json:"exit_code"`
	// Error says why the task failed, was blocked or was cancelled.
	Error string `json:"error,omitempty"`
	// BlockedBy names the failed or cancelled task that blocked this one;
	// for a task blocked as NotNeeded, the task that completed.
	BlockedBy string `json:"blocked_by,omitempty"`
	// Submitted is when the task was (last) submitted.
	Submitted time.Time `json:"submitted,omitzero"`
	// Artifacts are the files it produced, as they were when it completed.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// RetryAt is when a pending task that failed may start again, while
	// it waits out its retry delay (or a back-off after a fault of the
	// environment); zero otherwise.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Rerun says why a task that had run before on this run directory ran
	// (or runs) again in the latest run ("definition changed: args",
	// "artifact missing: out/x", ...); empty when it was kept or is new.
	Rerun string `json:"rerun,omitempty"`
	// Waiting is why a pending task has not started, as the scheduler's
	// loop last decided; for a running task, WaitQueued while its attempt
	// waits in the batch system that runs it; the zero value otherwise.
	Waiting WaitReason `json:"waiting,omitzero"`
}

// OK reports whether the task ended as its run wants: it completed, or
// it was blocked as not needed.
func (r Record) OK() bool {
	return r.State == Complete || r.State == Blocked && r.NotNeeded
}

// Artifact is a file a task produced, as it was when the task completed.
type Artifact struct {
	Path    string    `json:"path"` // as the task spec lists it
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	SHA256  string    `json:"sha256,omitempty"` // when the task asked for hashing
}

// Input is one file a task read, as it was when its attempt started: its
// path as the task's inputs name it (a file that a glob or a folder
// found is named by its path under the task's dir), its size and
// modification time, and its SHA-256 when the task hashes its inputs.
type Input struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	SHA256  string    `json:"sha256,omitempty"`
}

// LastAttempt returns the most recent attempt, or nil if none ran.
func (r *Record) LastAttempt() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}
