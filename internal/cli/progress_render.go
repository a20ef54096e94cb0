package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// What the live display draws: a snapshot of progressState (a frame),
// rendered as text for a terminal of a given size.

// progressFrame is a snapshot of progressState, drawn by progressModel.
type progressFrame struct {
	now, start time.Time
	total      int
	counts     [gpusched.StateCancelled + 1]int
	notNeeded  int // of the blocked, those not needed
	kept       int
	ended      int
	running    []runningTask    // oldest first
	charged    map[string]int64 // GPU memory charged per running task, when known
	stopping   bool
	gpuUnknown string // why the GPUs cannot be read, while they cannot
	// waits counts the waiting tasks by the scheduler's reason, when read.
	waits map[task.WaitKind]int
}

func (s *progressState) frame(now, start time.Time) progressFrame {
	f := progressFrame{now: now, start: start, total: s.total, counts: s.counts, kept: s.kept, ended: s.ended, stopping: s.stopping,
		gpuUnknown: s.gpuUnknown, notNeeded: len(s.notNeeded)}
	f.running = make([]runningTask, 0, len(s.running))
	for _, t := range s.running {
		f.running = append(f.running, t)
	}
	slices.SortFunc(f.running, func(a, b runningTask) int {
		return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.id, b.id))
	})
	return f
}

func (f progressFrame) gpuRunning() bool {
	return slices.ContainsFunc(f.running, func(t runningTask) bool { return len(t.cards) > 0 })
}

// The id column of the running tasks' lines: at most maxIDWidth cells, and
// on a narrow terminal what is left of its width after the rest of a line
// (card, time, memory, attempt: taskLineRest cells), but never less than
// minIDWidth.
const (
	maxIDWidth   = 40
	minIDWidth   = 16
	taskLineRest = 48
)

