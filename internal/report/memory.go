package report

import (
	"fmt"
	"math"
	"slices"
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
