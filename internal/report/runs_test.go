package report

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// runSpans lists runs as [start, end] seconds and how each began.
func runSpans(runs []Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.Start.Sub(t0).String()+"–"+r.End.Sub(t0).String()+" "+strings.SplitN(r.Began.String(), ":", 2)[0])
	}
	return out
}

// A resumed run: the report finds both runs, draws nothing across the gap
// between them, and marks where the second began.
func TestResumedRun(t *testing.T) {
	d := resumed()
	m := Build(d)
	// Run 1 ends at its last record (card 1's sample at 4.13s), run 2
	// begins when its scheduler found the interrupted attempts (11.11s).
	if got, want := runSpans(m.Runs), []string{"0s–4.13s first run", "11.11s–20.41s resumed"}; !slices.Equal(got, want) {
		t.Fatalf("runs %q, want %q", got, want)
	}
	if m.Runs[0].Interrupted != 3 || m.Runs[1].Interrupted != 0 || len(m.RunLines) != 2 ||
		!strings.Contains(m.RunLines[0], "interrupted with 3 attempts running") {
		t.Errorf("runs %+v, lines %q", m.Runs, m.RunLines)
	}

	// The memory charts: no reading of run 1 is held into the gap, each
	// run is its own sub-path, and the gap is marked.
	for _, ch := range m.Memory {
		for _, p := range ch.Points {
			r := m.Runs[p.Run]
			if p.At.Before(r.Start) || p.Until.After(r.End) || p.Until.Before(p.At) {
				t.Errorf("GPU %d: reading at %s held to %s, outside its run %s", ch.Card, p.At.Sub(t0), p.Until.Sub(t0), runSpans(m.Runs)[p.Run])
			}
		}
		if last := pointAt(t, ch, map[int]float64{0: 4.07, 1: 4.13}[ch.Card]); !last.Until.Equal(at(4.13)) {
			t.Errorf("GPU %d: run 1's last reading held to %s, want run 1's end 4.13s", ch.Card, last.Until.Sub(t0))
		}
		for name, path := range map[string]string{"foreign": ch.Foreign, "in use": ch.InUse, "charged": ch.Reserved, "capacity": ch.Capacity, "total": ch.Total} {
			if n := strings.Count(path, "M"); n != 2 {
				t.Errorf("GPU %d: the %s path has %d sub-paths, want one per run: %s", ch.Card, name, n, path)
			}
		}
		if len(ch.Runs) != 2 || ch.Runs[1].GapW <= 0 || ch.Runs[1].GapX+ch.Runs[1].GapW != ch.Runs[1].X {
			t.Errorf("GPU %d: run marks %+v, want run 2 with the gap before it", ch.Card, ch.Runs)
		}
	}

	// The timeline: the same marks; each interrupted attempt drawn solid to
	// its run's last record, faded on to when the next run found it.
	tl := m.Timeline
	if len(tl.Runs) != 2 || tl.Runs[1].Label != "run 2" || tl.Runs[1].GapW <= 0 || tl.RunLabelY <= 0 || tl.LanesY <= tl.RunLabelY {
		t.Errorf("timeline run marks %+v, label y %.1f, lanes from %.1f", tl.Runs, tl.RunLabelY, tl.LanesY)
	}
	x := func(sec float64) float64 {
		return round1(tl.PlotX + frac(at(sec).Sub(m.Start), m.End.Sub(m.Start))*tl.PlotW)
	}
	if tl.Runs[1].X != x(11.11) || tl.Runs[1].GapX != x(4.13) {
		t.Errorf("run 2 at x %.1f after a gap from %.1f; want %.1f and %.1f", tl.Runs[1].X, tl.Runs[1].GapX, x(11.11), x(4.13))
	}
	n := 0
	for _, g := range tl.Groups {
		for _, l := range g.Lanes {
			for _, b := range l.Bars {
				if b.Outcome != Interrupted {
					if b.TailW != 0 {
						t.Errorf("%s/%d (%s) has a tail", b.Task, b.Attempt, b.Outcome)
					}
					continue
				}
				n++
				if !b.Known.Equal(at(4.13)) || !b.End.Equal(at(11.11)) || b.X+b.W != x(4.13) || b.TailX != x(4.13) || b.TailX+b.TailW != x(11.11) {
					t.Errorf("%s/%d: known to %s, end %s, bar %.1f+%.1f, tail %.1f+%.1f; want solid to 4.13s (x %.1f), faded to 11.11s (x %.1f)",
						b.Task, b.Attempt, b.Known.Sub(t0), b.End.Sub(t0), b.X, b.W, b.TailX, b.TailW, x(4.13), x(11.11))
				}
				if !strings.Contains(b.Title, "≥ 3.1s: running at its run's last record") {
					t.Errorf("%s/%d: title %q", b.Task, b.Attempt, b.Title)
				}
			}
		}
	}
	if n != 3 {
		t.Errorf("%d interrupted bars, want 3", n)
	}
	// Run time counts what is known: 1.01s → 4.13s, then 11.18s → 15.37s.
	for _, r := range m.Rows {
		if r.ID == "sweep-1" && r.RunTime.Text != "≥ 7.3s" {
			t.Errorf("sweep-1's run time %q, want ≥ 7.3s", r.RunTime.Text)
		}
	}

	p := render(t, d)
	checkPage(t, d, p)
	if n := strings.Count(p.html, `<rect class="o-interrupted tail"`); n != 3 {
		t.Errorf("%d faded tails in the page, want one per interrupted attempt: 3", n)
	}
	for _, s := range []string{"<dt>runs</dt>", `class="gap"`, `class="run"`, ">run 2</text>", "between runs 1 and 2: no scheduler recorded anything", `<rect class="o-interrupted tail"`, "between runs: no scheduler recorded anything"} {
		if !strings.Contains(p.html, s) {
			t.Errorf("the page does not contain %q", s)
		}
	}
}

