package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpusched/gpusched/internal/task"
)

// "status --json" of 100,000 tasks is 50 MB of JSON. encoding/json would
// build it whole in memory, by reflection, then pass over it all again to
// indent it. writeStatusDoc writes the same bytes directly, a task at a
// time, through a small buffer: the document, its tasks and their history
// by hand, the rare nested values (a Slurm job, pending events,
// conditions, the cards) through encoding/json and json.Indent.
// TestStatusJSONAsEncodingJSON holds it to encoding/json's output on
// documents with every field of statusJSON, taskJSON and task.Attempt
// filled at random: a field added to one of them and not written here
// fails it.

// writeStatusDoc writes doc, with n tasks given by task(i) in place of
// doc.Tasks, as json.Encoder with SetIndent("", "  ") writes doc with those
// tasks. What it writes before an error (a time json cannot write: a year
// outside 0-9999; none comes from a state database) stays written.
func writeStatusDoc(w io.Writer, doc *statusJSON, n int, task func(i int) taskJSON) error {
	e := &statusEncoder{w: w}
	e.out.Grow(statusFlushAt + 16<<10)
	e.raw("{\n  \"run_dir\": ")
	e.str(doc.RunDir)
	e.raw(",\n  \"scheduler_pid\": ")
	e.intPtr(doc.SchedulerPID)
	e.raw(",\n  \"tasks\": ")
	if n == 0 {
		e.raw("[]")
	} else {
		e.raw("[\n")
		for i := range n {
			if i > 0 {
				e.raw(",\n")
			}
			t := task(i)
			e.task(&t)
			if e.err != nil {
				return e.err
			}
			e.flushIfFull()
		}
		e.raw("\n  ]")
	}
	e.raw(",\n  \"gpus\": ")
	e.value(doc.GPUs, "  ")
	if doc.GPUsAsOf != nil {
		e.raw(",\n  \"gpus_as_of\": ")
		e.time(*doc.GPUsAsOf, true)
	}
	if doc.GPUUnknown != "" {
		e.raw(",\n  \"gpu_unknown\": ")
		e.str(doc.GPUUnknown)
	}
	if doc.GPUTopology != "" {
		e.raw(",\n  \"gpu_topology\": ")
		e.str(doc.GPUTopology)
	}
	e.raw("\n}\n")
	return e.flush()
}

// statusFlushAt is how much the encoder holds before it writes.
const statusFlushAt = 64 << 10

// statusEncoder appends JSON to out, writes it to w when it is full, and
// keeps the first error.
type statusEncoder struct {
	w   io.Writer
	out bytes.Buffer
	err error
}

func (e *statusEncoder) flushIfFull() {
	if e.out.Len() >= statusFlushAt {
		e.flush()
	}
}

func (e *statusEncoder) flush() error {
	if e.err == nil {
		_, e.err = e.w.Write(e.out.Bytes())
	}
	e.out.Reset()
	return e.err
}

// The indentation of a task's braces, of its fields, and of what its
// fields hold.
const (
	taskIndent  = "    "
	fieldIndent = "      "
)

