package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
)

// MemChart is one card's memory over time.
type MemChart struct {
	Card                       int
	Title                      string
	Width, Height              float64
	PlotX, PlotY, PlotW, PlotH float64
	PlotR, PlotB               float64 // right and bottom edges of the plot
	YTicks                     []YTick
	XTicks                     []Tick
	Runs                       []RunMark // where runs start, and the gaps between them
	// SVG path data, one sub-path per run: stacked areas (foreign from 0,
	// in use by our tasks on foreign, the rest of what is charged to them
	// on that, up to the total; what is charged beyond the total), lines
	// (capacity, total).
	Foreign, InUse, Reserved, Over, Capacity, Total string
	// Points are the readings as drawn, oldest first.
	Points  []MemPoint
	Samples int
	Summary string
	Notes   []string // what the chart shows that needs a word: memory moved from foreign to ours, charges beyond the total
	Note    string   // said instead of a chart when the card has no samples
}

// MemPoint is one reading of a card as the chart draws it. The stack
// Foreign + InUse is what the card had in use (memory.total less
// memory.free) and never exceeds Total; Charged is what the ledger held for
// our tasks (each task the larger of its request and its use), drawn from
// Foreign up.
type MemPoint struct {
	At time.Time
	// Until is how long the chart holds the reading: to the next reading
	// in the same run, and past the run's last one by at most sampleHold,
	// never past the run's end.
	Until time.Time
	Run   int // index of its run in Model.Runs
	// Foreign is the memory not ours: as measured, less Lag.
	Foreign int64
	// Lag is memory this reading counted as foreign and the next reading
	// of the run counted as our tasks': a task's allocation that nvidia-smi
	// showed in the card's used memory before it showed the process (see
	// docs/gpu.md). It is drawn as ours.
	Lag int64
	// InUse is what our tasks' processes used: as observed, plus Lag.
	InUse int64
	// Charged is what the ledger charged our tasks at the reading.
	Charged int64
	// Over is how far Foreign + max(Charged, InUse) goes beyond Total:
	// budgets of our tasks that the card's free memory no longer held.
	Over            int64
	Capacity, Total int64
}

// YTick is a mark on a memory axis.
type YTick struct {
	Y     float64
	Label string
}

// Geometry of a memory chart, in SVG user units.
const (
	memWidth  = 580.0
	memHeight = 170.0
	memLeft   = 50.0
	memRight  = 12.0
	memTop    = 8.0
	memBottom = 30.0

	sampleHold = 10 * time.Second
)

// memTickSteps are the spacings of a memory axis, in MiB.
var memTickSteps = []int64{128, 256, 512, 1024, 2048, 4096, 5120, 10240, 20480, 40960, 51200, 102400, 204800, 409600, 1048576}

// cardEvent is an attempt starting on a card, with the memory it was
// admitted with, or ending there, with the most its processes were seen to
// use.
type cardEvent struct {
	at  time.Time
	mib int64
}

// cardEvents are a card's attempt starts and ends, each in time order.
type cardEvents struct{ starts, ends []cardEvent }

// within sums mib over the events in (from, to], or [from, to] when
// fromIncl.
func within(evs []cardEvent, from, to time.Time, fromIncl bool) int64 {
	i := sort.Search(len(evs), func(j int) bool { return evs[j].at.After(from) || fromIncl && evs[j].at.Equal(from) })
	var sum int64
	for _, e := range evs[i:] {
		if e.at.After(to) {
			break
		}
		sum += e.mib
	}
	return sum
}

