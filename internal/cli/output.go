package cli

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// What "gpusched run" shows a person while it goes: a live display on a
// terminal (progress_*.go), plain timestamped lines anywhere else. Both are
// fed by the scheduler's observer, which runs on the scheduler's loop: they
// must never block it on the terminal.

// runDisplay is the human side of a run's output.
type runDisplay interface {
	// observe takes a committed transition. It runs on the scheduler's
	// loop and must return at once, whatever the terminal does.
	observe(ev gpusched.Event)
	// begin is called once the tasks are submitted, with their records
	// (kept, blocked and pending), just before the run starts.
	begin(records []gpusched.Record)
	// interrupted says that the run is being stopped (Ctrl-C, SIGTERM),
	// with msg; it may be called from any goroutine.
	interrupted(msg string)
	// stop draws the final frame, restores the terminal and writes out
	// what is queued. It is idempotent; after it the writer is free for
	// the summary.
	stop()
}

// isTerminal reports whether w is a terminal that can take a live display.
// TERM=dumb (Emacs shells, some CI runners) gets plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return false
	}
	return os.Getenv("TERM") != "dumb"
}

// ---------------------------------------------------------------------------
// Plain lines

// cardsText says on which card an attempt runs and with how much memory
// ("card 2, 4000 MiB"), or, on several, which and how much on each
// ("cards 3,1, 20000 MiB each").
func cardsText(a *gpusched.Attempt) string {
	if len(a.GPUs) > 1 {
		return fmt.Sprintf("cards %s, %d MiB each", gpuList(a.GPU, a.GPUs), a.MemRequestedMiB)
	}
	return fmt.Sprintf("card %d, %d MiB", *a.GPU, a.MemRequestedMiB)
}

// gpuList is the cards of an attempt (its gpu and gpus) as the status
// table's gpu column shows them: "3,1" for several, "2" for one, "-" for
// none.
func gpuList(gpu *int, gpus []int) string {
	switch {
	case len(gpus) > 0:
		return task.CardList(gpus)
	case gpu != nil:
		return strconv.Itoa(*gpu)
	}
	return "-"
}

// eventLine formats a transition as one timestamped line, or "" for none.
// Its format is stable: people and scripts read it in CI logs.
func eventLine(ev gpusched.Event) string {
	ts := ev.Time.Format("15:04:05")
	a := ev.Attempt
	switch ev.Kind {
	case gpusched.EventStarted:
		detail := fmt.Sprintf("attempt %d", a.Number)
		if a.GPU != nil {
			detail += ", " + cardsText(&a)
		}
		if ev.Rerun != "" {
			detail += "; runs again: " + ev.Rerun
		}
		return fmt.Sprintf("%s start     %s (%s)", ts, ev.TaskID, detail)
	case gpusched.EventComplete:
		return fmt.Sprintf("%s complete  %s (attempt %d, %s)", ts, ev.TaskID, a.Number, round(a.End.Sub(a.Start)))
	case gpusched.EventRetrying:
		next := ""
		if !ev.RetryAt.IsZero() {
			next = fmt.Sprintf("; next attempt at %s (in %s)", ev.RetryAt.Format("15:04:05"), round(ev.RetryAt.Sub(a.End)))
		}
		return fmt.Sprintf("%s retry     %s: attempt %d %s; log %s%s", ts, ev.TaskID, a.Number, a.Error, a.LogPath, next)
	case gpusched.EventFailed:
		if a.Number == 0 {
			return fmt.Sprintf("%s failed    %s: %s", ts, ev.TaskID, ev.Error)
		}
		return fmt.Sprintf("%s failed    %s: attempt %d %s; log %s", ts, ev.TaskID, a.Number, a.Error, a.LogPath)
	case gpusched.EventBlocked:
		if ev.NotNeeded {
			return fmt.Sprintf("%s skipped   %s (not needed: %s completed)", ts, ev.TaskID, ev.BlockedBy)
		}
		return fmt.Sprintf("%s blocked   %s (by %s)", ts, ev.TaskID, ev.BlockedBy)
	case gpusched.EventCancelled:
		return fmt.Sprintf("%s cancelled %s", ts, ev.TaskID)
	case gpusched.EventDeliveryFailed:
		what, next := "completion handler", "will retry"
		switch ev.Notification {
		case "failure":
			what = "failure handler"
		case "run-end":
			what = "on_run_end"
		case "webhook":
			what = "webhook"
		}
		if ev.GaveUp {
			next = "given up"
		}
		return fmt.Sprintf("%s event     %s: %s failed, %s: %s", ts, cmp.Or(ev.TaskID, "run"), what, next, ev.Error)
	case gpusched.EventCardQuarantined:
		return fmt.Sprintf("%s gpu       card %d quarantined: %s", ts, ev.Card, ev.Error)
	case gpusched.EventGPUUnknown:
		return fmt.Sprintf("%s gpu       %s", ts, ev.Error)
	case gpusched.EventGPUKnown:
		return fmt.Sprintf("%s gpu       nvidia-smi answers again; GPU tasks may start", ts)
	case gpusched.EventAdopted:
		if ev.Ended {
			return fmt.Sprintf("%s adopted   %s (attempt %d ended while no scheduler ran; its result is recorded)", ts, ev.TaskID, a.Number)
		}
		detail := fmt.Sprintf("attempt %d, running since %s", a.Number, a.Start.Format("2006-01-02 15:04:05"))
		if a.PID > 0 {
			detail += fmt.Sprintf(", pid %d", a.PID)
		}
		if a.GPU != nil {
			detail += ", " + cardsText(&a)
		}
		if j := jobText(a.Job); j != "" {
			detail += ", " + j
		}
		return fmt.Sprintf("%s adopted   %s (%s)", ts, ev.TaskID, detail)
	case gpusched.EventJob:
		return fmt.Sprintf("%s job       %s: %s", ts, ev.TaskID, jobText(a.Job))
	}
	return ""
}

