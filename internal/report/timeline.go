package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// Timeline is the SVG of every attempt: card groups first, then CPU lanes.
type Timeline struct {
	Width, Height float64
	PlotX, PlotW  float64
	LabelX        float64 // right edge of the lane labels
	PlotR         float64 // PlotX + PlotW
	AxisY         float64 // top of the time axis
	TickY         float64 // bottom of the tick marks
	Groups        []Group
	Ticks         []Tick
	NowX          float64 // > 0: a "now" marker (live runs)
	// Runs mark where each run starts and the gaps between runs, when
	// there are several; their labels go in a strip above the lanes.
	Runs      []RunMark
	RunLabelY float64
	LanesY    float64 // top of the lanes
}

// Group is one card's lanes, or the CPU lanes.
type Group struct {
	Kind   string // "gpu" or "cpu"
	Card   int    // for "gpu"
	Label  string // "GPU 0"; empty for "cpu", whose lanes carry labels
	Sub    string // the card's name, under the label when there is room
	Title  string // hover text of the label (cards)
	Y, H   float64
	Sep    float64 // y of the line above it; 0 for the first group
	LabelY float64
	SubY   float64
	Lanes  []Lane
}

// Lane is one row of non-overlapping attempts.
type Lane struct {
	Key    string // "gpu-0/1" (card 0, row 1), "cpu-3"
	Label  string // "CPU 3"; empty for card rows
	Y      float64
	TextY  float64
	Stripe bool
	Bars   []Bar
}

// Bar is one attempt.
type Bar struct {
	Task    string
	Row     int // the task's index in Model.Rows
	Attempt int
	Outcome Outcome
	Class   string
	Card    int // the lane's card; -1 for CPU attempts
	// Cards are every card of an attempt on several (the same bar is
	// drawn in the lane of each, marked); nil for one on one card or none.
	Cards      []int
	Start, End time.Time
	// Known is how long the attempt is known to have run: End, or for one
	// its scheduler's stop interrupted, its run's last record (End is then
	// when the next run found it).
	Known      time.Time
	X, Y, W, H float64 // the bar, from Start to Known
	// TailX and TailW are a faded continuation from Known to End, for an
	// interrupted attempt: it may have run on after its scheduler stopped.
	TailX, TailW float64
	Title        string // hover text
	Text         string // drawn inside the bar when it fits
	TextX        float64
	TextY        float64
}

// Geometry of the timeline, in SVG user units (pixels at scale 1).
const (
	tlWidth   = 1200.0
	tlLabelW  = 112.0
	tlRight   = 16.0
	rowH      = 16.0
	barH      = 12.0
	groupGap  = 6.0
	axisH     = 34.0
	minBarW   = 1.0
	charW     = 6.0 // average width of a 10px label character
	tickSpace = 84.0
	runStrip  = 14.0 // height of the strip of run labels above the lanes
)

// assignLanes puts intervals, sorted by start, in the fewest lanes such that
// no lane holds two that overlap in time (first fit by start time, which is
// optimal for intervals). It returns each interval's lane and the number of
// lanes.
func assignLanes(its []item) ([]int, int) {
	lane := make([]int, len(its))
	var ends []time.Time
	for i, it := range its {
		l := slices.IndexFunc(ends, func(e time.Time) bool { return !e.After(it.start) })
		if l < 0 {
			l = len(ends)
			ends = append(ends, it.end)
		} else {
			ends[l] = it.end
		}
		lane[i] = l
	}
	return lane, len(ends)
}

