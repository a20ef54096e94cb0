package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// "gpusched status" for a person: a count by state, a table of the tasks
// with a note on each, and the cards.

// eventNote says, for the table, why a task's completion event (or
// failure event, or webhook) is pending.
func eventNote(evs []store.EventWrite) string {
	if len(evs) == 0 {
		return ""
	}
	ev := evs[len(evs)-1]
	event, handler := "completion event", "completion handler"
	switch ev.Kind {
	case store.EventFailure:
		event, handler = "failure event", "failure handler"
	case store.EventWebhook:
		event, handler = "webhook event", "webhook"
	}
	if ev.Tries == 0 {
		return event + " pending"
	}
	return fmt.Sprintf("%s failed %d time(s): %s", handler, ev.Tries, ev.LastError)
}

// writeStatusTable writes the status of the run v as read at now. With a
// width (a terminal's; 0: none), each line fits in it: long notes drop their
// details first (the list of what a card holds; see fitNote), long task ids
// are cut in the middle.
func writeStatusTable(w io.Writer, v *runView, now time.Time, width int) {
	var counts [task.Cancelled + 1]int
	notNeeded := 0
	for i := range v.rows {
		r := &v.rows[i]
		if int(r.State) < len(counts) {
			counts[r.State]++
		}
		if r.State == task.Blocked && r.NotNeeded {
			notNeeded++
		}
	}
	var parts []string
	for _, st := range []task.State{task.Complete, task.Running, task.Pending, task.Failed, task.Blocked, task.Cancelled} {
		switch n := counts[st]; {
		case st == task.Blocked && notNeeded > 0 && n > notNeeded:
			parts = append(parts, fmt.Sprintf("%d %s (%d not needed)", n, st, notNeeded))
		case st == task.Blocked && notNeeded > 0:
			parts = append(parts, fmt.Sprintf("%d %s (not needed)", n, st))
		case n > 0:
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	fmt.Fprintf(w, "%d tasks: %s\n", len(v.rows), strings.Join(parts, ", "))
	switch {
	case v.pid > 0:
		fmt.Fprintf(w, "scheduler: running (pid %d)\n\n", v.pid)
	case counts[task.Running] > 0:
		fmt.Fprintf(w, "scheduler: not running; the next run adopts the tasks shown running that still run, records those that ended, and runs the others again\n\n")
	default:
		fmt.Fprintf(w, "scheduler: not running\n\n")
	}
	// The cells of all rows in one allocation, and the rows over them.
	cells := make([]string, statusColumns*(len(v.rows)+1))
	rows := make([][]string, len(v.rows)+1)
	for i := range rows {
		rows[i] = cells[i*statusColumns : (i+1)*statusColumns : (i+1)*statusColumns]
	}
	copy(rows[0], []string{"TASK", "STATE", "ATTEMPTS", "EXIT", "GPU", "TIME", "NOTE"})
	for i := range v.rows {
		var sp *specView
		if i < len(v.specs) {
			sp = &v.specs[i]
		}
		fillTaskRow(rows[i+1], v, &v.rows[i], sp, now)
	}
	fitColumns(rows, width)
	writeAligned(w, rows)
	if v.gpuTasks && (len(v.cards) > 0 || v.unknown != "") {
		fmt.Fprintln(w)
		writeCards(w, cardsView{cards: v.cards, unknown: v.unknown, at: v.cardsAt, saved: true, running: v.pid > 0}, now)
		if v.topology != "" {
			fmt.Fprintf(w, "note: %s\n", v.topology)
		}
	}
}

// statusColumns is how many columns the status table has.
const statusColumns = 7

// taskRow is a task's row of the status table; sp is what status reads
// of its definition (nil: nothing).
func taskRow(v *runView, r store.Row, sp *specView, now time.Time) []string {
	row := make([]string, statusColumns)
	fillTaskRow(row, v, &r, sp, now)
	return row
}

// fillTaskRow writes the cells of a task's row into row.
func fillTaskRow(row []string, v *runView, r *store.Row, sp *specView, now time.Time) {
	var res gpusched.ResourceRequest
	if sp != nil {
		res = sp.Resources
	}
	exit, card, took := "-", "-", "-"
	if r.ExitCode != nil {
		exit = strconv.Itoa(*r.ExitCode)
	}
	if a := r.LastAttempt(); a != nil {
		card = gpuList(a.GPU, a.GPUs)
		end := a.End
		if !a.Ended() {
			end = now
		}
		took = round(end.Sub(a.Start)).String()
		if a.Signal != "" && r.ExitCode == nil {
			exit = a.Signal
		}
	}
	note, waiting := r.Error, v.waitingNote(&r.Record)
	switch r.State {
	case task.Complete:
		note = eventNote(v.pending[r.ID])
	case task.Running:
		note = ""
		a := r.LastAttempt()
		switch {
		case waiting != "":
			note = waiting // queued in Slurm, or waiting to be submitted there
		case a != nil && a.Job != nil:
			note = jobText(a.Job)
		}
		if r.Rerun != "" {
			note = strings.TrimPrefix(note+"; runs again: "+r.Rerun, "; ")
		}
		if a != nil && a.Adopted {
			note = strings.TrimPrefix(note+"; adopted after a restart", "; ")
		}
		if b := budgetNote(res); b != "" {
			note = strings.TrimPrefix(note+"; "+b, "; ")
		}
		if f, ok := v.fates[r.ID]; ok {
			note = f.Note
		}
	case task.Pending:
		note = waiting
		if r.Rerun != "" {
			note = "runs again (" + r.Rerun + "); " + note
		}
		if b := budgetNote(res); b != "" {
			note = strings.TrimPrefix(note+"; "+b, "; ")
		}
	case task.Failed, task.Blocked, task.Cancelled:
		// Its error says why.
	}
	if a := r.LastAttempt(); a != nil && a.OverHostMemory() {
		note = strings.TrimPrefix(note+"; "+a.HostMemoryNote(), "; ")
	}
	row[0], row[1], row[2], row[3], row[4], row[5], row[6] = r.ID, r.State.String(), strconv.Itoa(len(r.Attempts)), exit, card, took, note
}

// The status table's columns are tableGap cells apart. On a narrow
// terminal the task ids give up room for the notes, down to minIDWidth
// cells, until the notes have minNoteWidth.
const (
	tableGap     = 2
	minNoteWidth = 50
)

// fitColumns shortens, in place, the first column (task ids) and the last
// (notes) of rows so that every row fits in width cells; width 0 leaves
// them as they are. The first row is the header.
func fitColumns(rows [][]string, width int) {
	if width <= 0 || len(rows) == 0 {
		return
	}
	last := len(rows[0]) - 1
	widths := make([]int, last)
	for _, row := range rows {
		for i := range widths {
			widths[i] = max(widths[i], ansi.StringWidth(row[i]))
		}
	}
	before := func() int { // the cells before the note
		n := 0
		for _, w := range widths {
			n += w + tableGap
		}
		return n
	}
	if short := minNoteWidth - (width - before()); short > 0 && widths[0] > minIDWidth {
		widths[0] = max(minIDWidth, widths[0]-short)
	}
	room := max(1, width-before())
	for i, row := range rows {
		if i > 0 {
			row[0] = elideMiddle(row[0], widths[0])
		}
		row[last] = fitNote(row[last], room)
	}
}

// fitNote cuts a note to width cells, keeping what matters. A note says
// the most important first ("needs 24000 MiB; best card 1 has 5047 MiB
// left (foreign 0, sweep-1 holds 20000, ...); card 0 cooling down ...");
// its details in parentheses make room first, longest first, so that what
// comes after them (the other cards) shows; what is still too long is cut
// at the end.
func fitNote(note string, width int) string {
	for ansi.StringWidth(note) > width {
		from, to := longestParenthesis(note)
		if to-from <= len("(…)") {
			break
		}
		note = note[:from] + "(…)" + note[to:]
	}
	if ansi.StringWidth(note) <= width {
		return note
	}
	// Cut at the end, between words when one ends near the cut.
	cut := ansi.Truncate(note, width-1, "")
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)*2/3 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ;,(") + "…"
}

// longestParenthesis returns where the longest outermost "(...)" of s
// starts and ends (past its ")"), or 0, 0 if s has none.
func longestParenthesis(s string) (from, to int) {
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			if depth == 0 {
				start = i
			}
			depth++
		case ')':
			if depth == 0 {
				continue
			}
			if depth--; depth == 0 && i+1-start > to-from {
				from, to = start, i+1
			}
		}
	}
	return from, to
}

