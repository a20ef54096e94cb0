package report

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// The memory charts stay small however many samples there are.
func TestManySamples(t *testing.T) {
	d := small()
	d.Samples = nil
	for s := range 100_000 {
		d.Samples = append(d.Samples, store.Sample{At: t0.Add(time.Duration(s) * 120 * time.Microsecond), Index: 0,
			TotalMiB: 81559, CapacityMiB: 81047, ChargedMiB: int64(s%50) * 1000, ObservedMiB: int64(s%7) * 1000})
	}
	m := Build(d)
	for _, path := range []string{m.Memory[0].Foreign, m.Memory[0].InUse, m.Memory[0].Reserved} {
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

// pointAt returns the drawn reading of chart ch at sec seconds.
func pointAt(t *testing.T, ch MemChart, sec float64) MemPoint {
	t.Helper()
	for _, p := range ch.Points {
		if p.At.Equal(at(sec)) {
			return p
		}
	}
	t.Fatalf("GPU %d: no reading at %gs", ch.Card, sec)
	return MemPoint{}
}

// checkStack checks what holds for every drawn reading: foreign and ours
// in use never exceed the card (they are its used memory), and Over is
// exactly how far the charged stack goes beyond the total.
func checkStack(t *testing.T, ch MemChart) {
	t.Helper()
	for _, p := range ch.Points {
		if p.Foreign < 0 || p.InUse < 0 || p.Lag < 0 || p.Foreign+p.InUse > p.Total {
			t.Errorf("GPU %d at %s: foreign %d + in use %d (lag %d) is not within the total %d", ch.Card, p.At.Format("05.00"), p.Foreign, p.InUse, p.Lag, p.Total)
		}
		if want := max(0, p.Foreign+max(p.Charged, p.InUse)-p.Total); p.Over != want {
			t.Errorf("GPU %d at %s: over %d, want %d", ch.Card, p.At.Format("05.00"), p.Over, want)
		}
	}
}

// A task's memory that nvidia-smi showed in the card's used memory before
// it showed the task's process is drawn as ours, not as foreign, and
// foreign plus charged stays within the card: in the real capture, card
// 0's only foreign use is a steady 6000 MiB, card 1 has none.
func TestForeignLag(t *testing.T) {
	m := Build(resumed())
	if len(m.Memory) != 2 {
		t.Fatalf("%d memory charts, want 2", len(m.Memory))
	}
	c0, c1 := m.Memory[0], m.Memory[1]
	for _, c := range []struct {
		ch                           MemChart
		sec                          float64
		foreign, lag, inUse, charged int64
	}{
		// Just after sweep-2, -4 and -8 started on card 0: sweep-8's 8000
		// MiB counted as foreign, and sweep-8 failed before the next
		// reading, so the reading after shows no more of ours.
		{c0, 1.12, 6000, 8000, 62000, 62000},
		{c0, 2.1, 6000, 0, 54000, 54000},
		// Resumed: sweep-3 and sweep-6 just started; sweep-6 left before
		// the next reading, sweep-3's 18000 were counted as foreign.
		{c0, 11.39, 6000, 18000, 42000, 42000},
		{c0, 13.26, 6000, 0, 18000, 18000},
		// Card 1: three sweeps, none seen yet; then three resumed, one seen.
		{c1, 1.12, 0, 76000, 76000, 76000},
		{c1, 11.39, 0, 40000, 48000, 66512},
	} {
		p := pointAt(t, c.ch, c.sec)
		got := []int64{p.Foreign, p.Lag, p.InUse, p.Charged, p.Over}
		if want := []int64{c.foreign, c.lag, c.inUse, c.charged, 0}; !slices.Equal(got, want) {
			t.Errorf("GPU %d at %gs: foreign, lag, in use, charged, over = %v, want %v", c.ch.Card, c.sec, got, want)
		}
	}
	for _, ch := range m.Memory {
		checkStack(t, ch)
		if ch.Over != "" {
			t.Errorf("GPU %d: an over-the-total area %q, though nothing went beyond the card", ch.Card, ch.Over)
		}
	}
	if !strings.Contains(c0.Summary, "foreign up to 5.9 GiB") || !strings.Contains(c1.Summary, "foreign up to 0 GiB") {
		t.Errorf("summaries %q, %q: want foreign up to 5.9 GiB (card 0's own) and 0 GiB", c0.Summary, c1.Summary)
	}
	if len(c0.Notes) != 1 || !strings.Contains(c0.Notes[0], "At 2 readings, up to 17.6 GiB that nvidia-smi counted as foreign was our tasks' memory") {
		t.Errorf("card 0's notes %q, want one on the 2 readings with memory moved to ours", c0.Notes)
	}
}

// Foreign memory that goes away stays foreign when nothing of ours started
// or grew: a foreign process left.
func TestForeignLeaves(t *testing.T) {
	d := Data{Now: at(30), Location: time.UTC, Rows: []store.Row{
		row("steady", task.Complete, 20000, onCard(att(1, 0, 0, 20, 0), 0, 20000, 15000)),
	}}
	for _, s := range []struct {
		at               float64
		foreign, obs, ch int64
	}{
		{1, 30000, 0, 20000},     // steady started at 0, not seen yet ...
		{3, 30000, 15000, 20000}, // ... seen: its 15000 were never foreign
		{5, 10000, 15000, 20000}, // 20000 of foreign left
		{7, 10000, 15000, 20000}, // unchanged
		{21, 25000, 0, 0},        // steady ended; foreign came back ...
		{23, 5000, 0, 0},         // ... and left while nothing of ours ran
		{25, 5000, 0, 0},         //
	} {
		d.Samples = append(d.Samples, store.Sample{At: at(s.at), Index: 0, TotalMiB: 81559, CapacityMiB: 81047,
			ForeignMiB: s.foreign, ObservedMiB: s.obs, ChargedMiB: s.ch, UsedMiB: s.foreign + s.obs})
	}
	ch := Build(d).Memory[0]
	for _, p := range ch.Points {
		if p.Lag != 0 {
			t.Errorf("at %s: %d MiB of foreign drawn as ours; nothing of ours appeared at the next reading", p.At.Format("05"), p.Lag)
		}
	}
	if p := pointAt(t, ch, 1); p.Foreign != 30000 {
		t.Errorf("at 1s foreign %d, want 30000: it stayed at the next reading", p.Foreign)
	}
	if len(ch.Notes) != 0 {
		t.Errorf("notes %q, want none", ch.Notes)
	}
	checkStack(t, ch)
}

// Foreign use that grows after our task was admitted leaves part of its
// budget without free memory: foreign plus charged goes beyond the card's
// total. That is drawn apart, above the total, and said.
func TestChargedBeyondTotal(t *testing.T) {
	d := Data{Now: at(30), Location: time.UTC, Rows: []store.Row{
		row("big", task.Complete, 60000, onCard(att(1, 0, 0, 20, 0), 0, 60000, 10000)),
	}}
	for _, s := range []struct {
		at      float64
		foreign int64
	}{{1, 6000}, {3, 6000}, {5, 50000}, {7, 50000}, {9, 6000}} {
		d.Samples = append(d.Samples, store.Sample{At: at(s.at), Index: 0, TotalMiB: 81559, CapacityMiB: 81047,
			ForeignMiB: s.foreign, ObservedMiB: 10000, ChargedMiB: 60000, UsedMiB: s.foreign + 10000})
	}
	ch := Build(d).Memory[0]
	checkStack(t, ch)
	for _, c := range []struct {
		sec  float64
		over int64
	}{{1, 0}, {3, 0}, {5, 50000 + 60000 - 81559}, {7, 50000 + 60000 - 81559}, {9, 0}} {
		if p := pointAt(t, ch, c.sec); p.Over != c.over || p.Foreign+p.InUse > p.Total {
			t.Errorf("at %gs: over %d, want %d", c.sec, p.Over, c.over)
		}
	}
	if ch.Over == "" {
		t.Error("no area for the charge beyond the total")
	}
	if len(ch.Notes) != 1 || !strings.Contains(ch.Notes[0], "At 2 readings, foreign plus charged went beyond the card's total, by up to 27.8 GiB") {
		t.Errorf("notes %q, want one saying why the charge goes beyond the total", ch.Notes)
	}
	// The axis reaches the top of the stack.
	if top := ch.YTicks[len(ch.YTicks)-1]; top.Y > ch.PlotY+0.05 || ch.YTicks[0].Label != "0 GiB" {
		t.Errorf("y ticks %v", ch.YTicks)
	}
}

// A task that grows shows its new memory in the card's used memory before
// its process's; when another task of ours leaves by the next reading, the
// growth is still told from a foreign process leaving. From a real run of
// examples/fake-gpus (card 0 of its second run): sweep-8 (26512 MiB asked)
// starts with 8000 and grows to 26000 after 1s, sweep-6 (24000) ends at
// 17.47s; the card's only foreign use is 6000 MiB.
func TestForeignLagGrowth(t *testing.T) {
	grow := onCard(att(1, 15, 15.43, 19.48, 0), 0, 26512, 26000)
	other := onCard(att(1, 15, 15.43, 17.47, 0), 0, 24000, 24000)
	d := Data{Now: at(30), Location: time.UTC, Rows: []store.Row{row("sweep-8", task.Complete, 26512, grow), row("sweep-6", task.Complete, 24000, other)}}
	for _, s := range []struct {
		at               float64
		foreign, obs, ch int64
	}{
		{14.45, 6000, 0, 0},
		{15.48, 38000, 0, 50512},     // both started, neither seen: 32000 of theirs in foreign
		{16.46, 24000, 32000, 50512}, // both seen; sweep-8's growth of 18000 not yet
		{17.51, 6000, 26000, 26512},  // sweep-6 gone, sweep-8 seen at 26000
		{19.53, 6000, 0, 0},
	} {
		d.Samples = append(d.Samples, store.Sample{At: at(s.at), Index: 0, TotalMiB: 81559, CapacityMiB: 81047,
			ForeignMiB: s.foreign, ObservedMiB: s.obs, ChargedMiB: s.ch, UsedMiB: s.foreign + s.obs})
	}
	ch := Build(d).Memory[0]
	checkStack(t, ch)
	for _, p := range ch.Points {
		if p.Foreign != 6000 {
			t.Errorf("at %s: foreign %d (lag %d), want the card's own 6000", p.At.Sub(t0), p.Foreign, p.Lag)
		}
	}
	if p := pointAt(t, ch, 16.46); p.Lag != 18000 || p.InUse != 50000 {
		t.Errorf("at 16.46s: lag %d, in use %d; want 18000 and 50000", p.Lag, p.InUse)
	}

	// The same, but what left foreign was a foreign process, and sweep-6
	// used at the end what it used at its peak: nothing is moved.
	d.Rows[0].Attempts[0].MemPeakMiB = 8000
	d.Samples[3].ObservedMiB, d.Samples[3].ChargedMiB = 8000, 26512
	ch = Build(d).Memory[0]
	if p := pointAt(t, ch, 16.46); p.Lag != 0 || p.Foreign != 24000 {
		t.Errorf("a foreign process left as sweep-6 ended: lag %d, foreign %d; want 0 and 24000", p.Lag, p.Foreign)
	}
}
