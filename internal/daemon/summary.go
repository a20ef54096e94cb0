package daemon

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
)

// What the queue shows of finished tasks.
//
// The scheduler retires finished tasks from its memory, and an earlier
// daemon's are never in it: the queue shows them from a summary the task
// index keeps of each (taskIndex.ended), never by reading them one at a
// time. A summary is noted
//
//   - at start, from the records the state database holds (restore);
//   - as a task ends, from its end event when that says all (the end of an
//     attempt: EventComplete, EventFailed, EventCancelled of a running
//     task), or else only its end state (countEvents);
//   - for the tasks a listing finds with no summary, or only an end
//     state (blocked, cancelled while pending, ended before the events
//     were read), from the state database in one read for them all
//     (summarise), through a read-only connection of the daemon's own:
//     the scheduler's loop goes on meanwhile, and what is read, a finished
//     task's row, was committed before the scheduler retired the task or
//     published its end.
//
// A task retried (forget) loses its summary. Daemon.stored (the whole
// record, read from the state database) stays for logs, retry and wait.

// summary is what the queue shows of a finished task, kept compact: times
// as Unix nanoseconds (0: none), the texts apart as they are rare.
type summary struct {
	submitted, start, end int64
	text                  *summaryText // nil when all its fields are empty
	attempts              int32
	exit                  int32 // valid with hasExit
	gpu                   int16 // the last attempt's card; -1: none
	state                 gpusched.State
	flags                 uint8
}

// summaryText holds the rare parts of a summary: texts, and the cards of
// a last attempt on several (gpu is the first).
type summaryText struct {
	err, blockedBy string
	gpus           []int
}

const (
	known     uint8 = 1 << iota // the fields besides state are known
	hasExit                     // exit is the exit code
	notNeeded                   // blocked as not needed (gpusched.Record.NotNeeded)
)

// full reports whether sm holds all the queue shows, not only an end state.
func (sm summary) full() bool { return sm.flags&known != 0 }

// summaryOf is what the queue shows of rec.
func summaryOf(rec *gpusched.Record) summary {
	return makeSummary(rec.State, len(rec.Attempts), rec.ExitCode, rec.Error, rec.BlockedBy, rec.NotNeeded, rec.Submitted, rec.LastAttempt())
}

// summaryOfEvent is what the queue shows of the task whose end ev reports,
// when ev says all of it: the end of an attempt (whose number is then the
// task's count of attempts, whose exit code and error the task's).
func summaryOfEvent(ev *gpusched.Event, st gpusched.State) summary {
	if ev.Attempt.Number == 0 {
		return summary{state: st} // blocked, cancelled or failed before it ran again
	}
	a := ev.Attempt
	return makeSummary(st, a.Number, a.ExitCode, a.Error, "", false, ev.Submitted, &a)
}

// summaryOfStored is the summary the state database gave.
func summaryOfStored(s *store.Summary) summary {
	var last *gpusched.Attempt
	if s.Last != nil {
		last = &gpusched.Attempt{Number: s.Last.Number, Start: s.Last.Start, End: s.Last.End, GPU: s.Last.GPU, GPUs: s.Last.GPUs}
	}
	return makeSummary(gpusched.State(s.State), s.Attempts, s.ExitCode, s.Error, s.BlockedBy, s.NotNeeded, s.Submitted, last)
}

func makeSummary(st gpusched.State, attempts int, exit *int, errText, blockedBy string, unneeded bool, submitted time.Time, last *gpusched.Attempt) summary {
	sm := summary{state: st, attempts: int32(attempts), gpu: -1, flags: known, submitted: nanos(submitted)}
	if unneeded {
		sm.flags |= notNeeded
	}
	if exit != nil {
		sm.exit, sm.flags = int32(*exit), sm.flags|hasExit
	}
	if errText != "" || blockedBy != "" || last != nil && len(last.GPUs) > 0 {
		sm.text = &summaryText{err: errText, blockedBy: blockedBy}
		if last != nil {
			sm.text.gpus = last.GPUs
		}
	}
	if last != nil {
		sm.start, sm.end = nanos(last.Start), nanos(last.End)
		if last.GPU != nil {
			sm.gpu = int16(*last.GPU)
		}
	}
	return sm
}

