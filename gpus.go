package gpusched

import (
	"context"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/task"
)

// CardView is a GPU as admission sees it at one moment: its memory (total,
// used, held by processes that are not ours, charged to our tasks,
// available), the tasks on it, and whether it takes new work.
type CardView struct {
	Index    int    `json:"index"` // nvidia-smi's index
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	TotalMiB int64  `json:"total_mib"`
	UsedMiB  int64  `json:"used_mib"` // as nvidia-smi reports it
	FreeMiB  int64  `json:"free_mib"`
	// CapacityMiB is the total less the safety margin: what gpusched may
	// promise on the card.
	CapacityMiB int64 `json:"capacity_mib"`
	// ForeignMiB is held by processes that are not our tasks' (and by the
	// driver); ForeignProcs counts those compute processes.
	ForeignMiB   int64 `json:"foreign_mib"`
	ForeignProcs int   `json:"foreign_procs"`
	// ChargedMiB is what our running tasks are charged: for each, the
	// larger of its budget and what its processes were seen to use.
	ChargedMiB int64 `json:"charged_mib"`
	// AvailableMiB is capacity - foreign - charged; it may be negative.
	AvailableMiB int64 `json:"available_mib"`
	// Holders are our tasks running on the card.
	Holders []Holding `json:"tasks"`
	// Exclusive is set while a task holds the card to itself.
	Exclusive bool `json:"exclusive"`
	// State says whether the card takes new work; Reason why not, and
	// Until when a cooldown or quarantine ends.
	State  CardState `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitzero"`
	// ReservedFor names a task that waited too long and has the card
	// reserved until it fits.
	ReservedFor string `json:"reserved_for,omitempty"`
}

// Takes reports whether the card can take new work at all.
func (c *CardView) Takes() bool { return c.State == CardOK }

// Holding is the GPU memory one of our running tasks holds on a card.
type Holding struct {
	Task        string `json:"task"`
	PID         int    `json:"pid,omitempty"` // the attempt's leader, once started
	RequestMiB  int64  `json:"request_mib"`   // the budget it was admitted with
	ObservedMiB int64  `json:"observed_mib"`  // what its processes use, in the latest reading
	PeakMiB     int64  `json:"peak_mib"`      // the most they were seen to use in this attempt
	Exclusive   bool   `json:"exclusive,omitempty"`
}

// ChargedMiB is what the task counts for on its card: the larger of its
// request and what it was last seen to use.
func (h Holding) ChargedMiB() int64 { return max(h.RequestMiB, h.ObservedMiB) }

// CardState is whether a card takes new work, and if not, why.
type CardState uint8

// The card states.
const (
	CardOK          = CardState(gpu.CardOK)          // takes new work
	CardCooling     = CardState(gpu.CardCooling)     // a task just left it
	CardQuarantined = CardState(gpu.CardQuarantined) // failed too often or was lost
	CardUnknown     = CardState(gpu.CardUnknown)     // its memory cannot be read
	CardHidden      = CardState(gpu.CardHidden)      // not in VisibleGPUs
)

// String returns the state's name, e.g. "cooling down".
func (s CardState) String() string { return gpu.CardState(s).String() }

// MarshalText writes the state's name.
func (s CardState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// CheckGPUs makes, without a run directory, the GPU checks SubmitMany
// makes: a batch with GPU tasks needs nvidia-smi, and no request may be
// larger than every visible card (after the safety margin). A batch without
// GPU tasks never runs nvidia-smi. When nvidia-smi runs but fails, nothing
// is known and nothing is refused (the tasks would wait). GPU tasks of an
// executor that places its attempts itself (slurm) are not checked: this
// machine's cards are not theirs.
func CheckGPUs(ctx context.Context, s Scheduling, tasks []TaskSpec) error {
	i := slices.IndexFunc(tasks, localGPU)
	if i < 0 {
		return nil
	}
	if _, err := nvidiasmi.Bin(); err != nil {
		return noSMI(tasks[i].ID)
	}
	cards, err := readCards(ctx, s)
	if err != nil {
		return nil
	}
	for _, t := range tasks {
		if !localGPU(t) {
			continue
		}
		need := gpu.Need{MiB: t.Resources.MemoryMiB, Exclusive: t.Resources.Exclusive, Count: uint8(min(max(t.Resources.GPUs, 1), task.MaxGPUs))}
		if why := gpu.NeverFits(cards, need, len(s.VisibleGPUs) > 0); why != "" {
			field := "resources.memory_mib"
			if need.Cards() > 1 {
				field = "resources.gpus"
			}
			return task.Invalid(t.ID, field, "%s", why)
		}
	}
	return nil
}

// CheckNvidiaSMI refuses GPU tasks on a machine without nvidia-smi, the
// check SubmitMany makes at once (not those of an executor that places
// its attempts itself, slurm). Unlike CheckGPUs it never runs
// nvidia-smi, which may hang for its whole timeout: a run reads the cards
// once it has started, so that CPU tasks never wait for them.
func CheckNvidiaSMI(tasks []TaskSpec) error {
	i := slices.IndexFunc(tasks, localGPU)
	if i < 0 {
		return nil
	}
	if _, err := nvidiasmi.Bin(); err != nil {
		return noSMI(tasks[i].ID)
	}
	return nil
}

// localGPU reports whether t is a GPU task that a scheduler with the
// built-in executors runs on this machine's cards.
func localGPU(t TaskSpec) bool { return t.Resources.GPU() && !placedByBuiltin(t.Executor) }

// noSMI is the error for GPU tasks on a machine without nvidia-smi.
func noSMI(id string) error {
	return &TaskError{TaskID: id, Field: "resources.device",
		Reason: "cuda tasks need nvidia-smi, which was not found; install the NVIDIA driver or set " + nvidiasmi.EnvBin + " to its path",
		Kind:   ErrInvalidTask}
}

// ReadGPUs runs nvidia-smi once and returns the cards as a scheduler with
// settings s would see them with none of its tasks running: capacity after
// the safety margin, foreign memory, cards hidden by VisibleGPUs. It fails
// if nvidia-smi is missing, fails or hangs past NvidiaSMITimeout.
func ReadGPUs(ctx context.Context, s Scheduling) ([]CardView, error) {
	cards, err := readCards(ctx, s)
	if err != nil {
		return nil, err
	}
	return publicCards(cards), nil
}

// readCards is ReadGPUs in the internal types.
func readCards(ctx context.Context, s Scheduling) ([]gpu.CardView, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	p := &nvidiasmi.Probe{Timeout: s.NvidiaSMITimeout}
	snap, err := p.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	b := gpu.NewBoard(s.gpuSettings())
	now := time.Now()
	b.Apply(snap, now)
	return b.Views(now), nil
}