func buildTimeline(d Data, items []item, cards []int, cardSet map[int]gpu.CardView, runs []Run, t0 time.Time, span time.Duration, loc *time.Location) Timeline {
	tl := Timeline{Width: tlWidth, PlotX: tlLabelW, PlotW: tlWidth - tlLabelW - tlRight, LabelX: tlLabelW - 8}
	x := func(t time.Time) float64 { return tl.PlotX + frac(t.Sub(t0), span)*tl.PlotW }

	// An attempt on several cards is drawn in the lane of each.
	byCard := map[int][]item{}
	for _, it := range items {
		if len(it.cards) == 0 {
			byCard[-1] = append(byCard[-1], it)
		}
		for _, c := range it.cards {
			it.card = c
			byCard[c] = append(byCard[c], it)
		}
	}
	y := 2.0
	tl.Runs = runMarks(runs, t0, span, tl.PlotX, tl.PlotW, loc)
	if len(tl.Runs) > 0 {
		tl.RunLabelY = y + runStrip - 4
		y += runStrip
	}
	// A label only where it does not run into the one before; the lines
	// stay, and the gaps' hover texts.
	labelEnd := 0.0
	for i := range tl.Runs {
		r := &tl.Runs[i]
		if r.X < labelEnd {
			r.Label = ""
			continue
		}
		labelEnd = r.X + 3 + float64(len(r.Label)+1)*charW
	}
	tl.LanesY = y
	stripe := false
	addGroup := func(g Group, its []item) {
		slices.SortFunc(its, func(a, b item) int {
			return cmp.Or(a.start.Compare(b.start), a.end.Compare(b.end), cmp.Compare(a.row, b.row), cmp.Compare(a.att, b.att))
		})
		laneOf, n := assignLanes(its)
		n = max(n, 1)
		g.Y, g.H = y, float64(n)*rowH
		if len(tl.Groups) > 0 {
			g.Sep = y - groupGap/2
		}
		g.LabelY = y + rowH/2 + 3.5
		if n >= 2 && g.Sub != "" {
			g.SubY = g.LabelY + rowH
		} else {
			g.Sub = ""
		}
		g.Lanes = make([]Lane, n)
		for l := range g.Lanes {
			ln := &g.Lanes[l]
			ln.Y = y + float64(l)*rowH
			ln.TextY = ln.Y + rowH/2 + 3.5
			ln.Stripe = stripe
			stripe = !stripe
			if g.Kind == "cpu" {
				ln.Key = "cpu-" + strconv.Itoa(l+1)
				ln.Label = "CPU " + strconv.Itoa(l+1)
			} else {
				ln.Key = fmt.Sprintf("gpu-%d/%d", g.Card, l+1)
			}
		}
		for i, it := range its {
			ln := &g.Lanes[laneOf[i]]
			ln.Bars = append(ln.Bars, makeBar(&d, it, x, ln.Y, loc))
		}
		tl.Groups = append(tl.Groups, g)
		y += g.H + groupGap
	}
	for _, c := range cards {
		cv := cardSet[c]
		name := strings.TrimPrefix(cv.Name, "NVIDIA ")
		g := Group{Kind: "gpu", Card: c, Label: "GPU " + strconv.Itoa(c), Sub: shorten(name, 18)}
		addGroup(g, byCard[c])
		last := &tl.Groups[len(tl.Groups)-1]
		last.Title = "GPU " + strconv.Itoa(c)
		if cv.Name != "" {
			last.Title += " · " + cv.Name
		}
		if cv.TotalMiB > 0 {
			last.Title += fmt.Sprintf(" · %d MiB", cv.TotalMiB)
		}
		if cv.UUID != "" {
			last.Title += " · " + cv.UUID
		}
		last.Title += fmt.Sprintf(" · %d attempts on %d rows", len(byCard[c]), len(last.Lanes))
	}
	if cpu := byCard[-1]; len(cpu) > 0 {
		addGroup(Group{Kind: "cpu", Card: -1}, cpu)
	}
	if len(tl.Groups) == 0 {
		y += rowH // room for "no attempts"
	}
	tl.AxisY = y
	tl.TickY = y + 4
	for i := range tl.Runs {
		r := &tl.Runs[i]
		r.Y, r.H, r.B = tl.LanesY, tl.AxisY-tl.LanesY, tl.AxisY
	}
	tl.PlotR = tl.PlotX + tl.PlotW
	tl.Height = y + axisH
	tl.Ticks = timeTicks(t0, span, tl.PlotX, tl.PlotW, loc, true)
	return tl
}

