package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// twoCards is a run with one task on cards 2 and 1 (12000 MiB on each, a
// peak of 11000 on one), from 0.5s to 1.5s, and a CPU task. The cards are
// read at 0, 1 and 2 seconds: at 1s nvidia-smi counted the pair's memory
// in both cards' used memory (foreign) without showing its process; at 2s
// it had ended.
func twoCards() Data {
	pair := onCard(att(1, 0, 0.5, 1.5, 0), 2, 12000, 11000)
	pair.GPUs = []int{2, 1}
	rows := []store.Row{
		row("pair", task.Complete, 12000, pair),
		row("prep", task.Complete, 0, att(1, 0, 0, 2, 0)),
	}
	var samples []store.Sample
	for _, s := range []float64{0, 1, 2} {
		for _, c := range []int{1, 2} {
			sm := store.Sample{At: at(s), Index: c, TotalMiB: 24576, CapacityMiB: 24064, ForeignMiB: 1000}
			if s == 1 {
				sm.ForeignMiB, sm.ChargedMiB = 1000+12000, 12000
			}
			samples = append(samples, sm)
		}
	}
	return Data{RunDir: "/runs/pair", Rows: rows, Samples: samples, Now: at(2), Location: t0.Location()}
}

// An attempt on two cards is drawn in the lane of each, as one bar marked
// as a 2-card task's; the table lists its cards together; each card's
// chart counts its memory.
func TestAttemptOnTwoCards(t *testing.T) {
	m := Build(twoCards())
	if m.Attempts != 2 || m.Cards != 2 {
		t.Errorf("attempts %d, cards %d; want 2 attempts (the pair counted once) on 2 cards", m.Attempts, m.Cards)
	}
	lanes := map[string][]Bar{}
	for _, g := range m.Timeline.Groups {
		for _, l := range g.Lanes {
			for _, b := range l.Bars {
				if b.Task == "pair" {
					lanes[l.Key] = append(lanes[l.Key], b)
				}
			}
		}
	}
	if len(lanes) != 2 || len(lanes["gpu-1/1"]) != 1 || len(lanes["gpu-2/1"]) != 1 {
		t.Fatalf("pair's bars by lane: %v; want one in gpu-1/1 and one in gpu-2/1", lanes)
	}
	b1, b2 := lanes["gpu-1/1"][0], lanes["gpu-2/1"][0]
	if b1.Card != 1 || b2.Card != 2 || !slices.Equal(b1.Cards, []int{2, 1}) || !slices.Equal(b2.Cards, []int{2, 1}) {
		t.Errorf("bars' cards: %d %v and %d %v; want each its lane's card, both of cards [2 1]", b1.Card, b1.Cards, b2.Card, b2.Cards)
	}
	if b1.X != b2.X || b1.W != b2.W {
		t.Errorf("the two bars are at %.1f+%.1f and %.1f+%.1f; want the same bar", b1.X, b1.W, b2.X, b2.W)
	}
	for _, want := range []string{"GPUs 2,1: one of a 2-card task", "asked 12000 MiB on each", "peak 11000 MiB on one card"} {
		if !strings.Contains(b1.Title, want) {
			t.Errorf("bar title %q lacks %q", b1.Title, want)
		}
	}
	if b1.Text != "" && !strings.HasPrefix(b1.Text, "2× ") {
		t.Errorf("bar text %q does not say it is one of 2 cards' bars", b1.Text)
	}
	for _, r := range m.Rows {
		if r.ID == "pair" && r.Card != "2,1" {
			t.Errorf("pair's table card %q, want 2,1", r.Card)
		}
	}
	// At 1s both cards counted the pair's 12000 MiB as foreign; the
	// pair's start and end on each card move it to ours on each.
	if len(m.Memory) != 2 {
		t.Fatalf("%d memory charts, want 2", len(m.Memory))
	}
	for _, ch := range m.Memory {
		p := pointAt(t, ch, 1)
		if p.Foreign != 1000 || p.Lag != 12000 || p.InUse != 12000 {
			t.Errorf("GPU %d at 1s: foreign %d, lag %d, in use %d; want 1000, 12000, 12000 (the pair's memory is ours on each card)",
				ch.Card, p.Foreign, p.Lag, p.InUse)
		}
		checkStack(t, ch)
	}
	var page bytes.Buffer
	if err := Render(&page, m); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), `class="o-complete multi"`); n != 2 {
		t.Errorf("the page draws %d bars marked multi, want 2 (pair on each card)", n)
	}
}