// render draws the frame for a terminal of the given size (0: unknown).
//
// The bar has three parts: █ the tasks done (complete or failed: they ran
// to their end), ▒ those that will not run in this run (blocked by a
// failure or not needed, or cancelled), ░ those still to run (pending or
// running). The count is of the tasks done; the estimate of the time left
// is for those still to run, at the pace tasks have ended so far.
func (f progressFrame) render(width, height int) string {
	var b strings.Builder
	c := f.counts
	done := c[gpusched.StateComplete] + c[gpusched.StateFailed]
	wontRun := c[gpusched.StateBlocked] + c[gpusched.StateCancelled]
	barWidth := 30
	if width > 0 && width < 90 {
		barWidth = max(10, width-60)
	}
	filled, skipped := 0, 0
	if f.total > 0 {
		filled = barWidth * done / f.total
		skipped = barWidth*(done+wontRun)/f.total - filled
	}
	b.WriteString(strings.Repeat("█", filled) + strings.Repeat("▒", skipped) + strings.Repeat("░", barWidth-filled-skipped))
	fmt.Fprintf(&b, " %d/%d tasks", done, f.total)
	if wontRun > 0 {
		fmt.Fprintf(&b, ", %d won't run", wontRun)
	}
	elapsed := f.now.Sub(f.start)
	fmt.Fprintf(&b, "  elapsed %s", clock(elapsed))
	if left := f.total - done - wontRun; left > 0 && !f.stopping {
		if f.ended == 0 || elapsed <= 0 {
			b.WriteString("  left ?")
		} else {
			eta := time.Duration(float64(elapsed) * float64(left) / float64(f.ended))
			fmt.Fprintf(&b, "  left ~%s", clock(max(eta, time.Second)))
		}
	}
	b.WriteString("\n")

	complete := fmt.Sprintf("complete %d", c[gpusched.StateComplete])
	if f.kept > 0 {
		complete += fmt.Sprintf(" (%d kept)", f.kept)
	}
	parts := []string{complete, fmt.Sprintf("failed %d", c[gpusched.StateFailed])}
	if n := c[gpusched.StateBlocked] - f.notNeeded; n > 0 {
		parts = append(parts, fmt.Sprintf("blocked %d", n))
	}
	if f.notNeeded > 0 {
		parts = append(parts, fmt.Sprintf("not needed %d", f.notNeeded))
	}
	if n := c[gpusched.StateCancelled]; n > 0 {
		parts = append(parts, fmt.Sprintf("cancelled %d", n))
	}
	waiting := fmt.Sprintf("waiting %d", c[gpusched.StatePending])
	if why := waitBreakdown(f.waits); why != "" && c[gpusched.StatePending] > 0 {
		waiting += " (" + why + ")"
	}
	running := fmt.Sprintf("running %d", c[gpusched.StateRunning])
	if n := f.queued(); n > 0 {
		running += fmt.Sprintf(" (%d queued)", n)
	}
	parts = append(parts, running, waiting)
	line := strings.Join(parts, " · ")
	if f.stopping && c[gpusched.StateRunning] > 0 {
		line += " · stopping: waiting for the running tasks to end"
	}
	if width > 0 {
		line = ansi.Truncate(line, width, "…")
	}
	b.WriteString(line + "\n")
	if f.gpuUnknown != "" {
		line := "GPU: " + f.gpuUnknown
		if width > 0 {
			line = ansi.Truncate(line, width, "…")
		}
		b.WriteString(line + "\n")
	}

	// One line per running task, as many as the terminal holds.
	room := 20
	if height > 0 {
		room = min(40, height-3)
	}
	shown := f.running
	more := 0
	if len(shown) > room {
		n := max(0, room-1)
		shown, more = shown[:n], len(shown)-n
	}
	// Ids too long for their column are cut in the middle: the rows of a
	// sweep differ at the end (…-shard-0041, …-shard-0042).
	idWidth := 0
	for _, t := range shown {
		idWidth = max(idWidth, ansi.StringWidth(t.id))
	}
	maxID := maxIDWidth
	if width > 0 {
		maxID = min(maxIDWidth, max(minIDWidth, width-taskLineRest))
	}
	idWidth = min(idWidth, maxID)
	wheres := make([]string, len(shown))
	whereWidth := 7
	for i, t := range shown {
		wheres[i] = t.where()
		whereWidth = max(whereWidth, len(wheres[i]))
	}
	for i, t := range shown {
		fmt.Fprintf(&b, "  %s  %-*s %7s", padRight(elideMiddle(t.id, idWidth), idWidth), whereWidth, wheres[i], clock(f.now.Sub(t.start)))
		if len(t.cards) > 0 {
			charged, ok := f.charged[t.id]
			if !ok {
				charged = t.reqMiB
			}
			fmt.Fprintf(&b, "  %d/%d MiB", charged, t.reqMiB)
			if len(t.cards) > 1 {
				b.WriteString(" each")
			}
		}
		if t.attempt > 1 {
			fmt.Fprintf(&b, "  attempt %d", t.attempt)
		}
		if t.adopted {
			b.WriteString("  adopted")
		}
		if t.job != nil {
			b.WriteString("  " + jobLine(t.job))
		}
		b.WriteString("\n")
	}
	if more > 0 {
		fmt.Fprintf(&b, "  … and %d more running\n", more)
	}
	return b.String()
}

// where says where a running task runs, for its line of the display:
// "card 2", "cards 2,1" (a task on several), "cpu", "queued" (in a batch
// system's queue) or the batch system's node.
func (t runningTask) where() string {
	switch {
	case len(t.cards) > 1:
		return "cards " + task.CardList(t.cards)
	case len(t.cards) == 1:
		return "card " + strconv.Itoa(t.cards[0])
	case t.job != nil && t.job.Queued:
		return "queued"
	case t.job != nil && t.job.Node != "":
		return t.job.Node
	}
	return "cpu"
}

// queued counts the running tasks whose attempt waits in a batch
// system's queue.
func (f progressFrame) queued() int {
	n := 0
	for _, t := range f.running {
		if t.job != nil && t.job.Queued {
			n++
		}
	}
	return n
}

// jobLine is a running task's job, on its line of the display: the job
// id, and why it waits while it waits ("slurm job 4242 PENDING
// (Priority)"); the node is in the line's place column.
func jobLine(j *task.RemoteJob) string {
	if !j.Queued {
		c := *j
		c.Node, c.State, c.Reason = "", "", ""
		j = &c
	}
	return jobText(j)
}

// clock formats a duration in whole seconds, compactly: 7s, 4m05s, 2h03m.
func clock(d time.Duration) string {
	d = max(0, d.Truncate(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
