package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// After Ctrl-C the summary says once how many tasks were left not started,
// whether the engine left them pending or blocked them behind the tasks it
// cancelled, and names none of them; tasks blocked by a failure are named,
// up to maxSummaryBlocked.
func TestSummaryNotStarted(t *testing.T) {
	t.Parallel()
	chain := func(n int, second gpusched.State) []gpusched.Record {
		recs := []gpusched.Record{{ID: "t0000", State: gpusched.StateCancelled, Error: "cancelled"}}
		for i := 1; i < n; i++ {
			r := gpusched.Record{ID: fmt.Sprintf("t%04d", i), State: second}
			if second == gpusched.StateBlocked {
				r.BlockedBy, r.Error = "t0000", `blocked: dependency "t0000" cancelled`
			}
			recs = append(recs, r)
		}
		return recs
	}
	for _, c := range []struct {
		name    string
		records []gpusched.Record
		want    []string // lines after the counts
	}{
		{"pending", chain(1000, gpusched.StatePending),
			[]string{"999 tasks not started (pending): they run on the next run"}},
		{"blocked by the cancelled task", chain(1000, gpusched.StateBlocked),
			[]string{"999 tasks not started (blocked by a cancelled task): they run on the next run"}},
		{"one", chain(2, gpusched.StatePending),
			[]string{"1 task not started (pending): it runs on the next run"}},
		{"both", append(chain(3, gpusched.StateBlocked), gpusched.Record{ID: "other", State: gpusched.StatePending}),
			[]string{"3 tasks not started (1 pending, 2 blocked by a cancelled task): they run on the next run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			writeSummary(&b, c.records, 0, time.Second, "/r")
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if got := lines[1 : len(lines)-1]; strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("summary:\n%s\nwant between the counts and the run directory:\n%s", b.String(), strings.Join(c.want, "\n"))
			}
		})
	}
	// Blocked by a failure: each named, up to the limit.
	recs := []gpusched.Record{{ID: "bad", State: gpusched.StateFailed, Error: "exit code 1"}}
	for i := range maxSummaryBlocked + 5 {
		recs = append(recs, gpusched.Record{ID: fmt.Sprintf("b%02d", i), State: gpusched.StateBlocked, BlockedBy: "bad", Error: `blocked: dependency "bad" failed`})
	}
	var b strings.Builder
	writeSummary(&b, recs, 0, time.Second, "/r")
	if n := strings.Count(b.String(), "\n  blocked "); n != maxSummaryBlocked {
		t.Errorf("%d blocked lines, want %d:\n%s", n, maxSummaryBlocked, b.String())
	}
	if !strings.Contains(b.String(), "\n  (and 5 more blocked: gpusched status lists every task)\n") || strings.Contains(b.String(), "not started") {
		t.Errorf("summary of a failure that blocks %d tasks:\n%s", maxSummaryBlocked+5, b.String())
	}
}

// The summary names the tasks whose last attempt used far more host
// memory than its budget, up to maxSummaryMemory; status says it in the
// task's note, whatever its state.
func TestHostMemoryOverIsReported(t *testing.T) {
	t.Parallel()
	over := gpusched.Attempt{Number: 1, HostMemRequestedMiB: 1500, RSSPeakMiB: 4210}
	within := gpusched.Attempt{Number: 1, HostMemRequestedMiB: 1500, RSSPeakMiB: 2000}
	earlier := gpusched.Attempt{Number: 1, HostMemRequestedMiB: 100, RSSPeakMiB: 9000} // then a second attempt within
	recs := []gpusched.Record{
		{ID: "hog", State: gpusched.StateComplete, Attempts: []gpusched.Attempt{over}},
		{ID: "fine", State: gpusched.StateComplete, Attempts: []gpusched.Attempt{within}},
		{ID: "undeclared", State: gpusched.StateComplete, Attempts: []gpusched.Attempt{{Number: 1, RSSPeakMiB: 9000}}},
		{ID: "better", State: gpusched.StateComplete, Attempts: []gpusched.Attempt{earlier, within}},
	}
	var b strings.Builder
	writeSummary(&b, recs, 4, time.Second, "/r")
	want := "  memory  hog: peak RSS 4210 MiB, 2.8x its memory_mib_host of 1500 MiB; raise its memory_mib_host\n"
	if !strings.Contains(b.String(), want) || strings.Count(b.String(), "  memory  ") != 1 {
		t.Errorf("summary:\n%s\nwant the one line\n%s", b.String(), want)
	}
	for range maxSummaryMemory + 2 {
		recs = append(recs, recs[0])
	}
	b.Reset()
	writeSummary(&b, recs, len(recs), time.Second, "/r")
	if n := strings.Count(b.String(), "  memory  "); n != maxSummaryMemory || !strings.Contains(b.String(), "(and 3 more over their host memory") {
		t.Errorf("summary names %d tasks over their memory:\n%s", n, b.String())
	}

	v := &runView{}
	for _, st := range []task.State{task.Running, task.Complete, task.Failed} {
		row := store.Row{Record: task.Record{ID: "hog", State: st, Error: "exit code 137", Attempts: []task.Attempt{task.Attempt(over)}}}
		if note := taskRow(v, row, nil, time.Now())[6]; !strings.HasSuffix(note, "peak RSS 4210 MiB, 2.8x its memory_mib_host of 1500 MiB") {
			t.Errorf("status note of a %s task: %q", st, note)
		}
	}
	row := store.Row{Record: task.Record{ID: "fine", State: task.Complete, Attempts: []task.Attempt{task.Attempt(within)}}}
	if note := taskRow(v, row, nil, time.Now())[6]; note != "" {
		t.Errorf("status note of a task within its budget: %q", note)
	}
}

// Tasks not needed are counted apart from the blocked ones and named in
// no line: nothing went wrong with them.
func TestSummaryNotNeeded(t *testing.T) {
	t.Parallel()
	recs := []gpusched.Record{
		{ID: "prep", State: gpusched.StateComplete},
		{ID: "cleanup", State: gpusched.StateBlocked, NotNeeded: true, BlockedBy: "prep",
			Error: `not needed: dependency "prep" completed; this task runs on its failure`},
		{ID: "bad", State: gpusched.StateFailed, Error: "exit code 1"},
		{ID: "after-bad", State: gpusched.StateBlocked, BlockedBy: "bad", Error: `blocked: dependency "bad" failed`},
	}
	var b strings.Builder
	writeSummary(&b, recs, 2, time.Second, "/r")
	out := b.String()
	if !strings.Contains(out, "4 tasks in 1s: 1 complete, 1 failed, 1 blocked, 1 not needed\n") {
		t.Errorf("counts line wrong:\n%s", out)
	}
	if strings.Contains(out, "cleanup") || !strings.Contains(out, "  blocked after-bad: ") {
		t.Errorf("want after-bad named, cleanup not:\n%s", out)
	}
}
