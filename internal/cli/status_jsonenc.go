package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// "status --json" of 100,000 tasks is 50 MB of JSON. encoding/json would
// build it whole in memory, by reflection, then pass over it all again to
// indent it. writeStatusDoc writes the same bytes directly, a task at a
// time, through a small buffer: the document and its tasks by hand, the
// rare nested values (a Slurm job, pending events, conditions, the cards)
// and each attempt of history through encoding/json and json.Indent.
// TestStatusJSONAsEncodingJSON holds it to encoding/json's output on
// documents with every field of statusJSON and taskJSON filled at random:
// a field added to either and not written here fails it.

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
		e.time(*doc.GPUsAsOf)
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
	e.optStr(`"error": `, t.Error)
	e.optStr(`"blocked_by": `, t.BlockedBy)
	e.optStr(`"waiting": `, t.Waiting)
	if t.WaitingKind != 0 {
		e.raw(",\n" + fieldIndent + `"waiting_kind": `)
		e.str(t.WaitingKind.String()) // what its MarshalText writes
	}
	if t.RetryAt != nil {
		e.raw(",\n" + fieldIndent + `"retry_at": `)
		e.time(*t.RetryAt)
	}
	e.optStr(`"rerun": `, t.Rerun)
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
	e.optInt(`"memory_mib": `, t.MemoryMiB)
	e.optStr(`"memory_mib_source": `, t.MemorySource)
	e.optInt(`"memory_mib_host": `, t.MemoryMiBHost)
	e.optStr(`"memory_mib_host_source": `, t.MemoryHostSource)
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
			e.raw(fieldIndent + "  ")
			e.value(&t.History[i], fieldIndent+"  ")
		}
		e.raw("\n" + fieldIndent + "]")
	}
	if len(t.DependencyOn) > 0 {
		e.raw(",\n" + fieldIndent + `"dependency_on": `)
		e.value(t.DependencyOn, fieldIndent)
	}
	if t.NotNeeded {
		e.raw(",\n" + fieldIndent + `"not_needed": true`)
	}
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

// optStr writes a field of a task tagged omitempty whose value is s.
func (e *statusEncoder) optStr(key, s string) {
	if s != "" {
		e.raw(",\n" + fieldIndent)
		e.raw(key)
		e.str(s)
	}
}

// optInt writes a field of a task tagged omitempty whose value is n.
func (e *statusEncoder) optInt(key string, n int64) {
	if n != 0 {
		e.raw(",\n" + fieldIndent)
		e.raw(key)
		e.int(n)
	}
}

// str writes s as encoding/json writes a string: a plain one (printable
// ASCII, none of the characters it escapes for HTML) by hand, any other
// through encoding/json.
func (e *statusEncoder) str(s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			e.value(s, "")
			return
		}
	}
	e.out.WriteByte('"')
	e.out.WriteString(s)
	e.out.WriteByte('"')
}

// time writes the time of a *time.Time field as its MarshalJSON does (a
// time it cannot write fails through encoding/json, with its error).
func (e *statusEncoder) time(t time.Time) {
	b := append(e.out.AvailableBuffer(), '"')
	b, err := t.AppendText(b)
	if err != nil {
		e.value(&t, "")
		return
	}
	e.out.Write(append(b, '"'))
}

func (e *statusEncoder) timePtr(t *time.Time) {
	if t == nil {
		e.raw("null")
		return
	}
	e.time(*t)
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
