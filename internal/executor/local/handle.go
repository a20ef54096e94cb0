package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
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
// Its data are what json.Marshal makes of a handleData, written without
// its reflection (an attempt's start pays for it, and the journal's
// DecodeHandle reads it back at once).
func EncodeHandle(p executor.Process) executor.Handle {
	b := make([]byte, 0, 64)
	b = append(b, `{"pid":`...)
	b = strconv.AppendInt(b, int64(p.PID), 10)
	b = append(b, `,"pgid":`...)
	b = strconv.AppendInt(b, int64(p.PGID), 10)
	b = append(b, `,"start_ticks":`...)
	b = strconv.AppendUint(b, p.StartTicks, 10)
	b = append(b, '}')
	return executor.Handle{Executor: Name, Version: HandleVersion, Data: b}
}

// decodeWritten reads handle data exactly as EncodeHandle writes them;
// false for anything else, which json.Unmarshal then reads.
func decodeWritten(b []byte) (handleData, bool) {
	var d handleData
	rest, ok := bytes.CutPrefix(b, []byte(`{"pid":`))
	if !ok {
		return d, false
	}
	var pid, pgid int64
	if pid, rest, ok = leadingInt(rest); !ok {
		return d, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"pgid":`)); !ok {
		return d, false
	}
	if pgid, rest, ok = leadingInt(rest); !ok {
		return d, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"start_ticks":`)); !ok {
		return d, false
	}
	i := bytes.IndexByte(rest, '}')
	if i < 0 || i != len(rest)-1 || !canonical(rest[:i]) {
		return d, false
	}
	ticks, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return d, false
	}
	return handleData{PID: int(pid), PGID: int(pgid), StartTicks: ticks}, true
}

// canonical reports whether b is a number as EncodeHandle writes one:
// decimal digits, no sign, no leading zero.
func canonical(b []byte) bool {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// leadingInt parses the decimal integer b starts with, up to a comma.
func leadingInt(b []byte) (int64, []byte, bool) {
	i := bytes.IndexByte(b, ',')
	if i <= 0 || !canonical(b[:i]) {
		return 0, nil, false
	}
	n, err := strconv.ParseInt(string(b[:i]), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, nil, false
	}
	return n, b[i:], true
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
	d, ok := decodeWritten(h.Data)
	if !ok {
		if err := json.Unmarshal(h.Data, &d); err != nil {
			return executor.Process{}, fmt.Errorf("read local handle: %w", err)
		}
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
