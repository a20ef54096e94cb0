package cli

// Table tests of what the live display draws.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
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

// The bar counts as done the tasks that ran to their end (complete or
// failed); blocked and cancelled ones show apart, as tasks that will not
// run, and the time left is for the tasks still to run.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		states map[gpusched.State]int
		want   string
	}{
		{"all complete", map[gpusched.State]int{gpusched.StateComplete: 10},
			"██████████████████████████████ 10/10 tasks  elapsed 1m00s"},
		{"failed count as done", map[gpusched.State]int{gpusched.StateComplete: 6, gpusched.StateFailed: 2, gpusched.StatePending: 2},
			"████████████████████████░░░░░░ 8/10 tasks  elapsed 1m00s  left ~15s"},
		{"blocked is not done", map[gpusched.State]int{gpusched.StateComplete: 3, gpusched.StateFailed: 1, gpusched.StateBlocked: 6},
			"████████████▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒ 4/10 tasks, 6 won't run  elapsed 1m00s"},
		{"cancelled is not done", map[gpusched.State]int{gpusched.StateComplete: 5, gpusched.StateCancelled: 2, gpusched.StatePending: 3},
			"███████████████▒▒▒▒▒▒░░░░░░░░░ 5/10 tasks, 2 won't run  elapsed 1m00s  left ~36s"},
		{"not needed will not run", map[gpusched.State]int{gpusched.StateComplete: 8, gpusched.StateBlocked: 2},
			"████████████████████████▒▒▒▒▒▒ 8/10 tasks, 2 won't run  elapsed 1m00s"},
		{"nothing done", map[gpusched.State]int{gpusched.StateCancelled: 1, gpusched.StatePending: 9},
			"▒▒▒░░░░░░░░░░░░░░░░░░░░░░░░░░░ 0/10 tasks, 1 won't run  elapsed 1m00s  left ?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newProgressState(0)
			var recs []gpusched.Record
			for st, n := range c.states {
				for range n {
					recs = append(recs, gpusched.Record{ID: fmt.Sprintf("t%02d", len(recs)), State: st})
				}
			}
			s.reset(recs)
			s.ended = s.counts[gpusched.StateComplete] + s.counts[gpusched.StateFailed] // as if all ended in this run
			f := s.frame(now, now.Add(-time.Minute))
			if got := strings.SplitN(f.render(100, 20), "\n", 2)[0]; got != c.want {
				t.Errorf("bar:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// Long ids of a sweep are cut in the middle, keeping the shard number that
// tells the rows apart; on a narrow terminal the column gives up room.
func TestProgressFrameSweepIDs(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	s := newProgressState(0)
	var recs []gpusched.Record
	for i := range 3 {
		recs = append(recs, gpusched.Record{ID: fmt.Sprintf("preprocess-shard-with-a-rather-long-name-%04d", 41+i), State: gpusched.StatePending})
	}
	s.reset(recs)
	for i, r := range recs {
		s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: r.ID, Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-time.Duration(3-i) * time.Second)}})
	}
	f := s.frame(now, now.Add(-time.Minute))
	want := "" +
		"  preprocess-shard-wit…ther-long-name-0041  cpu          3s\n" +
		"  preprocess-shard-wit…ther-long-name-0042  cpu          2s\n" +
		"  preprocess-shard-wit…ther-long-name-0043  cpu          1s\n"
	if got := strings.SplitN(f.render(120, 20), "\n", 3)[2]; got != want {
		t.Errorf("task lines at 120 columns:\n%s\nwant:\n%s", got, want)
	}
	want = "" +
		"  preprocess…name-0041  cpu          3s\n" +
		"  preprocess…name-0042  cpu          2s\n" +
		"  preprocess…name-0043  cpu          1s\n"
	if got := strings.SplitN(f.render(68, 20), "\n", 3)[2]; got != want {
		t.Errorf("task lines at 68 columns:\n%s\nwant:\n%s", got, want)
	}
}

