package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/gpu"
)

// Reading a rendered page back: the SVGs parsed with encoding/xml, the
// table rows by their anchors.

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