// The ways the report finds runs, and stretches that are not gaps between
// runs.
func TestFindRuns(t *testing.T) {
	done := func(id string, ready, start, end float64) store.Row {
		return row(id, task.Complete, 0, att(1, ready, start, end, 0))
	}
	submitted := func(r store.Row, sec float64) store.Row { r.Submitted = at(sec); return r }
	for _, c := range []struct {
		name string
		d    Data
		want []string
	}{{
		name: "one run",
		d:    Data{Rows: []store.Row{done("a", 0, 0, 5), done("b", 5, 5, 9)}},
		want: []string{"0s–9s first run"},
	}, {
		// A run that ended (b failed), and a new "gpusched run" 3s later
		// that ran b again: every task has the new submission time.
		name: "run again",
		d: Data{Rows: []store.Row{
			submitted(done("a", 0, 0, 5), 12),
			submitted(row("b", task.Complete, 0, att(1, 5, 5, 9, 1), att(2, 12, 12, 14, 0)), 12),
		}},
		want: []string{"0s–9s first run", "12s–14s tasks submitted while nothing ran"},
	}, {
		// Three runs; the second's submission time was overwritten by the
		// third's. Nothing recorded for 91s before it: a gap.
		name: "after a gap",
		d: Data{Rows: []store.Row{
			submitted(row("a", task.Complete, 0, att(1, 0, 0, 9, 1), att(2, 100, 100, 110, 1), att(3, 200, 200, 201, 0)), 200),
		}},
		want: []string{"0s–9s first run", "1m40s–1m50s nothing recorded for more than 30s before it", "3m20s–3m21s tasks submitted while nothing ran"},
	}, {
		// A GPU task waits 5 minutes for a card with nothing else running
		// and no sample saved (the GPU state was unknown): it was ready all
		// along, in the same run.
		name: "long wait",
		d:    Data{Rows: []store.Row{submitted(done("a", 0, 0, 10), 0), submitted(done("b", 10, 310, 320), 0)}},
		want: []string{"0s–5m20s first run"},
	}, {
		// 20s with nothing recorded and nothing running: too short to call
		// it another run.
		name: "short pause",
		d:    Data{Rows: []store.Row{done("a", 0, 0, 10), done("b", 30, 30, 40)}},
		want: []string{"0s–40s first run"},
	}, {
		// Through the Go API, a second batch submitted while the first
		// runs: the same run.
		name: "second batch",
		d:    Data{Rows: []store.Row{submitted(done("a", 0, 0, 60), 0), submitted(done("b", 45, 45, 50), 45)}},
		want: []string{"0s–1m0s first run"},
	}, {
		// A scheduler runs now; its tasks have waited for 5 minutes with
		// nothing recorded: still its run, up to now.
		name: "live and waiting",
		d:    Data{Live: true, Now: at(400), Rows: []store.Row{submitted(done("a", 0, 0, 10), 0), submitted(row("b", task.Pending, 0), 0)}},
		want: []string{"0s–6m40s first run"},
	}, {
		// The scheduler died during b (not yet resumed): b has no end, the
		// run ends at its last record.
		name: "died",
		d: Data{Now: at(400), Rows: []store.Row{submitted(done("a", 0, 0, 10), 0),
			submitted(row("b", task.Running, 0, task.Attempt{Number: 1, ReadyAt: at(10), Start: at(10)}), 0)}},
		want: []string{"0s–10s first run"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			now := c.d.Now
			if now.IsZero() {
				now = at(1000)
			}
			if got := runSpans(findRuns(&c.d, now)); !slices.Equal(got, c.want) {
				t.Errorf("runs %q, want %q", got, c.want)
			}
		})
	}
	if findRuns(&Data{}, time.Time{}) != nil {
		t.Error("runs found in an empty run directory")
	}
}