// The count of waiting tasks says what they wait for, as the scheduler
// decided (in the kinds' order, without the kinds no task waits for); a
// narrow terminal cuts the line rather than wrap it.
func TestProgressWaitingBreakdown(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	s := newProgressState(0)
	s.reset(pendingRecords(6))
	f := s.frame(now, now.Add(-time.Minute))
	f.waits = map[task.WaitKind]int{task.WaitGPUMemory: 2, task.WaitSlot: 3, task.WaitDependencies: 1, task.WaitBackoff: 0, task.NotWaiting: 4}
	counts := strings.Split(f.render(0, 20), "\n")[1]
	if want := "complete 0 · failed 0 · running 0 · waiting 6 (1 for dependencies, 3 for a slot, 2 for GPU memory)"; counts != want {
		t.Errorf("counts line:\n got %q\nwant %q", counts, want)
	}
	if counts := strings.Split(f.render(60, 20), "\n")[1]; counts != "complete 0 · failed 0 · running 0 · waiting 6 (1 for depend…" {
		t.Errorf("counts line at 60 columns: %q", counts)
	}
	f.waits = map[task.WaitKind]int{task.NotWaiting: 6}
	if counts := strings.Split(f.render(0, 20), "\n")[1]; counts != "complete 0 · failed 0 · running 0 · waiting 6" {
		t.Errorf("counts line without reasons: %q", counts)
	}
}

// A Slurm task's line: queued, with its job and Slurm's reason, counted
// among the running as queued; once its command runs, its node, its job,
// and the time from its real start (not its time in the queue).
func TestProgressFrameSlurmJobs(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	s := newProgressState(0)
	s.reset(pendingRecords(3))
	for i, id := range []string{"t00000", "t00001", "t00002"} {
		s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: id, Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-time.Duration(90-i) * time.Second)}})
	}
	queued := &task.RemoteJob{System: "Slurm", ID: "4242", State: "PENDING", Reason: "Priority", Queued: true}
	s.apply(gpusched.Event{Kind: gpusched.EventJob, TaskID: "t00000", Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-90 * time.Second), Job: queued}})
	running := &task.RemoteJob{System: "Slurm", ID: "4243", State: "RUNNING", Node: "node7"}
	s.apply(gpusched.Event{Kind: gpusched.EventJob, TaskID: "t00001", Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-5 * time.Second), Job: running}})
	s.apply(gpusched.Event{Kind: gpusched.EventJob, TaskID: "t00002", Attempt: gpusched.Attempt{Number: 2, Start: now, Job: running}}) // not its attempt: ignored
	got := s.frame(now, now.Add(-2*time.Minute)).render(100, 10)
	want := "" +
		"░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░ 0/3 tasks  elapsed 2m00s  left ?\n" +
		"complete 0 · failed 0 · running 3 (1 queued) · waiting 0\n" +
		"  t00000  queued    1m30s  Slurm job 4242 PENDING (Priority)\n" +
		"  t00002  cpu       1m28s\n" +
		"  t00001  node7        5s  Slurm job 4243\n"
	if got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
	if lines := s.takeLines(); len(lines) != 0 {
		t.Errorf("lines printed above the display for job changes: %q", lines)
	}
}

// The plain output and --events name a Slurm attempt's job: a line per
// change, and "job" events whose job has its id, state, node and reason.
func TestJobEventLines(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		job  task.RemoteJob
		line string
	}{
		{task.RemoteJob{System: "Slurm", ID: "4242", State: "PENDING", Reason: "Priority", Queued: true},
			"10:00:00 job       train: Slurm job 4242 PENDING (Priority)"},
		{task.RemoteJob{System: "Slurm", ID: "4242", State: "RUNNING", Node: "node7"},
			"10:00:00 job       train: Slurm job 4242 RUNNING on node7"},
		{task.RemoteJob{System: "Slurm", Reason: "Slurm controller unreachable since 09:59:00: submission waits", Queued: true},
			"10:00:00 job       train: Slurm controller unreachable since 09:59:00: submission waits"},
	} {
		ev := gpusched.Event{Kind: gpusched.EventJob, Time: now, TaskID: "train", Attempt: gpusched.Attempt{Number: 1, Job: &tt.job}}
		if got := eventLine(ev); got != tt.line {
			t.Errorf("line = %q, want %q", got, tt.line)
		}
		lines := eventJSONLines(ev)
		if len(lines) != 1 || lines[0].Event != "job" || lines[0].Attempt != 1 || lines[0].Job == nil || *lines[0].Job != tt.job {
			t.Errorf("--events lines = %+v, want one job event with %+v", lines, tt.job)
		}
	}
	end := gpusched.Event{Kind: gpusched.EventComplete, Time: now, TaskID: "train",
		Attempt: gpusched.Attempt{Number: 1, Start: now, End: now, ExitCode: new(int), Job: &task.RemoteJob{ID: "4242", Node: "node7"}}}
	if l := eventJSONLines(end); len(l) != 2 || l[0].Event != "attempt-ended" || l[0].Job == nil || l[0].Job.Node != "node7" {
		t.Errorf("--events lines of the end = %+v, want attempt-ended with its job", l)
	}
}

