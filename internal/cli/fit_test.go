package cli

// Table and golden tests of how text is fitted to a terminal: ids cut in
// the middle, notes that keep what matters, the status table and the
// status --watch screen at a given width.

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

func TestElideMiddle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    string
		width int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly-10", 10, "exactly-10"},
		{"preprocess-shard-with-a-rather-long-name-0041", 40, "preprocess-shard-wit…ther-long-name-0041"},
		{"preprocess-shard-with-a-rather-long-name-0042", 40, "preprocess-shard-wit…ther-long-name-0042"},
		{"abcdefghij", 5, "ab…ij"},
		{"abcdefghij", 2, "a…"},
		{"abcdefghij", 1, "…"},
		{"abcdefghij", 0, ""},
		{"数据数据数据数据", 7, "数…数据"}, // two cells a character: 2+1+4
	} {
		got := elideMiddle(c.in, c.width)
		if got != c.want {
			t.Errorf("elideMiddle(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
		if w := ansi.StringWidth(got); w > max(c.width, 0) {
			t.Errorf("elideMiddle(%q, %d) is %d cells wide", c.in, c.width, w)
		}
	}
}

// The note of a GPU task waiting behind a full card: what it needs, what
// the best card has left, and what the other cards do.
const waitNote = "needs 24000 MiB; best card 1 has 5047 MiB left (foreign 0, sweep-1 holds 20000, sweep-3 holds 18000, " +
	"sweep-5 holds 20000, sweep-7 holds 18000); card 0 cooling down: a task just left it (until 10:14:49)"

func TestFitNote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		width int
		want  string
	}{
		{300, waitNote},
		// The list of holders goes first; the numbers and card 0's state stay.
		{109, "needs 24000 MiB; best card 1 has 5047 MiB left (…); card 0 cooling down: a task just left it (until 10:14:49)"},
		{100, "needs 24000 MiB; best card 1 has 5047 MiB left (…); card 0 cooling down: a task just left it (…)"},
		// Then the end goes: the most important comes first.
		{60, "needs 24000 MiB; best card 1 has 5047 MiB left (…); card 0…"},
		{50, "needs 24000 MiB; best card 1 has 5047 MiB left…"},
		{10, "needs 240…"},
	} {
		got := fitNote(waitNote, c.width)
		if got != c.want {
			t.Errorf("fitNote(width %d):\n got %q\nwant %q", c.width, got, c.want)
		}
		if w := ansi.StringWidth(got); w > c.width {
			t.Errorf("fitNote(width %d) is %d cells wide", c.width, w)
		}
	}
	// A parenthesis already as short as "(…)" is left alone.
	if got := fitNote("a (b) c", 5); got != "a (b…" {
		t.Errorf("fitNote of a short parenthesis: %q", got)
	}
}

// waitingRun is a run with a sweep of long task ids, one running and two
// waiting for a card, as status reads it.
func waitingRun(now time.Time) *runView {
	card := 1
	row := func(id string, st task.State) store.Row {
		return store.Row{Record: task.Record{ID: id, State: st}}
	}
	running := row("preprocess-shard-with-a-rather-long-name-0041", task.Running)
	running.Attempts = []task.Attempt{{Number: 1, Start: now.Add(-90 * time.Second), GPU: &card}}
	waiting := func(id, note string) store.Row {
		r := row(id, task.Pending)
		r.Waiting = task.WaitReason{Kind: task.WaitGPUMemory, Detail: note}
		return r
	}
	v := &runView{dir: "/runs/sweep", pid: 4242, gpuTasks: true, cardsAt: now.Add(-time.Second),
		rows: []store.Row{
			running,
			waiting("preprocess-shard-with-a-rather-long-name-0042", waitNote),
			waiting("preprocess-shard-with-a-rather-long-name-0043", strings.Replace(waitNote, "24000", "26512", 1)),
		},
		cards: []gpu.CardView{{Index: 1, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, UsedMiB: 76000, ChargedMiB: 76000,
			AvailableMiB: 5047, State: gpu.CardOK, Holders: []gpu.Holding{{Task: "preprocess-shard-with-a-rather-long-name-0041"}}}},
	}
	return v
}

