package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// ---------------------------------------------------------------------------
// Building data by hand

func ip(v int) *int { return &v }

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// att is an ended attempt from start to end seconds after t0, ready at ready.
func att(n int, ready, start, end float64, exit int) task.Attempt {
	return task.Attempt{Number: n, ReadyAt: at(ready), Start: at(start), End: at(end), ExitCode: ip(exit)}
}

func onCard(a task.Attempt, card int, asked, peak int64) task.Attempt {
	a.GPU, a.GPUUUID, a.MemRequestedMiB, a.MemPeakMiB = ip(card), fmt.Sprintf("GPU-%d", card), asked, peak
	return a
}

func row(id string, st task.State, gpuMiB int64, atts ...task.Attempt) store.Row {
	sp := map[string]any{"id": id}
	if gpuMiB > 0 {
		sp["resources"] = map[string]any{"device": "cuda", "memory_mib": gpuMiB}
	}
	spec, _ := json.Marshal(sp)
	r := store.Row{Spec: spec, Record: task.Record{ID: id, State: st, Submitted: t0, Attempts: atts}}
	if a := r.LastAttempt(); a != nil {
		r.ExitCode = a.ExitCode
	}
	return r
}

// small is a run with one attempt of every outcome: CPU tasks a..d that
// need two lanes, GPU tasks on cards 0 and 1, card 2 idle.
func small() Data {
	to := att(1, 0, 1, 4, 0)
	to.ExitCode, to.Signal, to.TimedOut = nil, "SIGKILL", true
	cancelled := att(1, 0, 6, 7, 0)
	cancelled.ExitCode, cancelled.Signal, cancelled.Cancelled = nil, "SIGTERM", true
	interrupted := att(1, 0, 2, 3, 0)
	interrupted.ExitCode, interrupted.Interrupted = nil, true
	running := onCard(att(1, 8, 9, 0, 0), 1, 30000, 0)
	running.End, running.ExitCode = time.Time{}, nil

	rows := []store.Row{
		row("a", task.Complete, 0, att(1, 0, 0, 10, 0)),
		row("b", task.Complete, 0, att(1, 0, 2, 5, 0)),
		row("c", task.Complete, 0, att(1, 5, 5, 8, 0)), // starts as b ends: b's lane
		row("d", task.Complete, 0, att(1, 10, 11, 12, 0)),
		row("train", task.Complete, 20000,
			onCard(att(1, 1, 1.5, 3, 1), 0, 20000, 20000),
			onCard(att(2, 3, 4.5, 9, 0), 0, 26000, 25000)),
		row("slow", task.Failed, 10000, onCard(to, 1, 10000, 9000)),
		row("stopped", task.Cancelled, 0, cancelled),
		row("crashed", task.Pending, 0, interrupted),
		row("live", task.Running, 30000, running),
		row("after", task.Blocked, 0),
	}
	rows[4].Attempts[0].Error = "CUDA out of memory <tried & failed>"
	rows[5].Error = "timed out after 3s"
	rows[9].BlockedBy, rows[9].Error = "slow", "blocked: dependency slow failed"
	var samples []store.Sample
	for s := 0; s <= 12; s++ {
		for c := range 3 {
			sm := store.Sample{At: at(float64(s)), Index: c, TotalMiB: 81559, CapacityMiB: 81047}
			if c == 0 && s >= 1 && s < 9 {
				sm.ChargedMiB, sm.ObservedMiB = 26000, 25000
			}
			if c == 0 {
				sm.ForeignMiB = 6000
			}
			samples = append(samples, sm)
		}
	}
	return Data{
		RunDir: "/runs/small", Rows: rows, Samples: samples, Live: true, Now: at(12), Location: time.UTC,
		Cards: []gpu.CardView{
			{Index: 0, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559},
			{Index: 1, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559},
			{Index: 2, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559},
			{Index: 3, State: gpu.CardHidden},
		},
	}
}

// ---------------------------------------------------------------------------
// Reading the page back

type xSVG struct {
	Class string  `xml:"class,attr"`
	G     []xG    `xml:"g"`
	Text  []xText `xml:"text"`
}

