package gpusched

import (
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/task"
)

// TaskSpec describes one task. See the field comments for defaults: the zero
// value of every field but ID is usable.
type TaskSpec = task.Spec

// ResourceRequest is what a task needs to start: its device ("cpu" or
// "cuda"), for CUDA tasks a GPU memory budget in MiB (used for admission, not
// enforced as a limit), and whether it needs a card to itself.
type ResourceRequest = task.ResourceRequest

// Device is "cpu" or "cuda".
type Device = task.Device

// The devices.
const (
	CPU  = task.CPU
	CUDA = task.CUDA
)

// NoTimeout as TaskSpec.Timeout means no timeout even if the queue has a
// default; NoRetries as TaskSpec.Retries means no retries; NoRetryDelay as
// TaskSpec.RetryDelay means retry at once.
const (
	NoTimeout    = task.NoTimeout
	NoRetries    = task.NoRetries
	NoRetryDelay = task.NoRetryDelay
)

// Record is what happened to a task: its state, every attempt, the last exit
// code, and why it failed or was blocked.
type Record = task.Record

// Attempt is one execution of a task.
type Attempt = task.Attempt

// State is where a task stands: pending, running, complete, failed, blocked
// or cancelled.
type State = task.State

// The task states.
const (
	StatePending   = task.Pending
	StateRunning   = task.Running
	StateComplete  = task.Complete
	StateFailed    = task.Failed
	StateBlocked   = task.Blocked
	StateCancelled = task.Cancelled
)

// Event is a committed transition, as given to an observer (WithObserver).
type Event = engine.Event

// EventKind says what an Event reports.
type EventKind = engine.EventKind

// The kinds of events.
const (
	EventStarted   = engine.Started
	EventRetrying  = engine.Retrying
	EventComplete  = engine.Completed
	EventFailed    = engine.Failed
	EventBlocked   = engine.TaskBlocked
	EventCancelled = engine.TaskCancelled
	// EventDeliveryFailed: a completion handler failed; the event will be
	// delivered again.
	EventDeliveryFailed = engine.DeliveryFailed
	// EventCardQuarantined: a GPU went into quarantine; Event.Card says
	// which, Event.Error why and until when.
	EventCardQuarantined = engine.CardQuarantined
	// EventGPUUnknown: the GPUs cannot be read (Event.Error says why, e.g.
	// "nvidia-smi timed out after 10s; GPU tasks wait"); CPU tasks go on.
	EventGPUUnknown = engine.GPUUnknown
	// EventGPUKnown: the GPUs can be read again after EventGPUUnknown.
	EventGPUKnown = engine.GPUKnown
)
