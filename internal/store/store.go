package store

import (
	"errors"

	"github.com/gpusched/gpusched/internal/task"
)

// Store persists a run's state. Implementations are used by one goroutine at
// a time (the engine's loop); a reader in another process opens its own.
type Store interface {
	// Load returns every persisted task, in submission order.
	Load() ([]Row, error)
	// Apply writes a batch atomically: all of it or none of it.
	Apply(b *Batch) error
	// Close releases the store; further calls fail.
	Close() error
}

// Row is one persisted task.
type Row struct {
	Seq  int64
	Spec []byte // the task's definition as JSON, as given to TaskWrite
	task.Record
	// Handles holds the process handles of attempts, by attempt number, so
	// a restarted scheduler can find processes of an attempt it lost.
	Handles map[int]Handle
}

// Handle identifies an attempt's process group beyond doubt: the PID alone
// may have been reused after a reboot or a long time, the start time (in
// clock ticks since boot, from /proc/PID/stat) tells.
type Handle struct {
	PID        int
	PGID       int
	StartTicks uint64
}

// Batch is a set of writes applied in one transaction. Writes are upserts of
// whole rows, so applying a batch twice has the same effect as once.
type Batch struct {
	Tasks    []TaskWrite
	Attempts []AttemptWrite
}

// TaskWrite sets a task's row. Spec nil keeps the stored definition.
type TaskWrite struct {
	ID        string
	Seq       int64
	Kind      string
	Spec      []byte
	State     task.State
	ExitCode  *int
	Error     string
	BlockedBy string
}

// AttemptWrite sets one attempt's row.
type AttemptWrite struct {
	TaskID string
	task.Attempt
	Handle Handle
}

// Len is the number of writes in the batch.
func (b *Batch) Len() int { return len(b.Tasks) + len(b.Attempts) }

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset() {
	clear(b.Tasks)
	clear(b.Attempts)
	b.Tasks = b.Tasks[:0]
	b.Attempts = b.Attempts[:0]
}

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("store closed")
