package gpusched

import (
	"cmp"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/hostres"
	"github.com/gpusched/gpusched/internal/task"
)

// Scheduling holds the queue's settings. The zero value is valid: every
// field has a default.
type Scheduling struct {
	// MaxParallelTasks bounds the attempts running at once. Default: the
	// number of CPUs.
	MaxParallelTasks int
	// Order is how ready tasks of one priority are taken: OrderSubmitted
	// (the default: in submission order, a workflow file's order) or
	// OrderLongestFirst (the longest estimated run time first, then
	// submission: what "gpusched run" does unless the workflow says
	// otherwise, since a workflow is a batch known from the start). See
	// docs/gpu.md, "Order within a batch".
	Order string
	// DefaultTimeout bounds each attempt of a task that sets no Timeout.
	// Default 0: no timeout.
	DefaultTimeout time.Duration
	// DefaultRetries is the extra attempts of a failing task that sets no
	// Retries. Default 0.
	DefaultRetries int
	// KillGrace is the time between SIGTERM and SIGKILL when an attempt is
	// stopped. Default 10s.
	KillGrace time.Duration
	// DefaultRetryDelay is the wait before the first retry of a task that
	// sets no RetryDelay; each further retry waits twice as long, up to
	// RetryDelayMax. Default 1s; negative: none.
	DefaultRetryDelay time.Duration
	// RetryDelayMax caps the wait between retries. Default 1m.
	RetryDelayMax time.Duration
	// OnCompleteTimeout bounds each run of a completion handler (a task's
	// on_complete command); then it is stopped, the delivery counts as
	// failed and is tried again later. Default 1m; negative: none.
	OnCompleteTimeout time.Duration

	// Notifications (see Notifications in the README). Each is recorded
	// in the state database with what it reports and delivered at least
	// once; none of them can fail a task or a run.

	// OnRunEnd is an argv run once each Run ends, whether it ran to the
	// end or was stopped: the run's summary (RunSummary) as JSON on its
	// stdin, and its counts in its environment (GPUSCHED_RUN_TOTAL,
	// GPUSCHED_RUN_COMPLETE, _FAILED, _BLOCKED, _CANCELLED, _PENDING and
	// GPUSCHED_RUN_INTERRUPTED). OnCompleteTimeout bounds it. A Serve
	// (a daemon) has no end, so it never runs there.
	OnRunEnd []string
	// OnRunEndDir is OnRunEnd's working directory; empty: the scheduler's.
	// A workflow file sets it to the file's folder.
	OnRunEndDir string
	// Webhook is an http or https URL that is sent a POST with a JSON
	// body (WebhookEvent) when a task fails for good, when a Run ends and
	// when a card is quarantined; retried with backoff, given up after
	// WebhookTries failures.
	Webhook string

	// GPU admission (see docs/gpu.md). For the durations and sizes below,
	// 0 means the default and a negative value means none (or never).

	// GPUSafetyMarginMiB is kept free on every card. Default 512.
	GPUSafetyMarginMiB int64
	// GPUCooldown: after a task leaves a card nothing new starts there for
	// this long. Default 3s.
	GPUCooldown time.Duration
	// GPUPlacement is "spread" (the card with the most memory left; the
	// default) or "pack" (the least that still fits).
	GPUPlacement string
	// VisibleGPUs restricts the cards used, by index or UUID. Default: all.
	VisibleGPUs []string
	// GPUQuarantineAfter failed attempts in a row on a card quarantine it.
	// Default 3.
	GPUQuarantineAfter int
	// GPUQuarantineFor is how long a quarantine lasts. Default 10m.
	GPUQuarantineFor time.Duration
	// GPUPollInterval is how often nvidia-smi is read while GPU tasks wait
	// or run. Default 2s.
	GPUPollInterval time.Duration
	// GPUReserveAfter: a GPU task that does not fit may be passed over by
	// smaller ones for this long; then it reserves a card until it fits.
	// Default 1m.
	GPUReserveAfter time.Duration
	// GPUUnknownTimeout: GPU tasks waiting while nvidia-smi cannot be read
	// fail after this long rather than wait forever. Default 10m.
	GPUUnknownTimeout time.Duration
	// NvidiaSMITimeout bounds each nvidia-smi call. Default 10s.
	NvidiaSMITimeout time.Duration

	// Fair share between users (TaskSpec.Owner; see docs/daemon.md, "Fair
	// share"). Among ready tasks of equal priority, the owner who has used
	// the machine least lately goes first.

	// FairShareHalfLife is how long it takes an owner's usage to halve.
	// Default 1h.
	FairShareHalfLife time.Duration
	// UserMaxRunning caps the tasks one owner has running at once; a task
	// of an owner at the cap waits (WaitUserCap). Default 0: no cap.
	UserMaxRunning int
	// UserMaxGPUMiB caps the GPU memory charged to one owner's running
	// tasks; a task that would go over it waits (WaitUserCap), unless its
	// owner has none charged. Default 0: no cap.
	UserMaxGPUMiB int64

	// The machine's cores, host memory and custom resources (see
	// docs/workflow.md, "CPU, memory and custom resources"). A task
	// starts only when what it takes of each (ResourceRequest.CPUs,
	// MemoryMiBHost, Counters) fits in what the running tasks leave;
	// otherwise it waits (WaitCPU, WaitHostMemory, WaitResource). A task
	// that has waited GPUReserveAfter holds back what it needs.

	// CPUs is the cores running tasks may take together; a task takes 1
	// unless it asks for more. Default: the cores this process may use
	// (its CPU affinity, bounded by its cgroup's CPU quota), or
	// MaxParallelTasks when that is more, so that MaxParallelTasks tasks
	// that ask nothing run at once whatever the cores.
	CPUs int
	// MemoryMiBHost is what the host memory budgets of running tasks may
	// add up to, in MiB. Default: this process's cgroup memory limit, else
	// the machine's memory (MemTotal), less a tenth of it, at most 4 GiB,
	// left to the system.
	MemoryMiBHost int64
	// Resources declares custom resources by name, with the units each
	// has ({"licenses": 2}); a task takes units with
	// ResourceRequest.Counters. Default: none.
	Resources map[string]int
}

