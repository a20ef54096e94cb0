package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
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