// nanos is t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// timeOf is the time of Unix nanoseconds ns, as the state database reads
// it back (local); the zero time for 0.
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// shown is what the queue shows of a task: the fields of a summary, read
// back as its record gives them.
type shown struct {
	state      gpusched.State
	attempts   int
	exitCode   *int
	err        string
	blockedBy  string
	notNeeded  bool
	submitted  time.Time
	gpu        *int
	gpus       []int // for a last attempt on several cards
	start, end *time.Time
}

// shownOf is what the queue shows of rec.
func shownOf(rec *gpusched.Record) shown {
	s := shown{state: rec.State, attempts: len(rec.Attempts), exitCode: rec.ExitCode, err: rec.Error, blockedBy: rec.BlockedBy,
		notNeeded: rec.NotNeeded, submitted: rec.Submitted}
	if a := rec.LastAttempt(); a != nil {
		s.gpu, s.gpus = a.GPU, a.GPUs
		start := a.Start
		s.start = &start
		if a.Ended() {
			end := a.End
			s.end = &end
		}
	}
	return s
}

// shown reads sm back as shownOf would give its record.
func (sm summary) shown() shown {
	s := shown{state: sm.state, attempts: int(sm.attempts), submitted: timeOf(sm.submitted), notNeeded: sm.flags&notNeeded != 0}
	if sm.flags&hasExit != 0 {
		code := int(sm.exit)
		s.exitCode = &code
	}
	if sm.text != nil {
		s.err, s.blockedBy, s.gpus = sm.text.err, sm.text.blockedBy, sm.text.gpus
	}
	if sm.attempts > 0 {
		if sm.gpu >= 0 {
			g := int(sm.gpu)
			s.gpu = &g
		}
		start := timeOf(sm.start)
		s.start = &start
		if sm.end != 0 {
			end := timeOf(sm.end)
			s.end = &end
		}
	}
	return s
}

// summaryOf returns what the queue shows of finished task id, when known.
func (x *taskIndex) summaryOf(id string) (summary, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	sm, ok := x.ended[id]
	return sm, ok && sm.full()
}

// summarise notes the summaries of the tasks among ids that have none (or
// only an end state), reading them from the state database in one read.
// Those not finished there (being submitted, or run again) are left.
func (d *Daemon) summarise(ids []string) {
	x := d.tasks
	x.mu.Lock()
	var missing []string
	for _, id := range ids {
		if sm, ok := x.ended[id]; !ok || !sm.full() {
			missing = append(missing, id)
		}
	}
	forgets := x.forgets
	x.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	list, err := d.readSummaries(missing)
	if err != nil {
		d.log.Printf("read %d finished tasks: %v", len(missing), err)
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.forgets != forgets {
		return // a task was retried meanwhile: what was read may be old
	}
	for i := range list {
		if sm, ok := x.ended[list[i].ID]; !ok || !sm.full() {
			x.ended[list[i].ID] = summaryOfStored(&list[i])
		}
	}
}

// summaryReader reads summaries from the state database through a
// read-only connection, opened at the first read and kept.
type summaryReader struct {
	path, dir string
	mu        sync.Mutex // guards db, and serialises reads (one connection)
	db        *store.SQLite
}

func (r *summaryReader) read(ids []string) ([]store.Summary, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(); err != nil {
		return nil, err
	}
	return r.db.FinishedSummaries(ids)
}

// briefs reads every stored task as a store.Brief (restore).
func (r *summaryReader) briefs() ([]store.Brief, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(); err != nil {
		return nil, err
	}
	list, err := r.db.Briefs()
	if err != nil {
		return nil, fmt.Errorf("read the tasks of the state database: %w", err)
	}
	return list, nil
}

// open opens the connection if it is not. r.mu must be held.
func (r *summaryReader) open() error {
	if r.db != nil {
		return nil
	}
	db, err := store.OpenSQLiteReadOnly(r.path, r.dir)
	if err != nil {
		return fmt.Errorf("open the state database to read finished tasks: %w", err)
	}
	r.db = db
	return nil
}

func (r *summaryReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
}

func newSummaryReader(stateDir string) *summaryReader {
	return &summaryReader{path: filepath.Join(stateDir, gpusched.StateFile), dir: stateDir}
}
