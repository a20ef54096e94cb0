package report

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

func TestSmallModel(t *testing.T) {
	d := small()
	m := Build(d)
	if m.Tasks != 10 || m.Attempts != 10 || m.Cards != 3 {
		t.Errorf("tasks %d, attempts %d, cards %d; want 10, 10, 3 (card 3 is hidden)", m.Tasks, m.Attempts, m.Cards)
	}
	outcomes := map[string]int{}
	for _, c := range m.Outcomes {
		outcomes[c.Name] = c.N
	}
	want := map[string]int{"complete": 5, "failed": 1, "timed out": 1, "cancelled": 1, "interrupted": 1, "running": 1}
	for k, v := range want {
		if outcomes[k] != v {
			t.Errorf("%d %s attempts, want %d (all: %v)", outcomes[k], k, v, outcomes)
		}
	}
	// Lanes: cards 0, 1, 2, then CPU: a (0-10s), crashed (2-3), b (2-5),
	// c (5-8), stopped (6-7), d (11-12) need three lanes, taken by start
	// time (ties: the one that ends first) and first fit.
	var keys []string
	for _, g := range m.Timeline.Groups {
		for _, l := range g.Lanes {
			keys = append(keys, l.Key)
		}
	}
	if want := []string{"gpu-0/1", "gpu-1/1", "gpu-2/1", "cpu-1", "cpu-2", "cpu-3"}; !slices.Equal(keys, want) {
		t.Errorf("lanes %v, want %v", keys, want)
	}
	lanesOf := map[string]string{}
	for _, g := range m.Timeline.Groups {
		for _, l := range g.Lanes {
			for _, b := range l.Bars {
				lanesOf[fmt.Sprintf("%s/%d", b.Task, b.Attempt)] = l.Key
			}
		}
	}
	for k, v := range map[string]string{"a/1": "cpu-1", "crashed/1": "cpu-2", "b/1": "cpu-3", "c/1": "cpu-2", "stopped/1": "cpu-3", "d/1": "cpu-1",
		"train/1": "gpu-0/1", "train/2": "gpu-0/1", "slow/1": "gpu-1/1", "live/1": "gpu-1/1"} {
		if lanesOf[k] != v {
			t.Errorf("%s in lane %q, want %s", k, lanesOf[k], v)
		}
	}
	// The running attempt is drawn up to now, with the marker there.
	for _, l := range m.Timeline.Groups[1].Lanes {
		for _, b := range l.Bars {
			if b.Task == "live" && (!b.End.Equal(d.Now) || b.Outcome != Running || b.X+b.W != m.Timeline.PlotX+m.Timeline.PlotW) {
				t.Errorf("live: end %v outcome %s, x %.1f+%.1f; want drawn to now %v", b.End, b.Outcome, b.X, b.W, d.Now)
			}
		}
	}
	if m.Timeline.NowX != m.Timeline.PlotX+m.Timeline.PlotW {
		t.Errorf("now marker at %.1f, want the plot's right edge", m.Timeline.NowX)
	}

	byID := map[string]TableRow{}
	for _, r := range m.Rows {
		byID[r.ID] = r
	}
	for _, c := range []struct {
		id, run, dep, slot, card, asked, peak, exit string
	}{
		{"a", "10s", "0ms", "0ms", "", "", "", "0"},
		{"d", "1.0s", "10s", "1.0s", "", "", "", "0"},
		{"train", "6.0s", "1.0s", "2.0s", "0", "26000", "25000", "0"},
		{"slow", "3.0s", "0ms", "1.0s", "1", "10000", "9000", "SIGKILL, timed out"},
		{"live", "3.0s", "8.0s", "1.0s", "1", "30000", "", "running"},
		{"after", "", "", "", "", "", "", ""},
	} {
		r := byID[c.id]
		got := []string{r.RunTime.Text, r.DepWait.Text, r.SlotWait.Text, r.Card, r.Requested.Text, r.Peak.Text, r.Exit}
		if want := []string{c.run, c.dep, c.slot, c.card, c.asked, c.peak, c.exit}; !slices.Equal(got, want) {
			t.Errorf("row %s: run, dep wait, slot wait, card, asked, peak, exit = %q, want %q", c.id, got, want)
		}
	}
	if r := byID["after"]; r.ErrorShort != "blocked: dependency slow failed" {
		t.Errorf("blocked row's error %q", r.ErrorShort)
	}
	if len(m.Memory) != 3 || m.MemoryNote != "" {
		t.Fatalf("%d memory charts (note %q), want 3", len(m.Memory), m.MemoryNote)
	}
	if m.Memory[0].Reserved == "" || !strings.Contains(m.Memory[0].Summary, "peak charged 25.4 GiB") ||
		!strings.Contains(m.Memory[0].Summary, "foreign up to 5.9 GiB") {
		t.Errorf("card 0's chart: %+v", m.Memory[0])
	}

	p := render(t, d)
	checkPage(t, d, p)
	for _, s := range []string{"/runs/small", "2025-06-01 09:00:00 – 09:00:12 (12s)", "<dd>10: ", "5 complete", "1 failed", "1 blocked", "1 running",
		"CUDA out of memory &lt;tried &amp; failed&gt;", "running: the report shows the run as of"} {
		if !strings.Contains(p.html, s) {
			t.Errorf("the page does not say %q", s)
		}
	}
	if len(p.mem) != 3 {
		t.Errorf("%d memory charts in the page, want 3", len(p.mem))
	}
	// One run: no run marks; nothing beyond a card's total.
	if len(m.Runs) != 1 || len(m.RunLines) != 0 || len(m.Timeline.Runs) != 0 || m.MemOver {
		t.Errorf("runs %+v, lines %q, timeline marks %+v, over %v; want one run, unmarked", m.Runs, m.RunLines, m.Timeline.Runs, m.MemOver)
	}
	for _, s := range []string{"<dt>runs</dt>", `class="gap"`, `class="run"`, "between runs", "beyond the card's total"} {
		if strings.Contains(p.html, s) {
			t.Errorf("the page of one run contains %q", s)
		}
	}
}

