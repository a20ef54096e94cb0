package supervise

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// The journal: what a scheduler started by a supervisor for a front
// (front.go) tells it of its attempts, without a message. The supervisor
// makes one for each scheduler it starts, an unnamed file in the run
// directory (O_TMPFILE: nothing to clean up after a crash, and the journal
// of a scheduler that died stays the supervisor's to read while the next
// one starts), and the scheduler inherits it. For each attempt it starts
// the scheduler appends one line, a journalRecord, with a plain write: no
// fsync, nobody told (a few µs; see docs/benchmarks.md). When the
// scheduler ends, the supervisor reads it and adopts those of its
// attempts that still run, or whose ends nobody has reaped: its children
// now, found by PID and start time.

// journalRecord is one attempt a scheduler started: what the supervisor
// needs to follow it to its end and record it as it records the attempts
// it runs itself.
type journalRecord struct {
	ID         string        `json:"id"` // the attempt's token; "" when it has none
	Task       string        `json:"task"`
	Attempt    int           `json:"attempt"`
	PID        int           `json:"pid"`
	PGID       int           `json:"pgid"`
	StartTicks uint64        `json:"start_ticks"`
	Since      time.Time     `json:"since"` // when it started running; its timeout counts from then
	Timeout    time.Duration `json:"timeout,omitempty"`
	KillGrace  time.Duration `json:"kill_grace,omitempty"`
	Cgroups    bool          `json:"cgroups,omitempty"`
}

// process returns the attempt's leader.
func (r *journalRecord) process() executor.Process {
	return executor.Process{PID: r.PID, PGID: r.PGID, StartTicks: r.StartTicks}
}

// job returns the attempt as a job to follow.
func (r *journalRecord) job() executor.Job {
	return executor.Job{TaskID: r.Task, Attempt: r.Attempt, Timeout: r.Timeout, KillGrace: r.KillGrace, Token: r.ID}
}

// maxJournalRecord bounds one line of the journal.
const maxJournalRecord = 64 << 10

// createJournal makes a scheduler's journal: an unnamed file in dir, open
// for appending and reading, or, where the file system has no O_TMPFILE,
// one made under a random name and removed at once.
func createJournal(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(journal)"), nil
	}
	for range 10 {
		name := filepath.Join(dir, "supervisor.journal-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create journal: %w", err)
		}
		os.Remove(name)
		return f, nil
	}
	return nil, fmt.Errorf("create journal in %s: no free name", dir)
}