type xG struct {
	Group string  `xml:"data-group,attr"`
	Lane  string  `xml:"data-lane,attr"`
	G     []xG    `xml:"g"`
	A     []xA    `xml:"a"`
	Text  []xText `xml:"text"`
}

type xA struct {
	Href string  `xml:"href,attr"`
	Rect xRect   `xml:"rect"`
	Text []xText `xml:"text"`
}

type xRect struct {
	Class string  `xml:"class,attr"`
	X     float64 `xml:"x,attr"`
	Y     float64 `xml:"y,attr"`
	W     float64 `xml:"width,attr"`
	H     float64 `xml:"height,attr"`
	Title string  `xml:"title"`
}

type xText struct {
	Class string `xml:"class,attr"`
	Body  string `xml:",chardata"`
}

var svgRE = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// page is a rendered report, parsed as far as the tests need.
type page struct {
	html     string
	timeline xSVG
	lanes    map[string][]xRect // by data-lane
	hrefs    map[string][]string
	mem      []xSVG
	rowIDs   map[string]string // row anchor "t3" -> task id
	rows     int
}

func render(t testing.TB, d Data) page {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	return parsePage(t, b.String())
}

func parsePage(t testing.TB, html string) page {
	t.Helper()
	p := page{html: html, lanes: map[string][]xRect{}, hrefs: map[string][]string{}, rowIDs: map[string]string{}}
	svgs := svgRE.FindAllString(html, -1)
	if len(svgs) == 0 {
		t.Fatal("no <svg> in the page")
	}
	for i, s := range svgs {
		var x xSVG
		if err := xml.Unmarshal([]byte(s), &x); err != nil {
			t.Fatalf("svg %d is not well-formed XML: %v\n%.2000s", i, err, s)
		}
		if x.Class == "tl" {
			p.timeline = x
		} else {
			p.mem = append(p.mem, x)
		}
	}
	for _, g := range p.timeline.G {
		for _, l := range g.G {
			if l.Lane == "" {
				continue
			}
			if _, dup := p.lanes[l.Lane]; dup {
				t.Errorf("lane %s appears twice", l.Lane)
			}
			p.lanes[l.Lane] = []xRect{}
			for _, a := range l.A {
				p.lanes[l.Lane] = append(p.lanes[l.Lane], a.Rect)
				p.hrefs[l.Lane] = append(p.hrefs[l.Lane], a.Href)
			}
		}
	}
	for _, m := range regexp.MustCompile(`<tr id="(t\d+)"><td class="id">([^<]*)</td>`).FindAllStringSubmatch(html, -1) {
		p.rowIDs[m[1]] = m[2]
	}
	p.rows = strings.Count(html, "<tr id=")
	return p
}

func (p page) bars() int {
	n := 0
	for _, l := range p.lanes {
		n += len(l)
	}
	return n
}

func attempts(d Data) int {
	n := 0
	for _, r := range d.Rows {
		n += len(r.Attempts)
	}
	return n
}

