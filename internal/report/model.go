package report

import (
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Outcome is how an attempt ended, which colours its bar.
type Outcome string

// The outcomes, in legend order.
const (
	Complete    Outcome = "complete"
	Failed      Outcome = "failed"
	TimedOut    Outcome = "timed out"
	Cancelled   Outcome = "cancelled"
	Interrupted Outcome = "interrupted"
	Running     Outcome = "running"
)

// Outcomes lists every outcome, in legend order.
var Outcomes = []Outcome{Complete, Failed, TimedOut, Cancelled, Interrupted, Running}

// String returns the outcome's name, as the legend shows it.
func (o Outcome) String() string { return string(o) }

// Class is the outcome's CSS class, e.g. "o-timed-out".
func (o Outcome) Class() string { return "o-" + strings.ReplaceAll(string(o), " ", "-") }

// Model is a report ready to render: every position computed, every text
// formatted. Coordinates are in SVG user units.
type Model struct {
	RunDir     string
	Generated  string // when the data was read
	Live       bool
	Start, End time.Time
	Span       string     // e.g. "2025-06-01 09:02:46 – 09:02:57 (11.2s)"
	States     []Count    // tasks by state, non-zero only
	Tasks      int        // number of tasks
	Attempts   int        // number of attempts
	Cards      int        // number of cards shown
	GPUUnknown string     // why the GPU state could not be read
	Runs       []Run      // the runs on the run directory, oldest first
	RunLines   []string   // one line per run for the header, when there are several
	Outcomes   []Count    // attempts by outcome: the legend
	Timeline   Timeline   // lanes and bars
	Memory     []MemChart // one per card with samples or lanes
	MemoryNote string     // said instead of charts when there is nothing to draw
	MemOver    bool       // some chart draws a charge beyond its card's total
	Rows       []TableRow // one per task, in submission order
}

// Count is a number of things of one kind.
type Count struct {
	Name  string
	Class string
	N     int
}

// item is one attempt placed in time.
type item struct {
	row, att   int
	start, end time.Time
	// known is how long it is known to have run: its end, except for an
	// attempt interrupted by its scheduler's stop, whose recorded end is
	// when the next run found it: that one ran at least to the last
	// record of its run.
	known   time.Time
	outcome Outcome
	// card is the card of the lane it is drawn in: the first of cards
	// until buildTimeline draws it on each; -1 for an attempt on none.
	card int
	// cards are every card it ran on (task.Attempt.Cards): an attempt
	// on several is drawn in the lane of each, and charged on each.
	cards []int
	open  bool // no recorded end
}

// Build computes the report of d.
func Build(d Data) Model {
	loc := d.Location
	if loc == nil {
		loc = time.Local
	}
	m := Model{RunDir: d.RunDir, Live: d.Live, GPUUnknown: d.GPUUnknown, Tasks: len(d.Rows)}
	if !d.Now.IsZero() {
		m.Generated = d.Now.In(loc).Format("2006-01-02 15:04:05 MST")
	}

	// The first and last moments the run recorded anything: the time span,
	// and where attempts without an end are drawn to when no scheduler runs
	// (they were interrupted; when, nothing says).
	var first, last time.Time
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	for i := range d.Rows {
		r := &d.Rows[i]
		see(r.Submitted)
		for j := range r.Attempts {
			a := &r.Attempts[j]
			see(a.ReadyAt)
			see(a.Start)
			see(a.End)
		}
	}
	for _, s := range d.Samples {
		see(s.At)
	}
	recorded := !first.IsZero()
	now := d.Now
	if now.IsZero() {
		now = last
	}
	openEnd := last
	if d.Live {
		openEnd = now
		see(now)
	}
	m.Runs = findRuns(&d, now)
	if len(m.Runs) > 1 {
		for _, r := range m.Runs {
			m.RunLines = append(m.RunLines, runLine(r, loc))
		}
	}

	// Attempts in time, with their outcome.
	var items []item
	outcomeN := map[Outcome]int{}
	for i := range d.Rows {
		r := &d.Rows[i]
		for j := range r.Attempts {
			a := &r.Attempts[j]
			it := item{row: i, att: j, start: a.Start, end: a.End, card: -1}
			if it.cards = a.Cards(); len(it.cards) > 0 {
				it.card = it.cards[0]
			}
			it.outcome = outcomeOf(r, j, d.Live)
			if !a.Ended() {
				it.open = true
				it.end = openEnd
			}
			if it.end.Before(it.start) {
				it.end = it.start
			}
			it.known = it.end
			if a.Interrupted && len(m.Runs) > 0 {
				if runEnd := m.Runs[runIndex(m.Runs, it.start)].End; runEnd.Before(it.known) {
					it.known = runEnd
					if runEnd.Before(it.start) {
						it.known = it.start
					}
				}
			}
			items = append(items, it)
			outcomeN[it.outcome]++
		}
	}
	m.Attempts = len(items)
	for _, o := range Outcomes {
		m.Outcomes = append(m.Outcomes, Count{Name: string(o), Class: o.Class(), N: outcomeN[o]})
	}

	// States, in the order status lists them.
	stateN := map[task.State]int{}
	for i := range d.Rows {
		stateN[d.Rows[i].State]++
	}
	for _, st := range []task.State{task.Complete, task.Running, task.Pending, task.Failed, task.Blocked, task.Cancelled} {
		if stateN[st] > 0 {
			m.States = append(m.States, Count{Name: st.String(), Class: "s-" + st.String(), N: stateN[st]})
		}
	}

	// The time span.
	if first.IsZero() {
		first, last = now, now
	}
	m.Start, m.End = first, last
	span := last.Sub(first)
	if span < 10*time.Millisecond {
		span = 10 * time.Millisecond
	}
	m.Span = "nothing recorded yet"
	if recorded {
		m.Span = spanText(first, last, loc)
	}

	// Cards: the saved view's, and any that attempts or samples name.
	cardSet := map[int]gpu.CardView{}
	for _, c := range d.Cards {
		if c.State != gpu.CardHidden {
			cardSet[c.Index] = c
		}
	}
	for _, it := range items {
		for _, c := range it.cards {
			if _, ok := cardSet[c]; !ok {
				cardSet[c] = gpu.CardView{Index: c}
			}
		}
	}
	for _, s := range d.Samples {
		if c, ok := cardSet[s.Index]; !ok || c.TotalMiB == 0 {
			c.Index, c.TotalMiB = s.Index, s.TotalMiB
			cardSet[s.Index] = c
		}
	}
	cards := make([]int, 0, len(cardSet))
	for i := range cardSet {
		cards = append(cards, i)
	}
	slices.Sort(cards)
	m.Cards = len(cards)

	m.Timeline = buildTimeline(d, items, cards, cardSet, m.Runs, first, span, loc)
	if d.Live {
		m.Timeline.NowX = round1(m.Timeline.PlotX + frac(now.Sub(first), span)*m.Timeline.PlotW)
	}
	m.Memory, m.MemoryNote = buildMemory(d.Samples, items, &d, cards, cardSet, m.Runs, first, span, loc)
	m.MemOver = slices.ContainsFunc(m.Memory, func(ch MemChart) bool { return ch.Over != "" })
	m.Rows = buildRows(d, items)
	return m
}

// outcomeOf classifies attempt j of r.
func outcomeOf(r *store.Row, j int, live bool) Outcome {
	a := &r.Attempts[j]
	switch {
	case !a.Ended() && live:
		return Running
	case !a.Ended() || a.Interrupted:
		return Interrupted
	case a.Cancelled:
		return Cancelled
	case a.TimedOut:
		return TimedOut
	case j == len(r.Attempts)-1 && r.State == task.Complete:
		return Complete
	case a.ExitCode != nil && *a.ExitCode == 0 && a.Error == "" && a.Signal == "" && j < len(r.Attempts)-1:
		// An earlier attempt that succeeded: the task ran again in a later
		// run (its dependencies were rerun).
		return Complete
	default:
		return Failed
	}
}
