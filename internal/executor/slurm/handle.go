package slurm

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// Name is the slurm executor's name, in workflows and in its handles.
const Name = task.SlurmExecutor

// handleVersion is the layout of handleData.
const handleVersion = 1

// handleData is the persisted handle of one attempt: its batch job, the
// result file the job's helper writes, when it was submitted (a job
// cannot have started before) and the GPUs it asked for.
type handleData struct {
	JobID     string    `json:"job_id"`
	Result    string    `json:"result"`
	Name      string    `json:"name"`
	Submitted time.Time `json:"submitted"`
	// Gres is the --gres the job was submitted with ("gpu:a100:1"),
	// for people; "" without GPUs, or when the job was found by its name.
	Gres string `json:"gres,omitempty"`
}

func encodeHandle(d handleData) executor.Handle {
	b, _ := json.Marshal(d)
	return executor.Handle{Executor: Name, Version: handleVersion, Data: b}
}

func decodeHandle(h executor.Handle) (handleData, error) {
	var d handleData
	if h.Executor != Name || h.Version != handleVersion {
		return d, fmt.Errorf("read handle: executor %q version %d is not %s's version %d", h.Executor, h.Version, Name, handleVersion)
	}
	if err := json.Unmarshal(h.Data, &d); err != nil || d.JobID == "" || d.Result == "" {
		return d, fmt.Errorf("read %s handle: %q is not one", Name, truncate(string(h.Data), 80))
	}
	return d, nil
}