func buildMemory(samples []store.Sample, items []item, d *Data, cards []int, cardSet map[int]gpu.CardView, runs []Run, t0 time.Time, span time.Duration, loc *time.Location) ([]MemChart, string) {
	if len(cards) == 0 {
		return nil, "No GPU was used in this run."
	}
	if len(samples) == 0 {
		return nil, "No GPU memory samples were recorded in this run (gpusched samples the cards only while GPU tasks wait or run, and only since state database schema 3)."
	}
	perCard := map[int]int{}
	for _, s := range samples {
		perCard[s.Index]++
	}
	byCard := make(map[int][]store.Sample, len(perCard))
	for c, n := range perCard {
		byCard[c] = make([]store.Sample, 0, n)
	}
	for _, s := range samples {
		byCard[s.Index] = append(byCard[s.Index], s)
	}
	events := map[int]*cardEvents{}
	// An attempt on several cards was admitted with its budget on each,
	// and its peak is the most one of them held: both count on each.
	for _, it := range items {
		a := &d.Rows[it.row].Attempts[it.att]
		for _, c := range it.cards {
			ev := events[c]
			if ev == nil {
				ev = &cardEvents{}
				events[c] = ev
			}
			ev.starts = append(ev.starts, cardEvent{it.start, a.MemRequestedMiB})
			if a.Ended() && !a.Interrupted {
				ev.ends = append(ev.ends, cardEvent{a.End, a.MemPeakMiB})
			}
		}
	}
	byTime := func(a, b cardEvent) int { return a.at.Compare(b.at) }
	for _, ev := range events {
		slices.SortFunc(ev.starts, byTime)
		slices.SortFunc(ev.ends, byTime)
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
		ev := events[c]
		if ev == nil {
			ev = &cardEvents{}
		}
		ch.Points = memPoints(ss, ev, runs)
		drawMemory(&ch, t0, span)
		ch.Runs = runMarks(runs, t0, span, ch.PlotX, ch.PlotW, loc)
		for i := range ch.Runs {
			r := &ch.Runs[i]
			r.Y, r.H, r.B = ch.PlotY, ch.PlotH, ch.PlotB
		}
		ch.XTicks = timeTicks(t0, span, ch.PlotX, ch.PlotW, time.UTC, false)
		summarize(&ch)
		out = append(out, ch)
	}
	return out, ""
}

// memPoints turns one card's samples, oldest first, into what the chart
// draws: each reading held until the next one of its run, the
// attribution lag moved from foreign to ours. ev are the attempts that ran
// on the card.
func memPoints(ss []store.Sample, ev *cardEvents, runs []Run) []MemPoint {
	if len(runs) == 0 { // samples without times: one run from the first to the last
		runs = []Run{{N: 1, Start: ss[0].At, End: ss[len(ss)-1].At}}
	}
	pts := make([]MemPoint, len(ss))
	for i, s := range ss {
		pts[i] = MemPoint{At: s.At, Run: runIndex(runs, s.At), Foreign: s.ForeignMiB, InUse: s.ObservedMiB,
			Charged: s.ChargedMiB, Capacity: s.CapacityMiB, Total: s.TotalMiB}
	}
	// From the last reading back, so that each is compared with the next
	// as drawn: a task seen late at one reading may have grown, and been
	// seen late again, at the next.
	for i := len(pts) - 1; i >= 0; i-- {
		p := &pts[i]
		if i+1 < len(pts) && pts[i+1].Run == p.Run {
			p.Until = pts[i+1].At
			p.Lag = lag(ss, i, &pts[i+1], ev, runs[p.Run].Start)
		} else {
			p.Until = p.At.Add(sampleHold)
			if end := runs[p.Run].End; p.Until.After(end) {
				p.Until = end
			}
			if p.Until.Before(p.At) {
				p.Until = p.At
			}
		}
		p.Foreign -= p.Lag
		p.InUse += p.Lag
		p.Over = max(0, p.Foreign+max(p.Charged, p.InUse)-p.Total)
	}
	return pts
}

// lag is how much of reading i's foreign memory was our tasks': memory a
// task allocated between nvidia-smi's two questions shows in the card's
// used memory before its process does, and counts as foreign for that one
// reading. Only memory that is foreign at i and gone from foreign at the
// next reading of the same run (as drawn: next, with its own lag moved)
// can be ours, and only while our tasks were charged on the card. Of that
// drop, it takes the larger of
//
//   - what the next reading shows of ours in addition, counting the
//     attempts that ended in between at their peak (a task seen late, or
//     one that grew), and
//   - the budgets of the attempts that started since the reading before
//     (since the run's start, for its first reading), at most what our
//     tasks were charged and not seen using: those may not have been seen
//     yet, and may have ended before the next reading.
//
// So a foreign process that leaves while nothing of ours starts or grows
// stays foreign.
func lag(ss []store.Sample, i int, next *MemPoint, ev *cardEvents, runStart time.Time) int64 {
	s := ss[i]
	drop := s.ForeignMiB - next.Foreign
	if s.ChargedMiB <= 0 || drop <= 0 {
		return 0
	}
	grew := next.InUse - s.ObservedMiB + within(ev.ends, s.At, next.At, false)
	since, first := runStart, true
	if i > 0 && ss[i-1].At.After(since) {
		since, first = ss[i-1].At, false
	}
	unseen := min(within(ev.starts, since, s.At, first), s.ChargedMiB-s.ObservedMiB)
	return max(0, min(drop, max(grew, unseen)))
}

