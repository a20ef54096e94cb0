package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Data is what a report is made from, as plain values: the CLI reads it
// from the state database, tests write it by hand.
type Data struct {
	// RunDir names the run in the header.
	RunDir string
	// Rows are the run's tasks with their attempts, in submission order.
	Rows []store.Row
	// Cards is the last saved view of the GPUs (names, sizes); may be empty.
	Cards []gpu.CardView
	// Samples are the cards' memory over time, oldest first.
	Samples []store.Sample
	// GPUUnknown says why the GPU state could not be read, while it could not.
	GPUUnknown string
	// Live is set when a scheduler is using the run directory: attempts
	// without an end are running, and are drawn up to Now. Otherwise such
	// attempts were interrupted (the scheduler died), and are drawn up to
	// the last moment the run recorded anything.
	Live bool
	// Now is when the data was read.
	Now time.Time
	// Location is the time zone of clock times; nil means time.Local.
	Location *time.Location
}

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
	Outcomes   []Count    // attempts by outcome: the legend
	Timeline   Timeline   // lanes and bars
	Memory     []MemChart // one per card with samples or lanes
	MemoryNote string     // said instead of charts when there is nothing to draw
	Rows       []TableRow // one per task, in submission order
}

// Count is a number of things of one kind.
type Count struct {
	Name  string
	Class string
	N     int
}

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
	Task       string
	Row        int // the task's index in Model.Rows
	Attempt    int
	Outcome    Outcome
	Class      string
	Card       int // -1 for CPU attempts
	Start, End time.Time
	X, Y, W, H float64
	Title      string // hover text
	Text       string // drawn inside the bar when it fits
	TextX      float64
	TextY      float64
}

// Tick is a mark on a time axis.
type Tick struct {
	X       float64
	Anchor  string // text-anchor of its label: "start" at the left edge, "end" at the right, else "middle"
	Elapsed string // since the start of the run: "1m30s"
	Clock   string // wall clock, "09:04:16"; may be empty
}

// MemChart is one card's memory over time.
type MemChart struct {
	Card                       int
	Title                      string
	Width, Height              float64
	PlotX, PlotY, PlotW, PlotH float64
	PlotR, PlotB               float64 // right and bottom edges of the plot
	YTicks                     []YTick
	XTicks                     []Tick
	// SVG path data: stacked areas (foreign from 0, charged on top of
	// foreign), lines (observed on top of foreign, capacity, total).
	Foreign, Charged, Observed, Capacity, Total string
	Samples                                     int
	Summary                                     string
	Note                                        string // said instead of a chart when the card has no samples
}

// YTick is a mark on a memory axis.
type YTick struct {
	Y     float64
	Label string
}

// TableRow is one task in the table.
type TableRow struct {
	N          int // anchor: the row's id is "t<N>"
	ID         string
	State      string
	StateClass string
	Attempts   int
	RunTime    Cell // sum of the attempts' durations
	DepWait    Cell // first ready - submitted
	SlotWait   Cell // sum over attempts of start - ready
	Card       string
	Requested  Cell // MiB
	Peak       Cell // MiB
	Exit       string
	Error      string // full text, shown on hover when shortened
	ErrorShort string
}

// Cell is a table cell with a sort key (empty: sorts last).
type Cell struct {
	Text string
	V    string
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

	memWidth  = 580.0
	memHeight = 170.0
	memLeft   = 50.0
	memRight  = 12.0
	memTop    = 8.0
	memBottom = 30.0

	errorShort = 120 // characters of an error shown in the table
	sampleHold = 10 * time.Second
)

// spec is the part of a task's stored definition the report uses.
type spec struct {
	Resources struct {
		Device    string `json:"device"`
		MemoryMiB int64  `json:"memory_mib"`
	} `json:"resources"`
}

