package cli

import (
	"strings"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// explainWaiting says, for each pending task, why it has not started.
func (v *runView) explainWaiting() {
	v.waiting = map[string]string{}
	for _, r := range v.rows {
		if r.State != task.Pending {
			continue
		}
		sp := v.specs[r.ID]
		var waitingOn []string
		for _, d := range sp.Dependencies {
			if i, ok := v.taskIndex[d]; ok && v.rows[i].State != task.Complete {
				waitingOn = append(waitingOn, d)
			}
		}
		switch {
		case v.pid == 0:
			v.waiting[r.ID] = "not started: no scheduler is running"
		case r.RetryAt.After(v.now):
			// Waiting out its retry delay, or a back-off after a fault of
			// the environment: say until when, and why it failed.
			why := "retry at " + r.RetryAt.Format("15:04:05") + " (in " + round(r.RetryAt.Sub(v.now)).String() + ")"
			if a := r.LastAttempt(); a != nil && a.NotCharged {
				why += "; not counted against its retries: " + a.Error
			} else if r.Error != "" {
				why += " after: " + r.Error
			}
			v.waiting[r.ID] = why
		case len(waitingOn) > 0:
			v.waiting[r.ID] = "waiting for " + strings.Join(waitingOn, ", ")
		case sp.Resources.GPU():
			need := gpu.Need{MiB: max(sp.Resources.MemoryMiB, r.GPURequestMiB), Exclusive: sp.Resources.Exclusive}
			v.waiting[r.ID] = gpu.Explain(v.cards, need, r.ID, v.unknown)
		default:
			v.waiting[r.ID] = "waiting for a free slot"
		}
	}
}