// plainDisplay writes eventLine's lines through a queue, so that a stalled
// reader (a paused pager, a full pipe) never stalls the scheduler.
type plainDisplay struct {
	q      *lineQueue
	stderr io.Writer
	// cancelled holds the tasks cancelled as the run stopped; the tasks
	// they block get no line each (the summary counts them). Touched by
	// observe only, on the scheduler's loop.
	cancelled map[string]bool
	// jobSaid is the last job line said of each task whose attempt runs
	// in a batch system: the engine tells the command's start with the
	// job unchanged, which says nothing new here. Dropped at the
	// attempt's end.
	jobSaid map[string]string
	// line formats an event; nil: eventLine.
	line func(gpusched.Event) string
}

func newPlainDisplay(w, stderr io.Writer) *plainDisplay {
	return &plainDisplay{q: newLineQueue(w), stderr: stderr, cancelled: map[string]bool{}, jobSaid: map[string]string{}}
}

func (p *plainDisplay) observe(ev gpusched.Event) {
	switch ev.Kind {
	case gpusched.EventCancelled:
		p.cancelled[ev.TaskID] = true
		delete(p.jobSaid, ev.TaskID)
	case gpusched.EventBlocked:
		if p.cancelled[ev.BlockedBy] {
			return
		}
	case gpusched.EventJob:
		said := jobText(ev.Attempt.Job)
		if p.jobSaid[ev.TaskID] == said {
			return
		}
		p.jobSaid[ev.TaskID] = said
	case gpusched.EventRetrying, gpusched.EventComplete, gpusched.EventFailed:
		delete(p.jobSaid, ev.TaskID)
	case gpusched.EventStarted, gpusched.EventDeliveryFailed, gpusched.EventCardQuarantined, gpusched.EventGPUUnknown,
		gpusched.EventGPUKnown, gpusched.EventAdopted:
	}
	format := eventLine
	if p.line != nil {
		format = p.line
	}
	if line := format(ev); line != "" {
		p.q.add(line + "\n")
	}
}

func (p *plainDisplay) begin([]gpusched.Record) {}
func (p *plainDisplay) interrupted(msg string)  { fmt.Fprintln(p.stderr, msg) }
func (p *plainDisplay) stop()                   { p.q.close() }

// lineQueue writes lines to w from its own goroutine, in order, one Write
// for the lines queued since the last one (so each line is out as soon as
// the writer is free, and a reader tailing a file sees whole lines; a
// turn of the scheduler that ends one task and starts the next costs one
// write, not two). add never blocks on w. After a write error the rest is
// dropped, and err says why.
type lineQueue struct {
	w      io.Writer
	mu     sync.Mutex
	cond   *sync.Cond
	lines  []string
	closed bool
	err    error
	done   chan struct{}
	once   sync.Once
}

func newLineQueue(w io.Writer) *lineQueue {
	q := &lineQueue{w: w, done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.loop()
	return q
}

func (q *lineQueue) add(line string) {
	q.mu.Lock()
	if !q.closed && q.err == nil {
		q.lines = append(q.lines, line)
		q.cond.Signal()
	}
	q.mu.Unlock()
}

func (q *lineQueue) loop() {
	defer close(q.done)
	var buf []byte     // the lines of one write
	var spare []string // the last batch's slice, emptied: room for the next
	for {
		q.mu.Lock()
		for len(q.lines) == 0 && !q.closed {
			q.cond.Wait()
		}
		batch := q.lines
		q.lines = spare[:0]
		closed := q.closed
		q.mu.Unlock()
		buf = buf[:0]
		for _, line := range batch {
			buf = append(buf, line...)
		}
		clear(batch)
		spare = batch
		if len(buf) > 0 {
			if _, err := q.w.Write(buf); err != nil {
				q.mu.Lock()
				q.err = err
				q.lines = nil
				q.mu.Unlock()
			}
		}
		if cap(buf) > maxQueueBuf {
			buf, spare = nil, nil // a burst's (a big run's first lines): not kept
		}
		if closed {
			q.mu.Lock()
			empty := len(q.lines) == 0
			q.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// maxQueueBuf is the most room a lineQueue keeps for its next write.
const maxQueueBuf = 64 << 10

// close writes out what is queued and stops the queue; it is idempotent.
func (q *lineQueue) close() error {
	q.once.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.cond.Signal()
		q.mu.Unlock()
	})
	<-q.done
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// printable makes text from a task (its log, its error) safe to print on
// one line of a terminal: escape sequences removed, what a carriage return
// overwrote dropped, other control characters shown as '?'.
func printable(s string) string {
	s = ansi.Strip(s)
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r < ' ' || r == 0x7f:
			if r == '\r' {
				return -1
			}
			return '?'
		}
		return r
	}, s)
}
