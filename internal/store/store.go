package store

import (
	"errors"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// Store persists a run's state. Implementations are used by one goroutine at
// a time (the engine's loop); a reader in another process opens its own.
type Store interface {
	// Load returns every persisted task, in submission order.
	Load() ([]Row, error)
	// PendingEvents returns the outbox events not yet acknowledged, in the
	// order they were created, and the largest event id ever used.
	PendingEvents() (pending []EventWrite, maxID int64, err error)
	// LookupTask returns one persisted task, as Load would return it, and
	// whether it exists. The engine reads tasks it retired from memory so.
	LookupTask(id string) (Row, bool, error)
	// LookupMeta returns the value saved for a run-wide fact (Batch.Meta),
	// and whether one is saved.
	LookupMeta(key string) (string, bool, error)
	// Apply writes a batch atomically: all of it or none of it.
	Apply(b *Batch) error
	// Close releases the store; further calls fail.
	Close() error
}

// Row is one persisted task.
type Row struct {
	Seq  int64
	Spec []byte // the task's definition as JSON, as given to TaskWrite
	// GPURequestMiB is the GPU memory its next attempt asks for when it
	// differs from the definition's (it grew after running out of memory).
	GPURequestMiB int64
	// Fingerprint is the digest of the definition it last ran with.
	Fingerprint string
	// Kind is the task's kind, as in its definition.
	Kind string
	// Inputs are the files the task read (task.Spec.Inputs), as they were
	// when the attempt that completed it started, sorted by path; nil if
	// none were recorded.
	Inputs []task.Input
	task.Record
	// Handles holds the executors' handles of attempts, by attempt number,
	// so a restarted scheduler can find an attempt it lost. Attempts with
	// no handle are absent.
	Handles map[int]executor.Handle
}

// Batch is a set of writes applied in one transaction. Writes are upserts of
// whole rows, so applying a batch twice has the same effect as once.
type Batch struct {
	Tasks    []TaskWrite
	Attempts []AttemptWrite
	// Cards, when not nil, replaces the saved view of the GPUs.
	Cards []gpu.CardView
	// Meta sets run-wide facts by key (e.g. why the GPU state is unknown);
	// an empty value deletes the key.
	Meta map[string]string
	// Samples are readings of the cards over time, for reports.
	Samples []Sample
	// Events are outbox events to insert or update.
	Events []EventWrite
	// Inputs replace the stored inputs of tasks, written after Tasks (a
	// task may be new in the same batch). They are apart from TaskWrite,
	// of which a submission holds one per task, since only a completion
	// sets them.
	Inputs []InputsWrite
	// ClearWaiting, applied before the batch's task writes, forgets every
	// stored task's waiting reason: a scheduler that opens the store has
	// decided nothing yet about the tasks an earlier one left pending.
	ClearWaiting bool
	// ClearWaitingOf forgets the stored waiting reasons of these tasks,
	// before the batch's task writes: ClearWaiting for a few rows, where
	// the batch rewrites the others anyway.
	ClearWaitingOf []string
}

// InputsWrite sets the inputs a task read (task.Input), replacing those
// stored; none: it read nothing.
type InputsWrite struct {
	TaskID string
	Inputs []task.Input
}

// EventWrite is one event of the outbox: written in the same transaction
// as what it reports (a task's completion or failure, a run's end),
// acknowledged once delivered.
type EventWrite struct {
	ID int64
	// Kind says what delivers the event: EventComplete, EventFailure,
	// EventRunEnd or EventWebhook. Rows written before kinds existed read
	// back as EventComplete.
	Kind string
	// TaskID is the task the event is about; empty for one about the run
	// or the cards.
	TaskID    string
	Attempt   int
	Created   time.Time
	Acked     time.Time // zero until delivered (or given up)
	Tries     int       // failed deliveries so far
	LastError string
	NextTry   time.Time // after a failure: not before
	// Payload is what the event carries for its deliverer (JSON), kept as
	// written; empty for completion events.
	Payload []byte
	// GaveUp: the event was acknowledged without being delivered, its
	// tries spent (webhooks give up; handlers never do).
	GaveUp bool
}

// The kinds of outbox events, saved as these strings.
const (
	// EventComplete: a task completed; for its kind's completion handler
	// (the command kind's on_complete).
	EventComplete = "complete"
	// EventFailure: a task failed for good; for its kind's failure event
	// handler (the command kind's on_failure).
	EventFailure = "failure"
	// EventRunEnd: a run ended; for the run's on_run_end command.
	EventRunEnd = "run-end"
	// EventWebhook: a POST to a webhook; the payload says where and what.
	EventWebhook = "webhook"
)

// Sample is one card's memory at one moment, as admission saw it.
type Sample struct {
	At          time.Time
	Index       int
	TotalMiB    int64
	UsedMiB     int64 // memory.used as nvidia-smi reported it
	ForeignMiB  int64
	ObservedMiB int64 // what our tasks' processes were seen to use
	ChargedMiB  int64 // what our running tasks were charged
	CapacityMiB int64
}

// TaskWrite sets a task's row. Spec nil keeps the stored definition.
type TaskWrite struct {
	ID          string
	Submitted   time.Time
	Fingerprint string // "": keep the stored one
	Rerun       string
	RetryAt     time.Time // zero: none
	// Artifacts replace the stored ones when ArtifactsSet.
	Artifacts     []task.Artifact
	ArtifactsSet  bool
	GPURequestMiB int64 // 0: as the definition says
	Seq           int64
	Kind          string
	Spec          []byte
	State         task.State
	ExitCode      *int
	Error         string
	BlockedBy     string
	// NotNeeded: a blocked task that was not needed (task.Record's).
	NotNeeded bool
	// WaitKind and WaitDetail are why a pending task has not started
	// (NotWaiting: it does not wait). A reader gets them back as the
	// row's Waiting, its Until being RetryAt for the kinds that wait for
	// one.
	WaitKind   task.WaitKind
	WaitDetail string
	// Paused: the task is paused (a reader gets it back as the row's
	// Paused); a scheduler opening the store does not start it.
	Paused bool
}

// AttemptWrite sets one attempt's row.
type AttemptWrite struct {
	TaskID string
	task.Attempt
	// Handle is the executor's handle of the attempt, kept as data; zero:
	// none (a handle written before is removed).
	Handle executor.Handle
}

// Len is the number of writes in the batch.
func (b *Batch) Len() int {
	n := len(b.Tasks) + len(b.Attempts) + len(b.Meta) + len(b.Samples) + len(b.Events) + len(b.Inputs)
	if b.Cards != nil {
		n++
	}
	if b.ClearWaiting {
		n++
	}
	return n + len(b.ClearWaitingOf)
}

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset() {
	clear(b.Tasks)
	clear(b.Attempts)
	b.Tasks = b.Tasks[:0]
	b.Attempts = b.Attempts[:0]
	b.Cards, b.Meta, b.Samples, b.ClearWaiting, b.ClearWaitingOf = nil, nil, nil, false, nil
	clear(b.Events)
	b.Events = b.Events[:0]
	clear(b.Inputs)
	b.Inputs = b.Inputs[:0]
}

// Meta keys.
const (
	// MetaGPUUnknown holds why the GPU state cannot be read, while it cannot.
	MetaGPUUnknown = "gpu_unknown"
	// MetaWaitingStale, while set, says that the saved waiting reasons are
	// an earlier scheduler's, not current: a scheduler that opened the
	// store sets it in its first commit and removes it in the commit that
	// forgets them (ClearWaiting, ClearWaitingOf) beside its own first
	// decisions. Readers (Load, LookupTask, CountWaiting) show no reason
	// while it is set.
	MetaWaitingStale = "waiting_stale"
	// MetaGPUTopology holds why the cards' topology (nvidia-smi topo -m)
	// could not be read, when it could not: tasks on several cards then
	// get cards without regard to how close they are.
	MetaGPUTopology = "gpu_topology"
	// MetaSubmitKey prefixes the key of a submitted batch (an idempotency
	// key); the value is a digest of the batch's task ids.
	MetaSubmitKey = "submit_key:"
)

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("store closed")

// stored returns a waiting reason as a reader gets it back: its Until is
// the task's RetryAt for the kinds that wait for one, zero for the others.
func stored(kind task.WaitKind, detail string, retryAt time.Time) task.WaitReason {
	w := task.WaitReason{Kind: kind, Detail: detail}
	if kind == task.WaitRetryDelay || kind == task.WaitBackoff {
		w.Until = retryAt
	}
	return w
}