// item is one attempt placed in time.
type item struct {
	row, att   int
	start, end time.Time
	outcome    Outcome
	card       int
	open       bool // no recorded end
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

	// Attempts in time, with their outcome.
	var items []item
	outcomeN := map[Outcome]int{}
	for i := range d.Rows {
		r := &d.Rows[i]
		for j := range r.Attempts {
			a := &r.Attempts[j]
			it := item{row: i, att: j, start: a.Start, end: a.End, card: -1}
			if a.GPU != nil {
				it.card = *a.GPU
			}
			it.outcome = outcomeOf(r, j, d.Live)
			if !a.Ended() {
				it.open = true
				it.end = openEnd
			}
			if it.end.Before(it.start) {
				it.end = it.start
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
		if it.card >= 0 {
			if _, ok := cardSet[it.card]; !ok {
				cardSet[it.card] = gpu.CardView{Index: it.card}
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

	m.Timeline = buildTimeline(d, items, cards, cardSet, first, span, loc)
	if d.Live {
		m.Timeline.NowX = round1(m.Timeline.PlotX + frac(now.Sub(first), span)*m.Timeline.PlotW)
	}
	m.Memory, m.MemoryNote = buildMemory(d.Samples, cards, cardSet, first, span, last)
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

// frac is d's position in span, in [0, 1].
func frac(d, span time.Duration) float64 {
	f := float64(d) / float64(span)
	return math.Max(0, math.Min(1, f))
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

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

func buildTimeline(d Data, items []item, cards []int, cardSet map[int]gpu.CardView, t0 time.Time, span time.Duration, loc *time.Location) Timeline {
	tl := Timeline{Width: tlWidth, PlotX: tlLabelW, PlotW: tlWidth - tlLabelW - tlRight, LabelX: tlLabelW - 8}
	x := func(t time.Time) float64 { return tl.PlotX + frac(t.Sub(t0), span)*tl.PlotW }

	byCard := map[int][]item{}
	for _, it := range items {
		byCard[it.card] = append(byCard[it.card], it)
	}
	y := 2.0
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
	tl.PlotR = tl.PlotX + tl.PlotW
	tl.Height = y + axisH
	tl.Ticks = timeTicks(t0, span, tl.PlotX, tl.PlotW, loc, true)
	return tl
}

func makeBar(d *Data, it item, x func(time.Time) float64, laneY float64, loc *time.Location) Bar {
	r := &d.Rows[it.row]
	a := &r.Attempts[it.att]
	b := Bar{Task: r.ID, Row: it.row, Attempt: a.Number, Outcome: it.outcome, Class: it.outcome.Class(),
		Card: it.card, Start: it.start, End: it.end}
	x0, x1 := x(it.start), x(it.end)
	b.X, b.W = round1(x0), round1(math.Max(x1-x0, minBarW))
	b.Y, b.H = laneY+(rowH-barH)/2, barH
	// The id inside the bar when it fits, or enough of it to tell (a
	// stub like "ta…" says nothing).
	if fit := int((b.W - 6) / charW); fit >= min(len([]rune(r.ID)), 10) {
		b.Text = shorten(r.ID, fit)
		b.TextX, b.TextY = round1(b.X+3), laneY+rowH/2+3.5
	}

	var t strings.Builder
	fmt.Fprintf(&t, "%s · attempt %d · %s", r.ID, a.Number, it.outcome)
	dur := it.end.Sub(it.start)
	clock := "15:04:05.0"
	fmt.Fprintf(&t, "\n%s → ", it.start.In(loc).Format(clock))
	if it.open && it.outcome == Running {
		fmt.Fprintf(&t, "now (%s so far)", fmtDur(dur))
	} else if it.open {
		fmt.Fprintf(&t, "? (no end recorded; ≥ %s)", fmtDur(dur))
	} else {
		fmt.Fprintf(&t, "%s (%s)", it.end.In(loc).Format(clock), fmtDur(dur))
	}
	if ex := exitText(a); ex != "" {
		t.WriteString("\n" + ex)
	}
	if a.Error != "" {
		t.WriteString("\n" + shorten(oneLine(a.Error), 200))
	}
	if it.card >= 0 {
		fmt.Fprintf(&t, "\nGPU %d", it.card)
		if a.MemRequestedMiB > 0 {
			fmt.Fprintf(&t, " · asked %d MiB", a.MemRequestedMiB)
		}
		if a.MemPeakMiB > 0 {
			fmt.Fprintf(&t, " · peak %d MiB", a.MemPeakMiB)
		}
	}
	if !a.ReadyAt.IsZero() && !a.Start.Before(a.ReadyAt) {
		what := "a slot"
		if it.card >= 0 {
			what = "a card"
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

// tickSteps are the spacings a time axis may use.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// timeTicks marks a time axis of width w from x0 spanning span from t0,
// elapsed time from t0 at round steps, at least tickSpace apart.
func timeTicks(t0 time.Time, span time.Duration, x0, w float64, loc *time.Location, clock bool) []Tick {
	maxTicks := max(int(w/tickSpace), 2)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if int64(span/s) <= int64(maxTicks) {
			step = s
			break
		}
	}
	for span/step > time.Duration(maxTicks) { // longer than every step: whole multiples of the last
		step *= 2
	}
	clockFmt := "15:04:05"
	if span >= 24*time.Hour {
		clockFmt = "Jan 2 15:04"
	} else if step >= time.Minute {
		clockFmt = "15:04"
	}
	var out []Tick
	for e := time.Duration(0); e <= span; e += step {
		tk := Tick{X: round1(x0 + frac(e, span)*w), Anchor: "middle", Elapsed: fmtElapsed(e, step)}
		switch {
		case e == 0:
			tk.Anchor = "start" // clear of the axis captions on its left
		case tk.X > x0+w-28:
			tk.Anchor = "end"
		}
		if clock && (step >= time.Second || e == 0) {
			tk.Clock = t0.Add(e).In(loc).Format(clockFmt)
		}
		out = append(out, tk)
	}
	return out
}

// fmtElapsed writes a tick's distance from the start: "0", "250ms", "1.5s",
// "2m30s", "1h", "2d6h".
func fmtElapsed(e, step time.Duration) string {
	switch {
	case e == 0:
		return "0"
	case step < time.Second && e < time.Second:
		return strconv.FormatInt(e.Milliseconds(), 10) + "ms"
	case step < time.Second:
		return strconv.FormatFloat(e.Seconds(), 'f', -1, 64) + "s"
	}
	return compact(e)
}

// compact writes a whole-second duration in its two largest units: "45s",
// "2m30s", "1h5m", "3d2h".
func compact(d time.Duration) string {
	d = d.Round(time.Second)
	days, h, m, s := d/(24*time.Hour), d%(24*time.Hour)/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	part := func(v time.Duration, unit string) string {
		if v == 0 {
			return ""
		}
		return strconv.FormatInt(int64(v), 10) + unit
	}
	switch {
	case days > 0:
		return part(days, "d") + part(h, "h")
	case h > 0:
		return part(h, "h") + part(m, "m")
	case m > 0:
		return part(m, "m") + part(s, "s")
	}
	return part(s, "s")
}

// fmtDur writes a duration for people: "350ms", "4.1s", "12s", "3m04s",
// "1h02m", "2d03h".
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(math.Round(d.Seconds()*10)/10, 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Round(time.Second).Seconds())) + "s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

func spanText(first, last time.Time, loc *time.Location) string {
	a, b := first.In(loc), last.In(loc)
	end := b.Format("15:04:05")
	if a.YearDay() != b.YearDay() || a.Year() != b.Year() {
		end = b.Format("2006-01-02 15:04:05")
	}
	return fmt.Sprintf("%s – %s (%s)", a.Format("2006-01-02 15:04:05"), end, fmtDur(last.Sub(first)))
}

// shorten cuts s to at most n characters, marking the cut with "…".
func shorten(s string, n int) string {
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// memTickSteps are the spacings of a memory axis, in MiB.
var memTickSteps = []int64{128, 256, 512, 1024, 2048, 4096, 5120, 10240, 20480, 40960, 51200, 102400, 204800, 409600, 1048576}

func buildMemory(samples []store.Sample, cards []int, cardSet map[int]gpu.CardView, t0 time.Time, span time.Duration, last time.Time) ([]MemChart, string) {
	if len(cards) == 0 {
		return nil, "No GPU was used in this run."
	}
	if len(samples) == 0 {
		return nil, "No GPU memory samples were recorded in this run (gpusched samples the cards only while GPU tasks wait or run, and only since state database schema 3)."
	}
	byCard := map[int][]store.Sample{}
	for _, s := range samples {
		byCard[s.Index] = append(byCard[s.Index], s)
	}
	var out []MemChart
	for _, c := range cards {
		cv := cardSet[c]
		ch := MemChart{Card: c, Width: memWidth, Height: memHeight, PlotX: memLeft, PlotY: memTop,
			PlotW: memWidth - memLeft - memRight, PlotH: memHeight - memTop - memBottom}
		ch.PlotR, ch.PlotB = ch.PlotX+ch.PlotW, ch.PlotY+ch.PlotH
		ch.Title = "GPU " + strconv.Itoa(c)
		if cv.Name != "" {
			ch.Title += " · " + cv.Name
		}
		ss := byCard[c]
		ch.Samples = len(ss)
		if len(ss) == 0 {
			ch.Note = "No memory samples for this card."
			out = append(out, ch)
			continue
		}
		slices.SortStableFunc(ss, func(a, b store.Sample) int { return a.At.Compare(b.At) })
		x := func(t time.Time) float64 { return ch.PlotX + frac(t.Sub(t0), span)*ch.PlotW }

		// One point per sample, or per pixel column (the largest values in
		// it) when there are more samples than columns.
		type pt struct {
			x                   float64
			f, c, o, cap, total int64
		}
		var pts []pt
		bucket := len(ss) > int(ch.PlotW)
		var peakC, peakO, peakF, capMiB, totalMiB int64
		for _, s := range ss {
			p := pt{x: x(s.At), f: s.ForeignMiB, c: s.ChargedMiB, o: s.ObservedMiB, cap: s.CapacityMiB, total: s.TotalMiB}
			peakC, peakO, peakF = max(peakC, p.c), max(peakO, p.o), max(peakF, p.f)
			capMiB, totalMiB = p.cap, max(totalMiB, p.total)
			if n := len(pts); bucket && n > 0 && math.Floor(pts[n-1].x) == math.Floor(p.x) {
				q := &pts[n-1]
				q.f, q.c, q.o = max(q.f, p.f), max(q.c, p.c), max(q.o, p.o)
				q.cap, q.total = p.cap, p.total
				continue
			}
			pts = append(pts, p)
		}
		lastAt := ss[len(ss)-1].At
		end := lastAt.Add(sampleHold)
		if end.After(last) {
			end = last
		}
		xEnd := math.Max(x(end), x(lastAt))

		top := totalMiB
		for _, p := range pts {
			top = max(top, p.f+p.c, p.f+p.o, p.cap)
		}
		if top <= 0 {
			top = 1024
		}
		step := memTickSteps[len(memTickSteps)-1]
		for _, s := range memTickSteps {
			if top/s <= 4 {
				step = s
				break
			}
		}
		top = (top + step - 1) / step * step // a whole tick at the top
		yMax := float64(top)
		y := func(v int64) float64 { return round1(ch.PlotY + ch.PlotH - float64(v)/yMax*ch.PlotH) }
		for v := int64(0); v <= top; v += step {
			ch.YTicks = append(ch.YTicks, YTick{Y: y(v), Label: fmtMiB(v)})
		}
		xs := make([]float64, len(pts))
		for i, p := range pts {
			xs[i] = round1(p.x)
		}
		xEnd = round1(xEnd)
		val := func(f func(pt) int64) []float64 {
			out := make([]float64, len(pts))
			for i, p := range pts {
				out[i] = y(f(p))
			}
			return out
		}
		base := make([]float64, len(pts))
		for i := range base {
			base[i] = y(0)
		}
		foreign := val(func(p pt) int64 { return p.f })
		charged := val(func(p pt) int64 { return p.f + p.c })
		ch.Foreign = areaPath(xs, foreign, base, xEnd)
		ch.Charged = areaPath(xs, charged, foreign, xEnd)
		ch.Observed = stepPath(xs, val(func(p pt) int64 { return p.f + p.o }), xEnd)
		ch.Capacity = stepPath(xs, val(func(p pt) int64 { return p.cap }), xEnd)
		ch.Total = stepPath(xs, val(func(p pt) int64 { return p.total }), xEnd)
		ch.XTicks = timeTicks(t0, span, ch.PlotX, ch.PlotW, time.UTC, false)
		ch.Summary = fmt.Sprintf("peak charged %s · peak observed %s · foreign up to %s · capacity %s of %s · %d samples",
			fmtMiB(peakC), fmtMiB(peakO), fmtMiB(peakF), fmtMiB(capMiB), fmtMiB(totalMiB), len(ss))
		out = append(out, ch)
	}
	return out, ""
}

// fmtMiB writes MiB as GiB with at most one decimal: "79.6 GiB", "512 MiB".
func fmtMiB(v int64) string {
	if v != 0 && v < 1024 {
		return strconv.FormatInt(v, 10) + " MiB"
	}
	return strconv.FormatFloat(math.Round(float64(v)/1024*10)/10, 'f', -1, 64) + " GiB"
}

// stepPath draws values ys held from xs[i] to xs[i+1], the last to xEnd.
func stepPath(xs, ys []float64, xEnd float64) string {
	var b strings.Builder
	b.Grow(len(xs) * 16)
	for i := range xs {
		if i == 0 {
			b.WriteString("M" + num(xs[0]) + " " + num(ys[0]))
			continue
		}
		b.WriteString("H" + num(xs[i]))
		if ys[i] != ys[i-1] {
			b.WriteString("V" + num(ys[i]))
		}
	}
	b.WriteString("H" + num(xEnd))
	return b.String()
}

// areaPath fills between the steps of upper and lower.
func areaPath(xs, upper, lower []float64, xEnd float64) string {
	var b strings.Builder
	b.WriteString(stepPath(xs, upper, xEnd))
	n := len(xs)
	b.WriteString("V" + num(lower[n-1]))
	for i := n - 1; i >= 0; i-- {
		b.WriteString("H" + num(xs[i]))
		if i > 0 && lower[i-1] != lower[i] {
			b.WriteString("V" + num(lower[i-1]))
		}
	}
	b.WriteString("Z")
	return b.String()
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func buildRows(d Data, items []item) []TableRow {
	runTime := make([]time.Duration, len(d.Rows))
	for _, it := range items {
		runTime[it.row] += it.end.Sub(it.start)
	}
	rows := make([]TableRow, len(d.Rows))
	for i := range d.Rows {
		r := &d.Rows[i]
		tr := TableRow{N: i, ID: r.ID, State: r.State.String(), StateClass: "s-" + r.State.String(), Attempts: len(r.Attempts)}
		if len(r.Attempts) > 0 {
			tr.RunTime = durCell(runTime[i])
		}
		// Waiting for dependencies: from submission to the first time it
		// became ready in this submission (a resumed run resubmits).
		for _, a := range r.Attempts {
			if !r.Submitted.IsZero() && !a.ReadyAt.IsZero() && !a.ReadyAt.Before(r.Submitted) {
				tr.DepWait = durCell(a.ReadyAt.Sub(r.Submitted))
				break
			}
		}
		var slot time.Duration
		known := false
		var cardList []string
		var peak, asked int64
		for _, a := range r.Attempts {
			if !a.ReadyAt.IsZero() && !a.Start.Before(a.ReadyAt) {
				slot += a.Start.Sub(a.ReadyAt)
				known = true
			}
			if a.GPU != nil {
				if c := strconv.Itoa(*a.GPU); !slices.Contains(cardList, c) {
					cardList = append(cardList, c)
				}
			}
			peak = max(peak, a.MemPeakMiB)
			if a.MemRequestedMiB > 0 {
				asked = a.MemRequestedMiB
			}
		}
		if known {
			tr.SlotWait = durCell(slot)
		}
		tr.Card = strings.Join(cardList, ", ")
		var sp spec
		_ = json.Unmarshal(r.Spec, &sp)
		if sp.Resources.Device == string(task.CUDA) {
			if r.State == task.Pending || asked == 0 {
				asked = max(asked, sp.Resources.MemoryMiB, r.GPURequestMiB)
			}
		}
		if asked > 0 {
			tr.Requested = Cell{Text: strconv.FormatInt(asked, 10), V: strconv.FormatInt(asked, 10)}
		}
		if peak > 0 {
			tr.Peak = Cell{Text: strconv.FormatInt(peak, 10), V: strconv.FormatInt(peak, 10)}
		}
		if r.ExitCode != nil {
			tr.Exit = strconv.Itoa(*r.ExitCode)
		}
		if a := r.LastAttempt(); a != nil {
			var extra []string
			if a.Signal != "" && r.ExitCode == nil {
				extra = append(extra, a.Signal)
			}
			if a.TimedOut {
				extra = append(extra, "timed out")
			}
			if !a.Ended() && d.Live {
				extra = append(extra, "running")
			}
			if len(extra) > 0 {
				tr.Exit = strings.TrimPrefix(tr.Exit+" "+strings.Join(extra, ", "), " ")
			}
		}
		msg := r.Error
		if r.BlockedBy != "" && !strings.Contains(msg, r.BlockedBy) {
			msg = strings.TrimPrefix(msg+"; blocked by "+r.BlockedBy, "; ")
		}
		if r.State == task.Complete {
			msg = ""
			if r.Rerun != "" {
				msg = "ran again: " + r.Rerun
			}
		}
		tr.Error = oneLine(msg)
		tr.ErrorShort = shorten(tr.Error, errorShort)
		if tr.ErrorShort == tr.Error {
			tr.Error = ""
		}
		rows[i] = tr
	}
	return rows
}

func durCell(d time.Duration) Cell {
	return Cell{Text: fmtDur(d), V: strconv.FormatFloat(d.Seconds(), 'f', 3, 64)}
}
