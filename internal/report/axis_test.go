package report

import (
	"slices"
	"testing"
	"time"
)

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