// cardsView is a view of the cards and where it comes from.
type cardsView struct {
	cards   []gpu.CardView
	unknown string    // why the GPU state is unknown, if it is
	at      time.Time // when it was read; zero if not known
	saved   bool      // read back from a run's state database, not from nvidia-smi now
	running bool      // saved: the scheduler that saved it still runs
}

// past reports whether the view is of a run that has ended: then nothing
// in it (a cooldown, a quarantine, a reservation, the tasks on a card)
// holds any more.
func (cv cardsView) past() bool { return cv.saved && !cv.running }

// writeCards prints the cards as admission sees them; a saved view says
// how old it is, and a past one says that it is.
func writeCards(w io.Writer, cv cardsView, now time.Time) {
	if cv.unknown != "" {
		if cv.past() {
			fmt.Fprintf(w, "GPU state was unknown when the run ended: %s\n", cv.unknown)
		} else {
			fmt.Fprintf(w, "GPU state unknown: %s\n", cv.unknown)
		}
	}
	if len(cv.cards) == 0 {
		return
	}
	if !cv.at.IsZero() {
		age := ""
		if cv.saved {
			age = ", " + clock(now.Sub(cv.at)) + " ago"
		}
		if cv.past() {
			age += "; the run has ended"
		}
		unit := "MiB"
		if cv.past() {
			unit += `; "gpusched gpus" reads them now`
		}
		fmt.Fprintf(w, "cards as of %s%s (%s):\n", cv.at.Local().Format(time.TimeOnly), age, unit)
	}
	tw := tabwriter.NewWriter(w, 0, 0, tableGap, ' ', 0)
	fmt.Fprintln(tw, "CARD\tNAME\tTOTAL\tUSED\tFOREIGN\tCHARGED\tAVAILABLE\tSTATE\tTASKS\t")
	for _, c := range cv.cards {
		var tasks []string
		for _, h := range c.Holders {
			s := fmt.Sprintf("%s %d", h.Task, h.ChargedMiB())
			if h.Exclusive {
				s += " (exclusive)"
			}
			tasks = append(tasks, s)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", c.Index, c.Name, c.TotalMiB, c.UsedMiB, c.ForeignMiB,
			c.ChargedMiB, c.AvailableMiB, cardState(c, now, cv.past()), strings.Join(tasks, ", "))
	}
	tw.Flush()
}

// cardState is a card's STATE cell. A cooldown or quarantine that is over
// by now says when it ended rather than until when it lasts; in the view
// of a run that has ended, one that was on says "was": no scheduler keeps
// it now.
func cardState(c gpu.CardView, now time.Time, past bool) string {
	s := c.State.String()
	if c.Reason != "" && c.State != gpu.CardOK {
		s += ": " + c.Reason
	}
	if !c.Until.IsZero() {
		until := c.Until.Local().Format(time.TimeOnly)
		if c.Until.After(now) {
			s += " (until " + until + ")"
		} else {
			s += " (ended " + until + ")"
		}
	}
	if past && (c.State == gpu.CardCooling || c.State == gpu.CardQuarantined) {
		s = "was " + s
	}
	if c.ReservedFor != "" && !past {
		s += ", reserved for " + c.ReservedFor
	}
	return s
}
