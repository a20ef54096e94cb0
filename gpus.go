package gpusched

import (
	"context"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
)

// CardView is a GPU as admission sees it: memory total, used, held by
// processes that are not ours (foreign), charged to our tasks, available,
// the tasks on it, and whether it takes work (state, reason).
type CardView = gpu.CardView

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