// The status table at 120 columns (as status --watch draws it): every
// line fits; ids are cut in the middle, so the shard numbers tell the rows
// apart; the notes keep the memory needed and what the best card has left.
func TestStatusTableFitsWidth(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 14, 49, 0, time.Local)
	var b strings.Builder
	v := waitingRun(now)
	v.cards = nil // the cards' table is checked on its own
	writeStatusTable(&b, v, now, 120)
	want := "" +
		"3 tasks: 1 running, 2 pending\n" +
		"scheduler: running (pid 4242)\n" +
		"\n" +
		"TASK                             STATE    ATTEMPTS  EXIT  GPU  TIME   NOTE\n" +
		"preprocess-shar…-long-name-0041  running  1         -     1    1m30s  \n" +
		"preprocess-shar…-long-name-0042  pending  0         -     -    -      needs 24000 MiB; best card 1 has 5047 MiB left…\n" +
		"preprocess-shar…-long-name-0043  pending  0         -     -    -      needs 26512 MiB; best card 1 has 5047 MiB left…\n"
	got := b.String()
	if got != want {
		t.Errorf("status table at 120 columns:\n%s\nwant:\n%s", got, want)
	}
	for _, width := range []int{80, 100, 120, 200} {
		b.Reset()
		writeStatusTable(&b, v, now, width)
		for _, l := range strings.Split(b.String(), "\n") {
			if w := ansi.StringWidth(l); w > width {
				t.Errorf("width %d: line of %d cells: %q", width, w, l)
			}
		}
		if !strings.Contains(b.String(), "-0042  pending") || !strings.Contains(b.String(), "-0043  pending") {
			t.Errorf("width %d: the ids of the sweep cannot be told apart:\n%s", width, b.String())
		}
	}
	// Wide enough, the list of holders gives way and card 0's cooldown shows.
	b.Reset()
	writeStatusTable(&b, v, now, 200)
	if !strings.Contains(b.String(), "needs 24000 MiB; best card 1 has 5047 MiB left (…); card 0 cooling down: a task just left it (until 10:14:49)\n") {
		t.Errorf("status table at 200 columns:\n%s", b.String())
	}
	// Without a width, nothing is cut.
	b.Reset()
	writeStatusTable(&b, v, now, 0)
	if !strings.Contains(b.String(), "preprocess-shard-with-a-rather-long-name-0042  pending  0         -     -    -      "+waitNote+"\n") {
		t.Errorf("status table without a width cuts something:\n%s", b.String())
	}
}

// The status --watch screen on a terminal 100 columns wide: every line
// fits, cut where it shows ("…") rather than by the terminal; each waiting
// task's note keeps what the best card has left and card 0's cooldown.
func TestWatchViewFitsWidth(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 14, 49, 0, time.Local)
	var m tea.Model = watchModel{}
	m, _ = m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	m, _ = m.Update(watchMsg{at: now, every: time.Second, view: waitingRun(now)})
	screen := m.(watchModel).View().Content
	for _, l := range strings.Split(screen, "\n") {
		if w := ansi.StringWidth(l); w > 100 {
			t.Errorf("line of %d cells on a terminal of 100: %q", w, l)
		}
	}
	for _, want := range []string{
		"preproce…me-0041  running",
		"preproce…me-0042  pending  0         -     -    -      needs 24000 MiB; best card 1 has 5047 MiB…",
		"preproce…me-0043  pending",
		"\nCARD  NAME                   TOTAL  USED   FOREIGN  CHARGED  AVAILABLE  STATE  TASKS\n",
		"\n1     NVIDIA H100 80GB HBM3  81559  76000  0        76000    5047       ok     preprocess-shard-wit…",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the watch screen has no %q:\n%s", want, screen)
		}
	}
}