// A big run that died and was resumed 10 minutes later: two runs, the
// boundary where the report should put it, nothing drawn across the gap.
func TestSyntheticResumed(t *testing.T) {
	for _, n := range []int{50, 1000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			d := synthResumed(n, uint64(n), 10*time.Minute)
			m := Build(d)
			interrupted := 0
			var resume time.Time
			for _, r := range d.Rows {
				for _, a := range r.Attempts {
					if a.Interrupted {
						interrupted++
						resume = a.End
					}
				}
			}
			if interrupted == 0 {
				t.Fatal("synthResumed interrupted no attempt")
			}
			if len(m.Runs) != 2 || !m.Runs[1].Start.Equal(resume) || m.Runs[1].Began != RunResumed || m.Runs[0].Interrupted != interrupted {
				t.Fatalf("runs %q (interrupted %d, %d), want two, the second from the resumption at %s with %d interrupted before it",
					runSpans(m.Runs), m.Runs[0].Interrupted, len(m.Runs), resume.Sub(t0), interrupted)
			}
			if gap := m.Runs[1].Start.Sub(m.Runs[0].End); gap < 10*time.Minute {
				t.Errorf("nothing recorded for %s between the runs; want at least the 10m the scheduler was away", gap)
			}
			for _, ch := range m.Memory {
				subpaths := 0
				for _, p := range ch.Points {
					if r := m.Runs[p.Run]; p.At.Before(r.Start) || p.Until.After(r.End) {
						t.Errorf("GPU %d: reading at %s held to %s, outside its run", ch.Card, p.At.Sub(t0), p.Until.Sub(t0))
					}
				}
				for i := range ch.Points {
					if i == 0 || ch.Points[i].Run != ch.Points[i-1].Run {
						subpaths++
					}
				}
				if n := strings.Count(ch.Foreign, "M"); n != subpaths || subpaths != 2 {
					t.Errorf("GPU %d: %d sub-paths for readings in %d runs", ch.Card, n, subpaths)
				}
			}
			p := render(t, d)
			checkPage(t, d, p)
		})
	}
}