// Without a scheduler, an attempt without an end was interrupted: it is
// drawn up to the last thing the run recorded, not up to now.
func TestNotLive(t *testing.T) {
	d := small()
	d.Live = false
	d.Now = at(3600)
	d.Samples = nil
	m := Build(d)
	if !m.End.Equal(at(12)) {
		t.Errorf("the span ends at %v, want the last record %v", m.End, at(12))
	}
	found := false
	for _, g := range m.Timeline.Groups {
		for _, l := range g.Lanes {
			for _, b := range l.Bars {
				if b.Task == "live" {
					found = true
					if b.Outcome != Interrupted || !b.End.Equal(at(12)) || !strings.Contains(b.Title, "no end recorded") {
						t.Errorf("live without a scheduler: outcome %s, end %v, title %q", b.Outcome, b.End, b.Title)
					}
				}
			}
		}
	}
	if !found {
		t.Error("no bar for live")
	}
	if m.Timeline.NowX != 0 {
		t.Error("a now marker without a scheduler")
	}
	if !strings.Contains(m.MemoryNote, "No GPU memory samples") || len(m.Memory) != 0 {
		t.Errorf("without samples: note %q, %d charts", m.MemoryNote, len(m.Memory))
	}
	p := render(t, d)
	checkPage(t, d, p)
	if len(p.mem) != 0 || !strings.Contains(p.html, "No GPU memory samples were recorded") {
		t.Errorf("without samples the page has %d memory charts", len(p.mem))
	}
}

