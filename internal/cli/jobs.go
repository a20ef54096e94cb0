package cli

import (
	"cmp"

	"github.com/gpusched/gpusched/internal/task"
)

// jobText says what the batch system running an attempt last said of its
// job, for a person: "Slurm job 4242 PENDING (Priority)", "Slurm job 4242
// RUNNING on node7"; before the job exists, why submission waits ("Slurm
// controller unreachable since 05:20:11: submission waits"). "" for an
// attempt run on this machine.
func jobText(j *task.RemoteJob) string {
	if j == nil {
		return ""
	}
	if j.ID == "" {
		return j.Reason
	}
	s := cmp.Or(j.System, "batch") + " job " + j.ID
	if j.State != "" {
		s += " " + j.State
	}
	if j.Node != "" {
		s += " on " + j.Node
	}
	if j.Reason != "" {
		s += " (" + j.Reason + ")"
	}
	return s
}