// task writes t at its place in the document's list of tasks, as
// encoding/json writes taskJSON (its fields in order, omitempty as
// tagged).
func (e *statusEncoder) task(t *taskJSON) {
	e.raw(taskIndent + "{\n" + fieldIndent + `"id": `)
	e.str(t.ID)
	e.raw(",\n" + fieldIndent + `"state": `)
	e.str(t.State.String()) // what its MarshalText writes
	e.raw(",\n" + fieldIndent + `"attempts": `)
	e.int(int64(t.Attempts))
	e.raw(",\n" + fieldIndent + `"exit_code": `)
	e.intPtr(t.ExitCode)
	e.raw(",\n" + fieldIndent + `"gpu": `)
	e.intPtr(t.GPU)
	if len(t.GPUs) > 0 {
		e.raw(",\n" + fieldIndent + `"gpus": `)
		e.value(t.GPUs, fieldIndent)
	}
	e.optStr(fieldIndent, `"error": `, t.Error)
	e.optStr(fieldIndent, `"blocked_by": `, t.BlockedBy)
	e.optStr(fieldIndent, `"waiting": `, t.Waiting)
	if t.WaitingKind != 0 {
		e.raw(",\n" + fieldIndent + `"waiting_kind": `)
		e.str(t.WaitingKind.String()) // what its MarshalText writes
	}
	if t.RetryAt != nil {
		e.raw(",\n" + fieldIndent + `"retry_at": `)
		e.time(*t.RetryAt, true)
	}
	e.optStr(fieldIndent, `"rerun": `, t.Rerun)
	if len(t.Events) > 0 {
		e.raw(",\n" + fieldIndent + `"events_pending": `)
		e.value(t.Events, fieldIndent)
	}
	e.raw(",\n" + fieldIndent + `"dependencies": `)
	switch {
	case t.Dependencies == nil:
		e.raw("null")
	case len(t.Dependencies) == 0:
		e.raw("[]")
	default:
		e.raw("[\n")
		for i, d := range t.Dependencies {
			if i > 0 {
				e.raw(",\n")
			}
			e.raw(fieldIndent + "  ")
			e.str(d)
		}
		e.raw("\n" + fieldIndent + "]")
	}
	e.raw(",\n" + fieldIndent + `"priority": `)
	e.int(int64(t.Priority))
	e.optInt(fieldIndent, `"memory_mib": `, t.MemoryMiB)
	e.optStr(fieldIndent, `"memory_mib_source": `, t.MemorySource)
	e.optInt(fieldIndent, `"memory_mib_host": `, t.MemoryMiBHost)
	e.optStr(fieldIndent, `"memory_mib_host_source": `, t.MemoryHostSource)
	e.raw(",\n" + fieldIndent + `"started": `)
	e.timePtr(t.Started)
	e.raw(",\n" + fieldIndent + `"ended": `)
	e.timePtr(t.Ended)
	e.raw(",\n" + fieldIndent + `"log": `)
	if t.Log == nil {
		e.raw("null")
	} else {
		e.str(*t.Log)
	}
	if t.Job != nil {
		e.raw(",\n" + fieldIndent + `"job": `)
		e.value(t.Job, fieldIndent)
	}
	e.raw(",\n" + fieldIndent + `"history": `)
	switch {
	case t.History == nil:
		e.raw("null")
	case len(t.History) == 0:
		e.raw("[]")
	default:
		e.raw("[\n")
		for i := range t.History {
			if i > 0 {
				e.raw(",\n")
			}
			e.attempt(&t.History[i])
		}
		e.raw("\n" + fieldIndent + "]")
	}
	if len(t.DependencyOn) > 0 {
		e.raw(",\n" + fieldIndent + `"dependency_on": `)
		e.value(t.DependencyOn, fieldIndent)
	}
	e.optTrue(fieldIndent, `"not_needed": `, t.NotNeeded)
	e.raw("\n" + taskIndent + "}")
}

func (e *statusEncoder) raw(s string) { e.out.WriteString(s) }

func (e *statusEncoder) int(n int64) {
	e.out.Write(strconv.AppendInt(e.out.AvailableBuffer(), n, 10))
}

func (e *statusEncoder) intPtr(n *int) {
	if n == nil {
		e.raw("null")
		return
	}
	e.int(int64(*n))
}

// optStr writes a field tagged omitempty whose value is s, after another
// field, at indent.
func (e *statusEncoder) optStr(indent, key, s string) {
	if s != "" {
		e.next(indent, key)
		e.str(s)
	}
}

// optInt writes a field tagged omitempty whose value is n, after another
// field, at indent.
func (e *statusEncoder) optInt(indent, key string, n int64) {
	if n != 0 {
		e.next(indent, key)
		e.int(n)
	}
}

// optTrue writes a bool field tagged omitempty, after another field, at
// indent.
func (e *statusEncoder) optTrue(indent, key string, b bool) {
	if b {
		e.next(indent, key)
		e.raw("true")
	}
}

// next begins a field after another, at indent: key holds its quoted
// name, a colon and a space.
func (e *statusEncoder) next(indent, key string) {
	e.raw(",\n")
	e.raw(indent)
	e.raw(key)
}