func TestCPUOnlyAndEmpty(t *testing.T) {
	d := Data{RunDir: "/runs/cpu", Rows: []store.Row{row("x", task.Complete, 0, att(1, 0, 0, 1, 0)), row("y", task.Pending, 0)},
		Now: at(5), Location: time.UTC}
	p := render(t, d)
	checkPage(t, d, p)
	if !strings.Contains(p.html, "No GPU was used in this run.") {
		t.Error("a CPU-only run does not say no GPU was used")
	}
	if _, ok := p.lanes["cpu-1"]; !ok || len(p.lanes) != 1 {
		t.Errorf("lanes %v, want cpu-1 only", p.lanes)
	}

	empty := Data{RunDir: "/runs/empty", Location: time.UTC}
	p = render(t, empty)
	checkPage(t, empty, p)
	if !strings.Contains(p.html, "No attempts yet.") || !strings.Contains(p.html, "nothing recorded yet") {
		t.Error("an empty run does not say so")
	}
	// Just started: a scheduler runs, nothing is written yet.
	empty.Live, empty.Now = true, at(1)
	p = render(t, empty)
	checkPage(t, empty, p)
	if !strings.Contains(p.html, "nothing recorded yet") || !strings.Contains(p.html, "running: the report shows the run as of 2025-06-01 09:00:01 UTC") {
		t.Error("an empty live run does not say so")
	}
}

// Text from the database is escaped, and the SVG stays well-formed.
func TestEscaping(t *testing.T) {
	d := small()
	nasty := `<script>alert("x")</script> & 'quotes' ]]> <![CDATA[`
	d.Rows[5].Error = nasty
	d.Rows[5].Attempts[0].Error = nasty
	d.RunDir = `/tmp/<b>&"run"`
	d.Cards[0].Name = `<i>card</i> & co`
	p := render(t, d)
	checkPage(t, d, p)
	if strings.Contains(p.html, "<script>alert") || strings.Contains(p.html, "<b>&") || strings.Contains(p.html, "<i>card") {
		t.Error("unescaped text from the database in the page")
	}
}

func TestSynthetic(t *testing.T) {
	for _, n := range []int{1, 50, 1000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			d := synth(n, uint64(n))
			p := render(t, d)
			checkPage(t, d, p)
			if len(p.mem) != 4 {
				t.Errorf("%d memory charts, want 4", len(p.mem))
			}
		})
	}
}

// Benchmarks: the figures in docs/report.md.