// checkPage checks what every report must satisfy for data d.
func checkPage(t *testing.T, d Data, p page) {
	t.Helper()
	if !strings.HasPrefix(p.html, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(p.html), "</html>") {
		t.Errorf("not a whole HTML document: starts %.40q, ends %q", p.html, p.html[max(0, len(p.html)-40):])
	}
	checkSelfContained(t, p.html)

	// One bar per attempt, each titled with its task and linked to its row.
	if got, want := p.bars(), attempts(d); got != want {
		t.Errorf("%d attempt bars, want one per attempt: %d", got, want)
	}
	for lane, rects := range p.lanes {
		for i, r := range rects {
			href := p.hrefs[lane][i]
			id, ok := p.rowIDs[strings.TrimPrefix(href, "#")]
			if !ok {
				t.Errorf("lane %s: bar links to %q, which is no table row", lane, href)
				continue
			}
			if !strings.HasPrefix(r.Title, id+" · attempt ") {
				t.Errorf("lane %s: bar of %s has title %q, which does not name it first", lane, id, r.Title)
			}
			if !strings.HasPrefix(r.Class, "o-") || !slices.ContainsFunc(Outcomes, func(o Outcome) bool { return o.Class() == r.Class }) {
				t.Errorf("lane %s: bar of %s has class %q, not an outcome", lane, id, r.Class)
			}
			if r.W < minBarW || r.X < tlLabelW-0.05 || r.X+r.W > tlWidth-tlRight+minBarW+0.05 {
				t.Errorf("lane %s: bar of %s at x %.1f width %.1f is outside the plot", lane, id, r.X, r.W)
			}
		}
	}

	// A lane per card, the right card on every GPU bar, CPU lanes without
	// overlapping bars.
	cards := map[int]bool{}
	for _, c := range d.Cards {
		if c.State != gpu.CardHidden {
			cards[c.Index] = true
		}
	}
	cpu := 0
	for _, r := range d.Rows {
		for _, a := range r.Attempts {
			if a.GPU != nil {
				cards[*a.GPU] = true
			} else {
				cpu++
			}
		}
	}
	for c := range cards {
		if _, ok := p.lanes[fmt.Sprintf("gpu-%d/1", c)]; !ok {
			t.Errorf("no lane for card %d", c)
		}
	}
	for lane, rects := range p.lanes {
		var card int
		if _, err := fmt.Sscanf(lane, "gpu-%d/", &card); err == nil {
			for _, r := range rects {
				if !strings.Contains(r.Title, "\nGPU "+strconv.Itoa(card)) {
					t.Errorf("lane %s holds a bar not on card %d: %q", lane, card, r.Title)
				}
			}
		}
	}
	cpuBars := 0
	for i := 1; ; i++ {
		rects, ok := p.lanes["cpu-"+strconv.Itoa(i)]
		if !ok {
			break
		}
		if len(rects) == 0 {
			t.Errorf("CPU lane %d is empty", i)
		}
		cpuBars += len(rects)
		slices.SortFunc(rects, func(a, b xRect) int { return int((a.X - b.X) * 100) })
		for j := 1; j < len(rects); j++ {
			// Bars narrower than a pixel are drawn a pixel wide; allow that.
			if prev, cur := rects[j-1], rects[j]; prev.X+prev.W > cur.X+minBarW+0.1 {
				t.Errorf("CPU lane %d: bars overlap: %q ends at %.1f, %q starts at %.1f", i, prev.Title, prev.X+prev.W, cur.Title, cur.X)
			}
		}
	}
	if cpuBars != cpu {
		t.Errorf("%d bars in CPU lanes, want %d CPU attempts", cpuBars, cpu)
	}

	// One table row per task, in order.
	if p.rows != len(d.Rows) || len(p.rowIDs) != len(d.Rows) {
		t.Errorf("%d table rows (%d with an id cell), want one per task: %d", p.rows, len(p.rowIDs), len(d.Rows))
	}
	for i, r := range d.Rows {
		if got := p.rowIDs["t"+strconv.Itoa(i)]; got != r.ID {
			t.Errorf("row t%d is %q, want %q", i, got, r.ID)
		}
	}
}

var (
	httpRE     = regexp.MustCompile(`(?i)https?:`)
	externalRE = regexp.MustCompile(`(?i)<link\b|<img\b|<iframe\b|<object\b|<embed\b|\bsrc\s*=|@import|url\(\s*['"]?[a-z]+:|(?:href|xlink:href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:|//)`)
)

// checkSelfContained fails if the page refers to anything outside itself:
// the only URLs allowed are the SVG namespace names.
func checkSelfContained(t *testing.T, html string) {
	t.Helper()
	ns := `xmlns="http://www.w3.org/2000/svg"`
	if got, want := len(httpRE.FindAllString(html, -1)), strings.Count(html, ns); got != want {
		t.Errorf("%d http(s) URLs, only %d of them the SVG namespace", got, want)
	}
	if m := externalRE.FindAllString(html, 5); len(m) > 0 {
		t.Errorf("the page refers to outside resources: %q", m)
	}
}

// ---------------------------------------------------------------------------
// Tests

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
	if m.Memory[0].Charged == "" || !strings.Contains(m.Memory[0].Summary, "peak charged 25.4 GiB") ||
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

