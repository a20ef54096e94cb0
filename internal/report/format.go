package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

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

// fmtMiB writes MiB as GiB with at most one decimal: "79.6 GiB", "512 MiB".
func fmtMiB(v int64) string {
	if v != 0 && v < 1024 {
		return strconv.FormatInt(v, 10) + " MiB"
	}
	return strconv.FormatFloat(math.Round(float64(v)/1024*10)/10, 'f', -1, 64) + " GiB"
}

// plural writes n with the singular or plural noun: "1 reading", "3 readings".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