func benchmarkWrite(b *testing.B, n int) {
	d := synth(n, 1)
	var buf bytes.Buffer
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf.Reset()
		if err := Write(&buf, d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/report")
	b.ReportMetric(float64(attempts(d)), "attempts")
}

func BenchmarkWrite1000(b *testing.B)  { benchmarkWrite(b, 1000) }
func BenchmarkWrite10000(b *testing.B) { benchmarkWrite(b, 10000) }

// A pending task of a live run shows why it waits, as the scheduler
// decided and saved it; once no scheduler runs, its saved reason is of the
// past and the table shows its error as before.
func TestPendingShowsTheSchedulersReason(t *testing.T) {
	deps := row("join", task.Pending, 0)
	deps.Waiting = task.WaitReason{Kind: task.WaitDependencies, Detail: "a, b"}
	retry := row("flaky", task.Pending, 0, att(1, 0, 0, 1, 3))
	retry.Error = "exit code 3"
	retry.RetryAt = at(65)
	retry.Waiting = task.WaitReason{Kind: task.WaitRetryDelay, Detail: "exit code 3", Until: at(65)}
	gpuWait := row("big", task.Pending, 30000)
	gpuWait.Waiting = task.WaitReason{Kind: task.WaitGPUMemory, Detail: "needs 30000 MiB; best card 0 has 1000 MiB left (foreign 0)"}
	d := Data{RunDir: "/runs/w", Rows: []store.Row{deps, retry, gpuWait}, Live: true, Now: at(5), Location: time.UTC}
	want := map[string]string{
		"join":  "waiting for a, b",
		"flaky": "retry at " + at(65).Format(time.TimeOnly) + " (in 1m0s) after: exit code 3",
		"big":   "needs 30000 MiB; best card 0 has 1000 MiB left (foreign 0)",
	}
	for _, r := range Build(d).Rows {
		if r.ErrorShort != want[r.ID] {
			t.Errorf("live: %s's note = %q, want %q", r.ID, r.ErrorShort, want[r.ID])
		}
	}
	p := render(t, d)
	checkPage(t, d, p)
	if !strings.Contains(p.html, "waiting for a, b") {
		t.Error("the page does not say why join waits")
	}
	d.Live = false
	want = map[string]string{"join": "", "flaky": "exit code 3", "big": ""}
	for _, r := range Build(d).Rows {
		if r.ErrorShort != want[r.ID] {
			t.Errorf("not live: %s's note = %q, want %q", r.ID, r.ErrorShort, want[r.ID])
		}
	}
}

// Slurm tasks: the table names each attempt's job and node, a bar's hover
// text too, and a live run's task whose attempt waits in Slurm's queue
// shows why.
func TestSlurmJobs(t *testing.T) {
	done := att(1, 0, 2, 4, 0)
	done.Job = &task.RemoteJob{System: "Slurm", ID: "4241", State: "RUNNING", Node: "node7"}
	queued := att(1, 4, 4, 0, 0)
	queued.End, queued.ExitCode = time.Time{}, nil
	queued.Job = &task.RemoteJob{System: "Slurm", ID: "4242", State: "PENDING", Reason: "Priority", Queued: true}
	waits := row("train", task.Running, 0, queued)
	waits.Waiting = task.WaitReason{Kind: task.WaitQueued, Detail: "queued in Slurm as job 4242: Priority"}
	d := Data{RunDir: "/runs/s", Rows: []store.Row{row("prep", task.Complete, 0, done), waits, row("local", task.Complete, 0, att(1, 0, 0, 1, 0))},
		Live: true, Now: at(5), Location: time.UTC}
	want := map[string]struct{ card, note string }{
		"prep":  {"Slurm job 4241 on node7", ""},
		"train": {"Slurm job 4242", "queued in Slurm as job 4242: Priority"},
		"local": {"", ""},
	}
	for _, r := range Build(d).Rows {
		if w := want[r.ID]; r.Card != w.card || r.ErrorShort != w.note {
			t.Errorf("%s: card %q, note %q; want %q, %q", r.ID, r.Card, r.ErrorShort, w.card, w.note)
		}
	}
	p := render(t, d)
	checkPage(t, d, p)
	found := false
	for _, rs := range p.lanes {
		for _, r := range rs {
			found = found || strings.Contains(r.Title, "\nSlurm job 4241 on node7")
		}
	}
	if !found {
		t.Error("no bar's hover text names prep's Slurm job and node")
	}
}

// A task blocked as not needed says so in the state column, and why in
// the note; one blocked by a failure stays "blocked".
func TestNotNeededState(t *testing.T) {
	skipped := row("cleanup", task.Blocked, 0)
	skipped.NotNeeded, skipped.BlockedBy = true, "prep"
	skipped.Error = `not needed: dependency "prep" completed; this task runs on its failure`
	blocked := row("report", task.Blocked, 0)
	blocked.BlockedBy, blocked.Error = "bad", `blocked: dependency "bad" failed`
	d := Data{RunDir: "/runs/w", Rows: []store.Row{skipped, blocked}, Now: at(5), Location: time.UTC}
	want := map[string][2]string{"cleanup": {"not needed", skipped.Error}, "report": {"blocked", blocked.Error}}
	for _, r := range Build(d).Rows {
		if got := [2]string{r.State, r.ErrorShort}; got != want[r.ID] {
			t.Errorf("%s: state %q, note %q; want %q", r.ID, r.State, r.ErrorShort, want[r.ID])
		}
	}
	checkPage(t, d, render(t, d))
}