// The orders of Scheduling.Order.
const (
	// OrderSubmitted takes ready tasks of one priority in the order they
	// were submitted.
	OrderSubmitted = "submitted"
	// OrderLongestFirst takes ready tasks of one priority longest
	// estimated run time first, then in submission order. A task's
	// estimate is fixed when it is submitted: the longest run of its last
	// BudgetWindow attempts that ended by themselves (not timed out,
	// cancelled or interrupted), from the run directory or a
	// WithBudgetHistory function; else its own Timeout; else unknown, and
	// a task whose run time is unknown goes before those with an estimate.
	// To a task's estimate is added the longest chain of estimates of the
	// tasks submitted with it that wait for it, so that a short task
	// gating long work goes early.
	OrderLongestFirst = "longest_first"
)

// Defaults of the settings above.
const (
	DefaultKillGrace         = 10 * time.Second
	DefaultRetryDelay        = engine.DefaultRetryDelay
	DefaultRetryDelayMax     = engine.DefaultRetryDelayMax
	DefaultOnCompleteTimeout = engine.DefaultDeliverTimeout
)

// Validate reports the first invalid setting as a *SchedulingError.
func (s Scheduling) Validate() error {
	switch {
	case s.MaxParallelTasks < 0:
		return &SchedulingError{"max_parallel_tasks", "must be at least 1 (or 0 for the number of CPUs)"}
	case s.Order != "" && s.Order != OrderSubmitted && s.Order != OrderLongestFirst:
		return &SchedulingError{"order", fmt.Sprintf("must be %q or %q, not %q", OrderSubmitted, OrderLongestFirst, s.Order)}
	case s.DefaultTimeout < 0:
		return &SchedulingError{"timeout", "must not be negative"}
	case s.DefaultRetries < 0:
		return &SchedulingError{"retries", "must not be negative"}
	case s.KillGrace < 0:
		return &SchedulingError{"kill_grace", "must not be negative"}
	case s.RetryDelayMax < 0:
		return &SchedulingError{"retry_delay_max", "must not be negative"}
	case s.GPUPlacement != "" && s.GPUPlacement != "spread" && s.GPUPlacement != "pack":
		return &SchedulingError{"gpu_placement", fmt.Sprintf("must be \"spread\" or \"pack\", not %q", s.GPUPlacement)}
	case s.GPUPollInterval < 0:
		return &SchedulingError{"gpu_poll_interval", "must not be negative"}
	case s.NvidiaSMITimeout < 0:
		return &SchedulingError{"nvidia_smi_timeout", "must not be negative"}
	case s.FairShareHalfLife < 0:
		return &SchedulingError{"fair_share_half_life", "must not be negative (0 for the default, 1h)"}
	case s.UserMaxRunning < 0:
		return &SchedulingError{"user_max_running", "must not be negative (0 for no cap)"}
	case s.UserMaxGPUMiB < 0:
		return &SchedulingError{"user_max_gpu_mib", "must not be negative (0 for no cap)"}
	case s.CPUs < 0:
		return &SchedulingError{"cpus", "must not be negative (0 for the cores this process may use)"}
	case s.MemoryMiBHost < 0:
		return &SchedulingError{"memory_mib_host", "must not be negative (0 for the memory this process may use)"}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Resources)) {
		if why, ok := task.ValidResourceName(name); !ok {
			return &SchedulingError{"resources", why}
		}
		if n := s.Resources[name]; n < 1 {
			return &SchedulingError{"resources", fmt.Sprintf("%s must have at least 1 unit (got %d)", name, n)}
		}
	}
	if s.Webhook != "" {
		if why := webhookProblem(s.Webhook); why != "" {
			return &SchedulingError{"webhook", why}
		}
	}
	if len(s.OnRunEnd) > 0 && strings.TrimSpace(s.OnRunEnd[0]) == "" {
		return &SchedulingError{"on_run_end", "empty command: give the program and its arguments"}
	}
	for i, a := range s.OnRunEnd {
		if strings.IndexByte(a, 0) >= 0 {
			return &SchedulingError{"on_run_end", fmt.Sprintf("item %d, %s, has a NUL byte, which a command line cannot hold", i, elide.Quote(a))}
		}
	}
	for _, v := range s.VisibleGPUs {
		if strings.TrimSpace(v) == "" {
			return &SchedulingError{"visible_gpus", "has an empty entry; list card indices or UUIDs"}
		}
	}
	return nil
}

