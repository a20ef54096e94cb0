package cli

// Table tests of what the live display draws.

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// The frame: bar, counts, a line per running task with its card and memory
// charged/requested, cut to the terminal's height.
func TestProgressFrameRender(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	card := 1
	s := newProgressState(0)
	recs := pendingRecords(10)
	recs[0].State = gpusched.StateComplete // kept
	s.reset(recs)
	s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "t00001", Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-65 * time.Second)}})
	s.apply(gpusched.Event{Kind: gpusched.EventComplete, TaskID: "t00001", Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-65 * time.Second), End: now.Add(-60 * time.Second)}})
	s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "t00002", Attempt: gpusched.Attempt{Number: 2, Start: now.Add(-3 * time.Second), GPU: &card, MemRequestedMiB: 1000}})
	for i := 3; i < 7; i++ {
		s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: fmt.Sprintf("t%05d", i), Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-time.Duration(i) * time.Second / 10)}})
	}
	f := s.frame(now, now.Add(-2*time.Minute))
	f.charged = map[string]int64{"t00002": 1500}
	got := f.render(100, 7)
	want := "" +
		"██████░░░░░░░░░░░░░░░░░░░░░░░░ 2/10 tasks  elapsed 2m00s  left ~16m00s\n" +
		"complete 2 (1 kept) · failed 0 · running 5 · waiting 3\n" +
		"  t00002  card 1       3s  1500/1000 MiB  attempt 2\n" +
		"  t00006  cpu          0s\n" +
		"  t00005  cpu          0s\n" +
		"  … and 2 more running\n"
	if got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
	if lines := s.takeLines(); len(lines) != 0 {
		t.Errorf("lines to print for starts and completions: %q", lines)
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 1500 * time.Millisecond: "1s", 59 * time.Second: "59s", 65 * time.Second: "1m05s",
		time.Hour + 3*time.Minute + 20*time.Second: "1h03m", -time.Second: "0s",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%s) = %q, want %q", d, got, want)
		}
	}
}
