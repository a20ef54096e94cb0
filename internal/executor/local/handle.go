package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// Name is the local executor's name, in workflows and in handles.
const Name = "local"

// HandleVersion is the layout of the local executor's handle data: a JSON
// object {"pid", "pgid", "start_ticks"} naming the attempt's process
// group beyond PID reuse.
const HandleVersion = 1

type handleData struct {
	PID        int    `json:"pid"`
	PGID       int    `json:"pgid"`
	StartTicks uint64 `json:"start_ticks"`
}

// EncodeHandle returns the handle of a local attempt whose process group is p.
func EncodeHandle(p executor.Process) executor.Handle {
	b, _ := json.Marshal(handleData{PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks})
	return executor.Handle{Executor: Name, Version: HandleVersion, Data: b}
}

// DecodeHandle reads a local handle. A zero handle reads as a zero Process
// (the attempt's process was never recorded); another executor's handle or
// an unknown version is an error.
func DecodeHandle(h executor.Handle) (executor.Process, error) {
	if h.IsZero() {
		return executor.Process{}, nil
	}
	if h.Executor != Name || h.Version != HandleVersion {
		return executor.Process{}, fmt.Errorf("not a local handle: executor %q, version %d", h.Executor, h.Version)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil {
		return executor.Process{}, fmt.Errorf("read local handle: %w", err)
	}
	return executor.Process{PID: d.PID, PGID: d.PGID, StartTicks: d.StartTicks}, nil
}

// Recover: an attempt run in this process's Execute has no one left to
// know how it ends once the process that ran it is gone, so every orphan
// is Lost; what is left of them is killed, with one scan of the process
// table for all of them.
func (e *Executor) Recover(orphans []executor.Orphan) []executor.Recovery {
	out := make([]executor.Recovery, len(orphans))
	stale := make([]Stale, len(orphans))
	for i, o := range orphans {
		p, _ := DecodeHandle(o.Handle)
		stale[i] = Stale{Process: p, Token: o.Job.Token}
	}
	killed, errs := KillStaleMany(stale)
	now := time.Now()
	for i := range orphans {
		out[i].Result = LostResult(now, killed[i], errs[i])
	}
	return out
}

// LostResult is the result of an attempt whose outcome cannot be known,
// after killed of its processes were killed (err: killing failed).
func LostResult(now time.Time, killed int, err error) executor.Result {
	why := "its outcome is unknown: the scheduler and whatever watched the attempt stopped during it"
	switch {
	case err != nil:
		why += fmt.Sprintf("; could not kill its processes: %v", err)
	case killed > 0:
		why += fmt.Sprintf("; killed %d leftover process(es)", killed)
	}
	return executor.Result{Reason: executor.Lost, End: now, Err: errors.New(why)}
}
