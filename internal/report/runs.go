package report

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// A run directory holds the history of every `gpusched run` on it, and the
// state database keeps no list of those runs. The report finds them from
// what it does keep:
//
//   - An attempt recorded as interrupted was running when its scheduler
//     stopped; its recorded end is when the next scheduler opened the run
//     directory and found it. That is the start of a run, to the
//     nanosecond.
//   - Every task a run submits gets that run's submission time; a task's
//     submission time is a run's start when no attempt was running or
//     waiting across it. (Each run overwrites the submission times of the
//     tasks it submits, so only the latest run's, and those of tasks that
//     later runs no longer name, survive.)
//   - A stretch longer than runGap in which nothing was recorded and no
//     attempt was running or waiting for a slot is a gap between runs. This
//     finds the boundaries the two rules above cannot (an earlier run that
//     ended normally and was followed by more than one later run).
//
// Within a run, nothing is ever left that long without a record while the
// scheduler has work: attempts cover their run time, and from ready to
// start their wait; GPU samples are saved at least every 10s while GPU
// tasks wait or run.

// runGap is the longest stretch within one run with nothing recorded and
// no attempt running or waiting: three times the longest a scheduler with
// GPU tasks waiting goes without a memory sample.
const runGap = 30 * time.Second

// RunStart says how the report knows where a run began.
type RunStart int

const (
	// RunFirst is the first run: it starts at the first thing recorded.
	RunFirst RunStart = iota
	// RunResumed started a scheduler that found attempts of the run before
	// it still marked running, and recorded them as interrupted.
	RunResumed
	// RunSubmitted started with a submission while no attempt ran.
	RunSubmitted
	// RunAfterGap follows a stretch longer than runGap with nothing
	// recorded and nothing running or waiting.
	RunAfterGap
)

// String says how the run started, for people.
func (s RunStart) String() string {
	switch s {
	case RunFirst:
		return "first run"
	case RunResumed:
		return "resumed: attempts of the run before were recorded as interrupted"
	case RunSubmitted:
		return "tasks submitted while nothing ran"
	case RunAfterGap:
		return fmt.Sprintf("nothing recorded for more than %s before it", compact(runGap))
	}
	return fmt.Sprintf("RunStart(%d)", int(s))
}

// Run is one stretch of time in which a scheduler worked on the run
// directory, as far as its records show.
type Run struct {
	N          int       // from 1
	Start, End time.Time // its first and last records (End: now while it runs)
	Began      RunStart
	// Interrupted counts its attempts that were running when its
	// scheduler stopped.
	Interrupted int
	Live        bool // the scheduler running now
}

// mark is a moment something was recorded; a start mark is a moment a
// scheduler is known to have started (an interrupted attempt's recorded
// end) or to have submitted tasks.
type mark struct {
	t       time.Time
	start   bool
	resumed bool // an interrupted attempt's recorded end
}

// span is a stretch during which a scheduler was running for sure.
type span struct{ from, to time.Time }