// drawMemory lays out ch.Points: the axis and the paths, one sub-path per
// run, at most one point per pixel column (the largest values in it).
func drawMemory(ch *MemChart, t0 time.Time, span time.Duration) {
	x := func(t time.Time) float64 { return ch.PlotX + frac(t.Sub(t0), span)*ch.PlotW }
	// The stacked edges of one drawn point, in MiB.
	type col struct {
		x, until                                  float64
		run                                       int
		foreign, inUse, charged, over, cap, total int64
	}
	var cols []col
	bucket := len(ch.Points) > int(ch.PlotW)
	top := int64(0)
	for _, p := range ch.Points {
		k := col{x: x(p.At), until: x(p.Until), run: p.Run, foreign: p.Foreign, inUse: p.Foreign + p.InUse,
			charged: min(p.Foreign+max(p.Charged, p.InUse), p.Total), over: p.Foreign + max(p.Charged, p.InUse), cap: p.Capacity, total: p.Total}
		top = max(top, k.over, k.cap, k.total)
		if n := len(cols); bucket && n > 0 && cols[n-1].run == k.run && math.Floor(cols[n-1].x) == math.Floor(k.x) {
			q := &cols[n-1]
			q.foreign, q.inUse, q.charged, q.over = max(q.foreign, k.foreign), max(q.inUse, k.inUse), max(q.charged, k.charged), max(q.over, k.over)
			q.until, q.cap, q.total = k.until, k.cap, k.total
			continue
		}
		cols = append(cols, k)
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

	var foreign, inUse, reserved, over, capacity, total strings.Builder
	anyOver := false
	for from := 0; from < len(cols); {
		to := from + 1
		for to < len(cols) && cols[to].run == cols[from].run {
			to++
		}
		seg := cols[from:to]
		xs := make([]float64, len(seg))
		for i, k := range seg {
			xs[i] = round1(k.x)
		}
		xEnd := round1(math.Max(seg[len(seg)-1].until, seg[len(seg)-1].x))
		val := func(f func(col) int64) []float64 {
			out := make([]float64, len(seg))
			for i, k := range seg {
				out[i] = y(f(k))
			}
			return out
		}
		yForeign, yInUse, yCharged := val(func(k col) int64 { return k.foreign }), val(func(k col) int64 { return k.inUse }), val(func(k col) int64 { return k.charged })
		foreign.WriteString(areaPath(xs, yForeign, val(func(col) int64 { return 0 }), xEnd))
		inUse.WriteString(areaPath(xs, yInUse, yForeign, xEnd))
		reserved.WriteString(areaPath(xs, yCharged, yInUse, xEnd))
		yOver := val(func(k col) int64 { return k.over })
		if !slices.Equal(yOver, yCharged) {
			anyOver = true
			over.WriteString(areaPath(xs, yOver, yCharged, xEnd))
		}
		capacity.WriteString(stepPath(xs, val(func(k col) int64 { return k.cap }), xEnd))
		total.WriteString(stepPath(xs, val(func(k col) int64 { return k.total }), xEnd))
		from = to
	}
	ch.Foreign, ch.InUse, ch.Reserved, ch.Capacity, ch.Total = foreign.String(), inUse.String(), reserved.String(), capacity.String(), total.String()
	if anyOver {
		ch.Over = over.String()
	}
}

// summarize writes the chart's summary line and notes.
func summarize(ch *MemChart) {
	var peakC, peakU, peakF, capMiB, totalMiB, lagMax, overMax int64
	var lagN, overN int
	for _, p := range ch.Points {
		peakC, peakU, peakF = max(peakC, p.Charged), max(peakU, p.InUse), max(peakF, p.Foreign)
		capMiB, totalMiB = p.Capacity, max(totalMiB, p.Total)
		if p.Lag > 0 {
			lagN++
			lagMax = max(lagMax, p.Lag)
		}
		if p.Over > 0 {
			overN++
			overMax = max(overMax, p.Over)
		}
	}
	ch.Summary = fmt.Sprintf("peak charged %s · peak in use by our tasks %s · foreign up to %s · capacity %s of %s · %d samples",
		fmtMiB(peakC), fmtMiB(peakU), fmtMiB(peakF), fmtMiB(capMiB), fmtMiB(totalMiB), len(ch.Points))
	if lagN > 0 {
		ch.Notes = append(ch.Notes, fmt.Sprintf("At %s, up to %s that nvidia-smi counted as foreign was our tasks' memory, not yet matched to their processes (it was gone from foreign at the next reading): drawn as ours.",
			plural(lagN, "reading", "readings"), fmtMiB(lagMax)))
	}
	if overN > 0 {
		ch.Notes = append(ch.Notes, fmt.Sprintf("At %s, foreign plus charged went beyond the card's total, by up to %s (red): each task is charged the larger of its request and its use, and memory counted as foreign took up what our tasks had asked for but not used, after they were admitted.",
			plural(overN, "reading", "readings"), fmtMiB(overMax)))
	}
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
