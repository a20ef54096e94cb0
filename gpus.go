package gpusched

import (
	"context"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/task"
)

// CardView is a GPU as admission sees it: memory total, used, held by
// processes that are not ours (foreign), charged to our tasks, available,
// the tasks on it, and whether it takes work (state, reason).
type CardView = gpu.CardView

// CheckGPUs makes, without a run directory, the GPU checks SubmitMany
// makes: a batch with GPU tasks needs nvidia-smi, and no request may be
// larger than every visible card (after the safety margin). A batch without
// GPU tasks never runs nvidia-smi. When nvidia-smi runs but fails, nothing
// is known and nothing is refused (the tasks would wait).
func CheckGPUs(ctx context.Context, s Scheduling, tasks []TaskSpec) error {
	i := slices.IndexFunc(tasks, func(t TaskSpec) bool { return t.Resources.GPU() })
	if i < 0 {
		return nil
	}
	if _, err := nvidiasmi.Bin(); err != nil {
		return noSMI(tasks[i].ID)
	}
	cards, err := ReadGPUs(ctx, s)
	if err != nil {
		return nil
	}
	for _, t := range tasks {
		if !t.Resources.GPU() {
			continue
		}
		need := gpu.Need{MiB: t.Resources.MemoryMiB, Exclusive: t.Resources.Exclusive}
		if why := gpu.NeverFits(cards, need, len(s.VisibleGPUs) > 0); why != "" {
			return task.Invalid(t.ID, "resources.memory_mib", "%s", why)
		}
	}
	return nil
}

// CheckNvidiaSMI refuses GPU tasks on a machine without nvidia-smi, the
// check SubmitMany makes at once. Unlike CheckGPUs it never runs
// nvidia-smi, which may hang for its whole timeout: a run reads the cards
// once it has started, so that CPU tasks never wait for them.
func CheckNvidiaSMI(tasks []TaskSpec) error {
	i := slices.IndexFunc(tasks, func(t TaskSpec) bool { return t.Resources.GPU() })
	if i < 0 {
		return nil
	}
	if _, err := nvidiasmi.Bin(); err != nil {
		return noSMI(tasks[i].ID)
	}
	return nil
}

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
