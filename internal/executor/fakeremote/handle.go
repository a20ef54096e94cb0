package fakeremote

import (
	"encoding/json"
	"fmt"

	"github.com/gpusched/gpusched/internal/executor"
)

// Name is the fake remote executor's name, in handles.
const Name = "fakeremote"

// HandleVersion is the layout of its handle data: {"job_id": N}, the
// Controller's id of the job.
const HandleVersion = 1

type handleData struct {
	JobID int64 `json:"job_id"`
}

// EncodeHandle returns the handle of the controller's job id.
func EncodeHandle(id int64) executor.Handle {
	b, _ := json.Marshal(handleData{JobID: id})
	return executor.Handle{Executor: Name, Version: HandleVersion, Data: b}
}

// JobID returns the controller's job id a handle holds. Another
// executor's handle, another version or unreadable data is an error.
func JobID(h executor.Handle) (int64, error) {
	if h.Executor != Name || h.Version != HandleVersion {
		return 0, fmt.Errorf("not a %s handle: executor %q, version %d", Name, h.Executor, h.Version)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil {
		return 0, fmt.Errorf("read %s handle: %w", Name, err)
	}
	if d.JobID <= 0 {
		return 0, fmt.Errorf("read %s handle: no job id in %q", Name, h.Data)
	}
	return d.JobID, nil
}