// findRuns splits the recorded history of d into runs, oldest first. now
// is when the data was read; while a scheduler runs (d.Live) the last run
// lasts until now.
func findRuns(d *Data, now time.Time) []Run {
	n := len(d.Samples) + 1
	for i := range d.Rows {
		n += 1 + 3*len(d.Rows[i].Attempts)
	}
	marks := make([]mark, 0, n)
	cover := make([]span, 0, n/3+1)
	var lastSubmit time.Time
	add := func(t time.Time, start, resumed bool) {
		if !t.IsZero() {
			marks = append(marks, mark{t: t, start: start, resumed: resumed})
		}
	}
	for i := range d.Rows {
		r := &d.Rows[i]
		add(r.Submitted, true, false)
		if r.Submitted.After(lastSubmit) {
			lastSubmit = r.Submitted
		}
		for j := range r.Attempts {
			a := &r.Attempts[j]
			from := a.Start
			if !a.ReadyAt.IsZero() && a.ReadyAt.Before(from) {
				from = a.ReadyAt
			}
			add(a.ReadyAt, false, false)
			add(a.Start, false, false)
			switch {
			case a.Interrupted && a.Ended():
				// Running until some time after its run's last record:
				// only its wait is known to be inside a run.
				add(a.End, true, true)
				cover = append(cover, span{from, a.Start})
			case a.Ended():
				add(a.End, false, false)
				cover = append(cover, span{from, a.End})
			case d.Live:
				cover = append(cover, span{from, now})
			default:
				cover = append(cover, span{from, a.Start})
			}
		}
	}
	for _, s := range d.Samples {
		add(s.At, false, false)
	}
	if d.Live {
		add(now, false, false)
		if !lastSubmit.IsZero() && lastSubmit.Before(now) {
			cover = append(cover, span{lastSubmit, now})
		}
	}
	if len(marks) == 0 {
		return nil
	}
	// At the same moment, start marks first: a root task becomes ready in
	// the instant it is submitted.
	slices.SortFunc(marks, func(a, b mark) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return -cmp.Compare(boolInt(a.start), boolInt(b.start))
	})
	cover = mergeSpans(cover)

	runs := []Run{{N: 1, Start: marks[0].t, End: marks[0].t, Began: RunFirst}}
	for i := 1; i < len(marks); i++ {
		if began, ok := newRun(marks[i-1], marks[i], cover); ok {
			runs = append(runs, Run{N: len(runs) + 1, Start: marks[i].t, End: marks[i].t, Began: began})
			continue
		}
		runs[len(runs)-1].End = marks[i].t
	}
	for i := range d.Rows {
		for _, a := range d.Rows[i].Attempts {
			if a.Interrupted {
				runs[runIndex(runs, a.Start)].Interrupted++
			}
		}
	}
	if d.Live {
		last := &runs[len(runs)-1]
		last.Live = true
		if now.After(last.End) {
			last.End = now
		}
	}
	return runs
}

// newRun says whether mark m, right after prev, starts a new run, and how
// it is known.
func newRun(prev, m mark, cover []span) (RunStart, bool) {
	if !m.t.After(prev.t) || covered(cover, prev.t, m.t) {
		return 0, false
	}
	switch {
	case m.resumed:
		return RunResumed, true
	case m.start && !prev.start:
		// Not right after a start mark: a resumed run submits its tasks
		// just after it opened.
		return RunSubmitted, true
	case m.t.Sub(prev.t) > runGap && !(prev.resumed && m.start):
		return RunAfterGap, true
	}
	return 0, false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeSpans returns the union of spans as disjoint spans in time order.
func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			if s.to.After(out[n-1].to) {
				out[n-1].to = s.to
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// covered reports whether one of the disjoint spans holds all of [a, b].
func covered(spans []span, a, b time.Time) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].to.After(a) || spans[i].to.Equal(a) })
	return i < len(spans) && !spans[i].from.After(a) && !spans[i].to.Before(b)
}

// runIndex is the index of the run t belongs to: the last one that
// started at or before t (the first for earlier times).
func runIndex(runs []Run, t time.Time) int {
	i := sort.Search(len(runs), func(i int) bool { return runs[i].Start.After(t) })
	return max(i-1, 0)
}

// runTitle says what is known of run i: when it started and how the report
// knows, how long nothing was recorded before it, when it ended.
func runTitle(runs []Run, i int, loc *time.Location) string {
	r := runs[i]
	clock := "15:04:05.0"
	var b strings.Builder
	fmt.Fprintf(&b, "run %d · %s → ", r.N, r.Start.In(loc).Format(clock))
	if r.Live {
		fmt.Fprintf(&b, "now (running)")
	} else {
		fmt.Fprintf(&b, "%s (last record)", r.End.In(loc).Format(clock))
	}
	if i > 0 {
		prev := runs[i-1]
		fmt.Fprintf(&b, "\nstarted: %s", r.Began)
		fmt.Fprintf(&b, "\nnothing recorded for %s before it, since run %d's last record", fmtDur(r.Start.Sub(prev.End)), prev.N)
	}
	if r.Interrupted > 0 {
		fmt.Fprintf(&b, "\ninterrupted: its scheduler stopped with %s running, some time after its last record", plural(r.Interrupted, "attempt", "attempts"))
	}
	return b.String()
}

// runLine describes run r in the header: "2 · 09:00:11 – 09:00:20 (9.3s) ·
// resumed: ...".
func runLine(r Run, loc *time.Location) string {
	s := fmt.Sprintf("%d · %s", r.N, spanText(r.Start, r.End, loc))
	switch {
	case r.Live:
		s += " · running"
	case r.Interrupted > 0:
		s += " · interrupted with " + plural(r.Interrupted, "attempt", "attempts") + " running"
	}
	if r.N > 1 {
		s += " · " + r.Began.String()
	}
	return s
}