// readJournal returns the records in journal f, in the order they were
// written; a line cut short (the scheduler died writing it) is skipped.
func readJournal(f *os.File) ([]journalRecord, error) {
	sc := bufio.NewScanner(io.NewSectionReader(f, 0, 1<<62))
	sc.Buffer(make([]byte, 0, 64<<10), maxJournalRecord)
	var out []journalRecord
	for sc.Scan() {
		var r journalRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.PID > 0 {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// Journaled runs attempts inside this process, as local.Executor does, in
// a scheduler that a supervisor started for a front (ThisScheduler): each
// attempt that starts is noted in the journal the supervisor gave it, so
// that when this process dies the supervisor, which is its parent and a
// subreaper, adopts the attempts it left running. Recover goes through
// the supervisor, as Executor's does: attempts of an earlier scheduler,
// adopted since, are taken over by token. Its handles are local ones.
type Journaled struct {
	local   local.Executor
	journal *os.File
	sup     Executor // for Recover and Close

	inFlight atomic.Int64 // Execute calls under way
	warn     sync.Once    // the journal cannot be written: said once

	rmu       sync.Mutex          // guards recovered
	recovered map[string]struct{} // tokens of the orphans Recover looked up, until forgotten
}

var _ executor.Executor = (*Journaled)(nil)

// Name is "local".
func (e *Journaled) Name() string { return local.Name }

// HonoursGate: Execute is local.Executor's, which honours Job.Gate.
func (e *Journaled) HonoursGate() {}

var _ executor.Gated = (*Journaled)(nil)

// Execute runs job as local.Executor does, noting it in the journal as
// soon as its process runs (before hooks.Running is told).
func (e *Journaled) Execute(ctx context.Context, job executor.Job, hooks executor.Hooks) executor.Result {
	e.inFlight.Add(1)
	defer e.inFlight.Add(-1)
	running := hooks.Running
	hooks.Running = func(r executor.Running) {
		p, _ := local.DecodeHandle(r.Handle)
		if err := e.note(job, p, r.Since); err != nil {
			e.warn.Do(func() {
				fmt.Fprintf(os.Stderr, "gpusched: cannot write the supervisor's journal (%v): a task running when this scheduler dies will run again\n", err)
			})
		}
		if running != nil {
			running(r)
		}
	}
	return e.local.Execute(ctx, job, hooks)
}

// note appends the record of an attempt whose leader p runs since since.
func (e *Journaled) note(job executor.Job, p executor.Process, since time.Time) error {
	b := appendJournalRecord(make([]byte, 0, 256), &journalRecord{ID: job.Token, Task: job.TaskID, Attempt: job.Attempt,
		PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks, Since: since, Timeout: job.Timeout, KillGrace: job.KillGrace,
		Cgroups: e.local.Cgroups})
	_, err := e.journal.Write(b)
	return err
}

// appendJournalRecord appends r to b as one line of JSON, as
// json.Marshal would write it but without its reflection.
func appendJournalRecord(b []byte, r *journalRecord) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, r.ID)
	b = append(b, `,"task":`...)
	b = strconv.AppendQuote(b, r.Task)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(r.PID), 10)
	b = append(b, `,"pgid":`...)
	b = strconv.AppendInt(b, int64(r.PGID), 10)
	b = append(b, `,"start_ticks":`...)
	b = strconv.AppendUint(b, r.StartTicks, 10)
	b = append(b, `,"since":"`...)
	b = r.Since.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","timeout":`...)
	b = strconv.AppendInt(b, int64(r.Timeout), 10)
	b = append(b, `,"kill_grace":`...)
	b = strconv.AppendInt(b, int64(r.KillGrace), 10)
	if r.Cgroups {
		b = append(b, `,"cgroups":true`...)
	}
	return append(b, "}\n"...)
}

// Recover finds the orphans of earlier schedulers through the supervisor,
// as Executor.Recover does.
func (e *Journaled) Recover(orphans []executor.Orphan) []executor.Recovery {
	e.rmu.Lock()
	for _, o := range orphans {
		if o.Job.Token != "" {
			if e.recovered == nil {
				e.recovered = map[string]struct{}{}
			}
			e.recovered[o.Job.Token] = struct{}{}
		}
	}
	e.rmu.Unlock()
	return e.sup.Recover(orphans)
}

// Sweep passes running on to the supervisor (see Executor.Sweep).
func (e *Journaled) Sweep(running []string) { e.sup.Sweep(running) }

// Forget passes on to the supervisor the end of an attempt that Recover
// looked up (see Executor.Forget): only those can have a record in the
// results file; the attempts this process ran itself have none.
func (e *Journaled) Forget(token string, pid int) {
	e.rmu.Lock()
	_, ours := e.recovered[token]
	delete(e.recovered, token)
	e.rmu.Unlock()
	if ours {
		e.sup.Forget(token, pid)
	}
}

// Close lets go of the connection Recover made to the supervisor, if any,
// and, when no attempt runs through e any more (the scheduler stopped
// them), empties the journal: there is nothing in it to adopt, and the
// supervisor need not read it.
func (e *Journaled) Close() error {
	if e.inFlight.Load() == 0 {
		_ = e.journal.Truncate(0)
	}
	return e.sup.Close()
}

var _ executor.Signaler = (*Journaled)(nil)

// Signal sends sig to the process group of the attempt of h (a local
// handle); see executor.Signaler.
func (e *Journaled) Signal(h executor.Handle, sig syscall.Signal) error { return local.Signal(h, sig) }