// The memory charts stay small however many samples there are.
func TestManySamples(t *testing.T) {
	d := small()
	d.Samples = nil
	for s := range 100_000 {
		d.Samples = append(d.Samples, store.Sample{At: t0.Add(time.Duration(s) * 120 * time.Microsecond), Index: 0,
			TotalMiB: 81559, CapacityMiB: 81047, ChargedMiB: int64(s%50) * 1000, ObservedMiB: int64(s%7) * 1000})
	}
	m := Build(d)
	for _, path := range []string{m.Memory[0].Foreign, m.Memory[0].Charged, m.Memory[0].Observed} {
		if len(path) > 40_000 {
			t.Errorf("a path of %d bytes for 100,000 samples; want at most one point per pixel column", len(path))
		}
	}
	if !strings.Contains(m.Memory[0].Summary, "peak charged 47.9 GiB") || !strings.Contains(m.Memory[0].Summary, "100000 samples") {
		t.Errorf("summary %q", m.Memory[0].Summary)
	}
	if m.Memory[1].Note == "" {
		t.Error("card 1 without samples has no note")
	}
}

// First fit by start time uses as many lanes as the most intervals that
// overlap, and never puts two overlapping ones in a lane.
func TestAssignLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		n := 1 + rng.IntN(60)
		its := make([]item, n)
		for i := range its {
			s := at(float64(rng.IntN(100)))
			its[i] = item{start: s, end: s.Add(time.Duration(rng.IntN(30)) * time.Second)}
		}
		slices.SortFunc(its, func(a, b item) int { return a.start.Compare(b.start) })
		lane, k := assignLanes(its)
		// Intervals are half-open: [start, end).
		most := 0
		for i, p := range its {
			open := 1
			for j, q := range its {
				if j != i && !q.start.After(p.start) && q.end.After(p.start) {
					open++
				}
			}
			most = max(most, open)
		}
		if k > most {
			t.Errorf("round %d: %d lanes for at most %d overlapping intervals", round, k, most)
		}
		for i := range its {
			for j := i + 1; j < len(its); j++ {
				if lane[i] == lane[j] && its[j].start.Before(its[i].end) && its[i].start.Before(its[j].end) {
					t.Errorf("round %d: overlapping intervals %d and %d share lane %d", round, i, j, lane[i])
				}
			}
		}
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		span  time.Duration
		first []string // elapsed labels of the first ticks
	}{
		{30 * time.Millisecond, []string{"0", "5ms", "10ms"}},
		{11 * time.Second, []string{"0", "1s", "2s"}},
		{95 * time.Second, []string{"0", "10s", "20s"}},
		{3 * time.Hour, []string{"0", "30m", "1h", "1h30m"}},
		{50 * time.Hour, []string{"0", "6h", "12h", "18h", "1d", "1d6h"}},
		{400 * 24 * time.Hour, []string{"0", "56d", "112d"}},
	} {
		ticks := timeTicks(t0, c.span, 100, 1000, time.UTC, true)
		var got []string
		for _, tk := range ticks {
			got = append(got, tk.Elapsed)
		}
		if len(ticks) < 2 || len(ticks) > 12 || !slices.Equal(got[:len(c.first)], c.first) {
			t.Errorf("span %s: ticks %v, want 2..12 starting %v", c.span, got, c.first)
		}
		for i := 1; i < len(ticks); i++ {
			if ticks[i].X-ticks[i-1].X < tickSpace-1 {
				t.Errorf("span %s: ticks %.1f apart", c.span, ticks[i].X-ticks[i-1].X)
			}
		}
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0ms", 350 * time.Millisecond: "350ms", 4100 * time.Millisecond: "4.1s", 12 * time.Second: "12s",
		184 * time.Second: "3m04s", 62 * time.Minute: "1h02m", 51 * time.Hour: "2d03h", -2 * time.Second: "-2.0s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%s) = %q, want %q", d, got, want)
		}
	}
	for v, want := range map[int64]string{0: "0 GiB", 512: "512 MiB", 81559: "79.6 GiB", 20480: "20 GiB"} {
		if got := fmtMiB(v); got != want {
			t.Errorf("fmtMiB(%d) = %q, want %q", v, got, want)
		}
	}
	if got := shorten("abcdef", 4); got != "abc…" {
		t.Errorf("shorten = %q", got)
	}
}

// ---------------------------------------------------------------------------
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