// The counts line tells the blocked tasks not needed apart, from the
// records and from the events; one taken up again leaves the count.
func TestProgressNotNeeded(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	s := newProgressState(0)
	s.reset([]gpusched.Record{{ID: "prep", State: gpusched.StateComplete}, {ID: "clean", State: gpusched.StateBlocked, NotNeeded: true},
		{ID: "bad", State: gpusched.StateFailed}, {ID: "after-bad", State: gpusched.StateBlocked}, {ID: "clean2", State: gpusched.StatePending}})
	s.apply(gpusched.Event{Kind: gpusched.EventBlocked, TaskID: "clean2", BlockedBy: "prep", NotNeeded: true})
	counts := func() string { return strings.Split(s.frame(now, now.Add(-time.Minute)).render(0, 20), "\n")[1] }
	if got, want := counts(), "complete 1 (1 kept) · failed 1 · blocked 1 · not needed 2 · running 0 · waiting 0"; got != want {
		t.Errorf("counts line:\n got %q\nwant %q", got, want)
	}
	s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "clean", Attempt: gpusched.Attempt{Number: 1, Start: now}})
	if got, want := counts(), "complete 1 (1 kept) · failed 1 · blocked 1 · not needed 1 · running 1 · waiting 0"; got != want {
		t.Errorf("counts line after clean started:\n got %q\nwant %q", got, want)
	}
}

// A task on several cards shows them all, in the order chosen, and its
// budget as each card's; the place column widens for them.
func TestProgressFrameTaskOnTwoCards(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	first, one := 2, 0
	s := newProgressState(0)
	s.reset(pendingRecords(3))
	s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "t00001", Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-5 * time.Second),
		GPU: &first, GPUs: []int{2, 1}, MemRequestedMiB: 20000}})
	s.apply(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "t00002", Attempt: gpusched.Attempt{Number: 1, Start: now.Add(-4 * time.Second),
		GPU: &one, MemRequestedMiB: 1000}})
	f := s.frame(now, now.Add(-time.Minute))
	f.charged = map[string]int64{"t00001": 21000}
	got := f.render(100, 10)
	want := "" +
		"░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░ 0/3 tasks  elapsed 1m00s  left ?\n" +
		"complete 0 · failed 0 · running 2 · waiting 1\n" +
		"  t00001  cards 2,1      5s  21000/20000 MiB each\n" +
		"  t00002  card 0         4s  1000/1000 MiB\n"
	if got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
}

// The charge the display shows of a task on several cards is the most one
// of them holds; each card's other tasks keep theirs.
func TestChargedByTask(t *testing.T) {
	t.Parallel()
	cards := []gpu.CardView{
		{Index: 1, Holders: []gpu.Holding{{Task: "pair", RequestMiB: 20000, ObservedMiB: 21000}, {Task: "small", RequestMiB: 1000}}},
		{Index: 2, Holders: []gpu.Holding{{Task: "pair", RequestMiB: 20000, ObservedMiB: 19000}}},
	}
	got := chargedByTask(cards)
	if len(got) != 2 || got["pair"] != 21000 || got["small"] != 1000 {
		t.Errorf("charged %v; want pair 21000 (its most on one card), small 1000", got)
	}
}