// The indentation of an attempt of history's braces, of its fields, and
// of what its fields hold.
const (
	attemptIndent      = fieldIndent + "  "
	attemptFieldIndent = attemptIndent + "  "
)

// attempt writes a of a task's history at its place in the list, as
// encoding/json writes task.Attempt.
func (e *statusEncoder) attempt(a *task.Attempt) {
	const in = attemptFieldIndent
	e.raw(attemptIndent + "{\n" + in + `"number": `)
	e.int(int64(a.Number))
	e.raw(",\n" + in + `"start": `)
	e.time(a.Start, false)
	if !a.End.IsZero() {
		e.raw(",\n" + in + `"end": `)
		e.time(a.End, false)
	}
	e.raw(",\n" + in + `"exit_code": `)
	e.intPtr(a.ExitCode)
	e.optStr(in, `"signal": `, a.Signal)
	e.optTrue(in, `"timed_out": `, a.TimedOut)
	e.optTrue(in, `"cancelled": `, a.Cancelled)
	e.optTrue(in, `"interrupted": `, a.Interrupted)
	e.optTrue(in, `"not_charged": `, a.NotCharged)
	e.optTrue(in, `"adopted": `, a.Adopted)
	e.optStr(in, `"end_reason": `, a.EndReason)
	e.optStr(in, `"error": `, a.Error)
	e.optStr(in, `"log_path": `, a.LogPath)
	e.optInt(in, `"pid": `, int64(a.PID))
	e.raw(",\n" + in + `"gpu": `)
	e.intPtr(a.GPU)
	if len(a.GPUs) > 0 {
		e.raw(",\n" + in + `"gpus": `)
		e.value(a.GPUs, in)
	}
	e.optStr(in, `"gpu_uuid": `, a.GPUUUID)
	e.optInt(in, `"mem_requested_mib": `, a.MemRequestedMiB)
	e.optInt(in, `"mem_peak_mib": `, a.MemPeakMiB)
	e.optInt(in, `"host_mem_requested_mib": `, a.HostMemRequestedMiB)
	e.optInt(in, `"rss_peak_mib": `, a.RSSPeakMiB)
	if !a.ReadyAt.IsZero() {
		e.raw(",\n" + in + `"ready_at": `)
		e.time(a.ReadyAt, false)
	}
	if a.Job != nil {
		e.raw(",\n" + in + `"job": `)
		e.value(a.Job, in)
	}
	e.raw("\n" + attemptIndent + "}")
}

// str writes s as encoding/json writes a string: one of printable ASCII
// by hand, escaping quotes and backslashes (a blocked task's error quotes
// its dependency) as it does; one with anything else it escapes (control
// characters, the characters it escapes for HTML, bytes outside ASCII)
// through encoding/json.
func (e *statusEncoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			e.value(s, "")
			return
		}
	}
	b := append(e.out.AvailableBuffer(), '"')
	for {
		i := strings.IndexAny(s, `"\`)
		if i < 0 {
			break
		}
		b = append(b, s[:i]...)
		b = append(b, '\\', s[i])
		s = s[i+1:]
	}
	b = append(b, s...)
	e.out.Write(append(b, '"'))
}

// time writes t as its MarshalJSON does. A time it cannot write fails
// through encoding/json, with its error, which names the field's type: a
// pointer or not.
func (e *statusEncoder) time(t time.Time, pointer bool) {
	b := append(e.out.AvailableBuffer(), '"')
	b, err := t.AppendText(b)
	if err != nil {
		if pointer {
			e.value(&t, "")
		} else {
			e.value(t, "")
		}
		return
	}
	e.out.Write(append(b, '"'))
}

func (e *statusEncoder) timePtr(t *time.Time) {
	if t == nil {
		e.raw("null")
		return
	}
	e.time(*t, true)
}

// value writes v through encoding/json, indented as if it began at a line
// that starts with prefix.
func (e *statusEncoder) value(v any, prefix string) {
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Indent(&e.out, b, prefix, "  ")
	}
	if err != nil {
		e.fail(err)
	}
}

func (e *statusEncoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}