// Defaults of the GPU settings.
const (
	DefaultGPUSafetyMarginMiB = gpu.DefaultSafetyMarginMiB
	DefaultGPUCooldown        = gpu.DefaultCooldown
	DefaultGPUQuarantineAfter = gpu.DefaultQuarantineAfter
	DefaultGPUQuarantineFor   = gpu.DefaultQuarantineFor
	DefaultGPUPollInterval    = engine.DefaultPollInterval
	DefaultGPUReserveAfter    = engine.DefaultReserveAfter
	DefaultGPUUnknownTimeout  = engine.DefaultUnknownTimeout
	DefaultNvidiaSMITimeout   = nvidiasmi.DefaultTimeout
	DefaultFairShareHalfLife  = engine.DefaultFairShareHalfLife
)

// withDefaults returns s with zero fields set to their defaults.
func (s Scheduling) withDefaults() Scheduling {
	if s.MaxParallelTasks == 0 {
		s.MaxParallelTasks = runtime.NumCPU()
	}
	if s.KillGrace == 0 {
		s.KillGrace = DefaultKillGrace
	}
	s.DefaultRetryDelay = orDefault(s.DefaultRetryDelay, DefaultRetryDelay)
	s.RetryDelayMax = orDefault(s.RetryDelayMax, DefaultRetryDelayMax)
	s.OnCompleteTimeout = orDefault(s.OnCompleteTimeout, DefaultOnCompleteTimeout)
	s.GPUSafetyMarginMiB = orDefault(s.GPUSafetyMarginMiB, DefaultGPUSafetyMarginMiB)
	s.GPUCooldown = orDefault(s.GPUCooldown, DefaultGPUCooldown)
	s.GPUQuarantineAfter = orDefault(s.GPUQuarantineAfter, DefaultGPUQuarantineAfter)
	s.GPUQuarantineFor = orDefault(s.GPUQuarantineFor, DefaultGPUQuarantineFor)
	s.GPUReserveAfter = cmp.Or(s.GPUReserveAfter, DefaultGPUReserveAfter) // negative stays: never
	s.GPUUnknownTimeout = orDefault(s.GPUUnknownTimeout, DefaultGPUUnknownTimeout)
	s.GPUPollInterval = cmp.Or(s.GPUPollInterval, DefaultGPUPollInterval)
	s.NvidiaSMITimeout = cmp.Or(s.NvidiaSMITimeout, DefaultNvidiaSMITimeout)
	s.FairShareHalfLife = cmp.Or(s.FairShareHalfLife, DefaultFairShareHalfLife)
	if s.GPUPlacement == "" {
		s.GPUPlacement = "spread"
	}
	s.Order = cmp.Or(s.Order, OrderSubmitted)
	s.CPUs, s.MemoryMiBHost = s.hostCapacity(hostres.Machine{})
	return s
}

// orDefault: 0 means the default, negative means none (0).
func orDefault[T int | int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// gpuSettings returns the admission settings of s, defaults filled in.
func (s Scheduling) gpuSettings() gpu.Settings {
	p, _ := gpu.ParsePlacement(s.GPUPlacement)
	return gpu.Settings{
		SafetyMarginMiB: s.GPUSafetyMarginMiB,
		Cooldown:        s.GPUCooldown,
		Placement:       p,
		Visible:         s.VisibleGPUs,
		QuarantineAfter: s.GPUQuarantineAfter,
		QuarantineFor:   s.GPUQuarantineFor,
	}
}
