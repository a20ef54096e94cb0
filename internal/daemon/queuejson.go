package daemon

import (
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gpusched/gpusched/client"
)

// The queue's answer is written by hand, not by encoding/json: a queue of
// 100,000 tasks is some 20 MB of JSON, and reflection made it the larger
// part of gpusched queue --json's time (docs/benchmarks.md). The output
// is byte for byte what encoding/json writes for client.Queue (a test
// checks it).

// writeQueue writes {"tasks":[...]} and a newline to w, in pieces.
func writeQueue(w io.Writer, tasks []client.TaskInfo) error {
	b := make([]byte, 0, 256<<10)
	b = append(b, `{"tasks":[`...)
	for i := range tasks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTaskInfo(b, &tasks[i])
		if len(b) > 192<<10 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	b = append(b, "]}\n"...)
	_, err := w.Write(b)
	return err
}

// appendTaskInfo appends t as encoding/json encodes a client.TaskInfo.
func appendTaskInfo(b []byte, t *client.TaskInfo) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, t.ID)
	b = append(b, `,"run":`...)
	b = appendString(b, t.Run)
	b = append(b, `,"kind":`...)
	b = appendString(b, t.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, t.Name)
	b = append(b, `,"owner":`...)
	b = appendString(b, t.Owner)
	b = append(b, `,"uid":`...)
	b = strconv.AppendInt(b, int64(t.UID), 10)
	b = append(b, `,"state":`...)
	b = appendString(b, t.State)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(t.Attempts), 10)
	b = append(b, `,"exit_code":`...)
	b = appendIntPtr(b, t.ExitCode)
	b = append(b, `,"gpu":`...)
	b = appendIntPtr(b, t.GPU)
	if len(t.GPUs) > 0 {
		b = append(b, `,"gpus":[`...)
		for i, c := range t.GPUs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
		b = append(b, ']')
	}
	b = append(b, `,"waiting":`...)
	b = appendString(b, t.Waiting)
	if t.WaitingKind != "" {
		b = append(b, `,"waiting_kind":`...)
		b = appendString(b, t.WaitingKind)
	}
	if t.Paused {
		b = append(b, `,"paused":true`...)
	}
	if t.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, t.Error)
	}
	if t.BlockedBy != "" {
		b = append(b, `,"blocked_by":`...)
		b = appendString(b, t.BlockedBy)
	}
	if t.NotNeeded {
		b = append(b, `,"not_needed":true`...)
	}
	b = append(b, `,"submitted":`...)
	b = appendTime(b, t.Submitted)
	if t.Started != nil {
		b = append(b, `,"started":`...)
		b = appendTime(b, *t.Started)
	}
	if t.Ended != nil {
		b = append(b, `,"ended":`...)
		b = appendTime(b, *t.Ended)
	}
	if t.GPUMiB != 0 {
		b = append(b, `,"gpu_mib":`...)
		b = strconv.AppendInt(b, t.GPUMiB, 10)
	}
	if t.GPUMiBSource != "" {
		b = append(b, `,"gpu_mib_source":`...)
		b = appendString(b, t.GPUMiBSource)
	}
	if t.GPUBudget != "" {
		b = append(b, `,"gpu_budget":`...)
		b = appendString(b, t.GPUBudget)
	}
	if t.MemoryMiBHost != 0 {
		b = append(b, `,"memory_mib_host":`...)
		b = strconv.AppendInt(b, t.MemoryMiBHost, 10)
	}
	if t.MemoryMiBHostSource != "" {
		b = append(b, `,"memory_mib_host_source":`...)
		b = appendString(b, t.MemoryMiBHostSource)
	}
	if t.HostBudget != "" {
		b = append(b, `,"host_budget":`...)
		b = appendString(b, t.HostBudget)
	}
	if t.Job != nil {
		b = appendJob(b, t.Job)
	}
	if len(t.Command) > 0 {
		b = append(b, `,"command":[`...)
		for i, a := range t.Command {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	if t.Dir != "" {
		b = append(b, `,"dir":`...)
		b = appendString(b, t.Dir)
	}
	return append(b, '}')
}

// appendJob appends `,"job":` and j as encoding/json encodes a
// client.Job.
func appendJob(b []byte, j *client.Job) []byte {
	b = append(b, `,"job":{`...)
	if j.System != "" {
		b = append(b, `"system":`...)
		b = appendString(b, j.System)
		b = append(b, ',')
	}
	b = append(b, `"id":`...)
	b = appendString(b, j.ID)
	for _, f := range []struct{ key, v string }{{`,"state":`, j.State}, {`,"node":`, j.Node}, {`,"reason":`, j.Reason}} {
		if f.v != "" {
			b = append(b, f.key...)
			b = appendString(b, f.v)
		}
	}
	if j.Queued {
		b = append(b, `,"queued":true`...)
	}
	return append(b, '}')
}

func appendIntPtr(b []byte, v *int) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*v), 10)
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (HTML characters included; invalid UTF-8 as U+FFFD).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