func makeBar(d *Data, it item, x func(time.Time) float64, laneY float64, loc *time.Location) Bar {
	r := &d.Rows[it.row]
	a := &r.Attempts[it.att]
	b := Bar{Task: r.ID, Row: it.row, Attempt: a.Number, Outcome: it.outcome, Class: it.outcome.Class(),
		Card: it.card, Start: it.start, End: it.end, Known: it.known}
	if len(it.cards) > 1 {
		b.Cards = it.cards
	}
	x0, x1 := x(it.start), x(it.known)
	b.X, b.W = round1(x0), round1(math.Max(x1-x0, minBarW))
	if tail := round1(x(it.end) - (b.X + b.W)); it.end.After(it.known) && tail > 0 {
		b.TailX, b.TailW = round1(b.X+b.W), tail
	}
	b.Y, b.H = laneY+(rowH-barH)/2, barH
	// The id inside the bar when it fits, or enough of it to tell (a
	// stub like "ta…" says nothing).
	label := r.ID
	if len(b.Cards) > 0 {
		label = fmt.Sprintf("%d× %s", len(b.Cards), r.ID) // says it is one of several cards' bars
	}
	if fit := int((b.W - 6) / charW); fit >= min(len([]rune(label)), 10) {
		b.Text = shorten(label, fit)
		b.TextX, b.TextY = round1(b.X+3), laneY+rowH/2+3.5
	}

	var t strings.Builder
	fmt.Fprintf(&t, "%s · attempt %d · %s", r.ID, a.Number, it.outcome)
	dur := it.known.Sub(it.start)
	clock := "15:04:05.0"
	fmt.Fprintf(&t, "\n%s → ", it.start.In(loc).Format(clock))
	switch {
	case it.open && it.outcome == Running:
		fmt.Fprintf(&t, "now (%s so far)", fmtDur(dur))
	case it.open:
		fmt.Fprintf(&t, "? (no end recorded; ≥ %s)", fmtDur(dur))
	case it.end.After(it.known):
		fmt.Fprintf(&t, "? (≥ %s: running at its run's last record, %s; recorded as interrupted when the next run started, %s)",
			fmtDur(dur), it.known.In(loc).Format(clock), it.end.In(loc).Format(clock))
	default:
		fmt.Fprintf(&t, "%s (%s)", it.end.In(loc).Format(clock), fmtDur(dur))
	}
	if ex := exitText(a); ex != "" {
		t.WriteString("\n" + ex)
	}
	if a.Error != "" {
		t.WriteString("\n" + shorten(oneLine(a.Error), 200))
	}
	switch {
	case len(b.Cards) > 0:
		fmt.Fprintf(&t, "\nGPUs %s: one of a %d-card task, drawn on each card", task.CardList(b.Cards), len(b.Cards))
		if a.MemRequestedMiB > 0 {
			fmt.Fprintf(&t, " · asked %d MiB on each", a.MemRequestedMiB)
		}
		if a.MemPeakMiB > 0 {
			fmt.Fprintf(&t, " · peak %d MiB on one card", a.MemPeakMiB)
		}
	case it.card >= 0:
		fmt.Fprintf(&t, "\nGPU %d", it.card)
		if a.MemRequestedMiB > 0 {
			fmt.Fprintf(&t, " · asked %d MiB", a.MemRequestedMiB)
		}
		if a.MemPeakMiB > 0 {
			fmt.Fprintf(&t, " · peak %d MiB", a.MemPeakMiB)
		}
	}
	if j := jobText(a.Job); j != "" {
		t.WriteString("\n" + j)
	}
	if !a.ReadyAt.IsZero() && !a.Start.Before(a.ReadyAt) {
		what := "a slot"
		if it.card >= 0 {
			what = "a card"
		}
		if j := a.Job; j != nil {
			what += " and " + cmp.Or(j.System, "its batch system") + "'s queue"
		}
		fmt.Fprintf(&t, "\nwaited %s for %s", fmtDur(a.Start.Sub(a.ReadyAt)), what)
	}
	b.Title = t.String()
	return b
}

// exitText says how an attempt's process ended: "exit 1", "SIGKILL, timed
// out"; empty while unknown.
func exitText(a *task.Attempt) string {
	var parts []string
	if a.ExitCode != nil {
		parts = append(parts, "exit "+strconv.Itoa(*a.ExitCode))
	}
	if a.Signal != "" {
		parts = append(parts, a.Signal)
	}
	if a.TimedOut {
		parts = append(parts, "timed out")
	}
	if a.Cancelled {
		parts = append(parts, "cancelled")
	}
	if a.Interrupted {
		parts = append(parts, "interrupted (the scheduler stopped)")
	}
	return strings.Join(parts, ", ")
}
