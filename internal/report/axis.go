package report

import (
	"math"
	"strconv"
	"time"
)

// Tick is a mark on a time axis.
type Tick struct {
	X       float64
	Anchor  string // text-anchor of its label: "start" at the left edge, "end" at the right, else "middle"
	Elapsed string // since the start of the run: "1m30s"
	Clock   string // wall clock, "09:04:16"; may be empty
}

// frac is d's position in span, in [0, 1].
func frac(d, span time.Duration) float64 {
	f := float64(d) / float64(span)
	return math.Max(0, math.Min(1, f))
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

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

// RunMark is where a run starts on a time axis, with the stretch before it
// in which no scheduler recorded anything.
type RunMark struct {
	N int // the run's number, from 1
	X float64
	// GapX and GapW are the stretch from the previous run's last record to
	// this run's start; GapW is 0 for the first run.
	GapX, GapW float64
	Label      string  // "run 2"
	Title      string  // hover text
	Prev       int     // the previous run's number
	Y, H, B    float64 // the band's and the line's top, height and bottom, set by the chart
}

// runMarks places runs on an axis of width w from x0 spanning span from t0.
// There are none for a single run.
func runMarks(runs []Run, t0 time.Time, span time.Duration, x0, w float64, loc *time.Location) []RunMark {
	if len(runs) < 2 {
		return nil
	}
	x := func(t time.Time) float64 { return round1(x0 + frac(t.Sub(t0), span)*w) }
	out := make([]RunMark, len(runs))
	for i, r := range runs {
		mk := RunMark{N: r.N, X: x(r.Start), Label: "run " + strconv.Itoa(r.N), Title: runTitle(runs, i, loc)}
		if i > 0 {
			mk.GapX = x(runs[i-1].End)
			mk.GapW = round1(mk.X - mk.GapX)
			mk.Prev = runs[i-1].N
		}
		out[i] = mk
	}
	return out
}
