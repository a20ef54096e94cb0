package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// The summary that ends "gpusched run": the counts by state (the blocked
// tasks that were not needed apart), the time taken, the failed tasks with
// the last lines of their logs, the blocked ones, and how many were left
// not started.

// writeSummary writes the summary of a run that ended with records;
// completedNow of the complete ones completed in this run.
func writeSummary(w io.Writer, records []gpusched.Record, completedNow int, took time.Duration, runDir string) {
	counts := map[gpusched.State]int{}
	state := make(map[string]gpusched.State, len(records))
	notNeeded := 0
	for _, r := range records {
		state[r.ID] = r.State
		if r.State == gpusched.StateBlocked && r.NotNeeded {
			notNeeded++
			continue
		}
		counts[r.State]++
	}
	var parts []string
	if kept := counts[gpusched.StateComplete] - completedNow; kept > 0 {
		parts = append(parts, fmt.Sprintf("%d kept (completed in an earlier run)", kept))
		counts[gpusched.StateComplete] = completedNow
	}
	for _, st := range []gpusched.State{gpusched.StateComplete, gpusched.StateFailed, gpusched.StateBlocked, gpusched.StateCancelled, gpusched.StatePending} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
		if st == gpusched.StateBlocked && notNeeded > 0 {
			parts = append(parts, fmt.Sprintf("%d not needed", notNeeded))
		}
	}
	fmt.Fprintf(w, "\n%d tasks in %s: %s\n", len(records), round(took), strings.Join(parts, ", "))
	tails, blocked := 0, 0
	var left notStarted
	for _, r := range records {
		switch r.State {
		case gpusched.StateFailed:
			a := r.LastAttempt()
			if a == nil {
				fmt.Fprintf(w, "  failed  %s: %s (it never started)\n", r.ID, r.Error)
				break
			}
			fmt.Fprintf(w, "  failed  %s: %s%s after %d attempt(s); log %s\n", r.ID, r.Error, exitDetail(a, r.Error), len(r.Attempts), a.LogPath)
			if tails++; tails <= maxSummaryTails {
				writeLogTail(w, a.LogPath, summaryTailLines)
			}
		case gpusched.StateBlocked:
			if r.NotNeeded {
				break // counted above; nothing went wrong
			}
			if state[r.BlockedBy] == gpusched.StateCancelled {
				left.blocked++ // by a task stopped with the run: not started, as pending ones
				break
			}
			if blocked++; blocked <= maxSummaryBlocked {
				fmt.Fprintf(w, "  blocked %s: %s\n", r.ID, r.Error)
			}
		case gpusched.StatePending:
			left.pending++
		case gpusched.StateRunning, gpusched.StateComplete, gpusched.StateCancelled:
			// Counted above; a cancelled task's attempt says why.
		}
	}
	if tails > maxSummaryTails {
		fmt.Fprintf(w, "  (the logs of the other %d failed tasks: gpusched logs TASK)\n", tails-maxSummaryTails)
	}
	if blocked > maxSummaryBlocked {
		fmt.Fprintf(w, "  (and %d more blocked: gpusched status lists every task)\n", blocked-maxSummaryBlocked)
	}
	if line := left.String(); line != "" {
		fmt.Fprintln(w, line)
	}
	writeHostMemory(w, records)
	fmt.Fprintf(w, "run directory: %s\n", runDir)
}

// maxSummaryMemory is how many tasks far over their host memory budget
// the summary names.
const maxSummaryMemory = 20

// writeHostMemory names the tasks whose last attempt used far more host
// memory than its budget (task.Attempt.OverHostMemory): admission trusted
// the budget, so the machine held more than it counted.
func writeHostMemory(w io.Writer, records []gpusched.Record) {
	over := 0
	for _, r := range records {
		a := r.LastAttempt()
		if a == nil {
			continue
		}
		ta := task.Attempt(*a)
		if !ta.OverHostMemory() {
			continue
		}
		if over++; over <= maxSummaryMemory {
			fmt.Fprintf(w, "  memory  %s: %s; raise its memory_mib_host\n", r.ID, ta.HostMemoryNote())
		}
	}
	if over > maxSummaryMemory {
		fmt.Fprintf(w, "  (and %d more over their host memory: gpusched status names them)\n", over-maxSummaryMemory)
	}
}

// The summary shows the last summaryTailLines lines of the log of each
// failed task, for the first maxSummaryTails of them, and names the first
// maxSummaryBlocked blocked tasks.
const (
	summaryTailLines  = 10
	maxSummaryTails   = 20
	maxSummaryBlocked = 20
)

// notStarted counts the tasks a run left without starting them: still
// pending (the run was interrupted), or blocked by a task that was
// cancelled when the run stopped. Either way the next run runs them.
type notStarted struct {
	pending, blocked int
}

// String is the summary's line about them, "" if there are none:
// "12 tasks not started (pending): they run on the next run".
func (n notStarted) String() string {
	total := n.pending + n.blocked
	if total == 0 {
		return ""
	}
	var why []string
	switch {
	case n.blocked == 0:
		why = append(why, "pending")
	case n.pending == 0:
		why = append(why, "blocked by a cancelled task")
	default:
		why = append(why, fmt.Sprintf("%d pending", n.pending), fmt.Sprintf("%d blocked by a cancelled task", n.blocked))
	}
	if total == 1 {
		return fmt.Sprintf("1 task not started (%s): it runs on the next run", why[0])
	}
	return fmt.Sprintf("%d tasks not started (%s): they run on the next run", total, strings.Join(why, ", "))
}

// exitDetail says how the attempt's process ended when the error does not
// already say it: " (exit code 3)", " (SIGKILL)".
func exitDetail(a *gpusched.Attempt, why string) string {
	switch {
	case a.ExitCode != nil && !strings.Contains(why, fmt.Sprintf("exit code %d", *a.ExitCode)):
		return fmt.Sprintf(" (exit code %d)", *a.ExitCode)
	case a.Signal != "" && !strings.Contains(why, a.Signal):
		return fmt.Sprintf(" (%s)", a.Signal)
	}
	return ""
}

// writeLogTail prints the last n lines of a log, indented and made safe
// for a terminal.
func writeLogTail(w io.Writer, path string, n int) {
	lines, err := logTail(path, n)
	switch {
	case err != nil:
		fmt.Fprintf(w, "    (cannot read its log: %v)\n", err)
	case len(lines) == 0:
		fmt.Fprintf(w, "    (its log is empty)\n")
	}
	for _, l := range lines {
		fmt.Fprintf(w, "    | %s\n", l)
	}
}

// logTail returns the last n lines of the file at path (at most the last
// 64 KiB of it, each line cut at 300 characters), made printable.
func logTail(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const window = 64 << 10
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	from := max(0, info.Size()-window)
	buf := make([]byte, info.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return tailLines(buf, from > 0, n), nil
}

// tailLines returns the last n lines of text, each cut at 300 characters
// and made printable; cut says text is the end of something longer (its
// first line is then partial, and dropped).
func tailLines(buf []byte, cut bool, n int) []string {
	text := strings.TrimRight(string(buf), "\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	if cut && len(lines) > 1 {
		lines = lines[1:] // the first one is cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		l = printable(l)
		if r := []rune(l); len(r) > 300 {
			l = string(r[:300]) + "…"
		}
		lines[i] = l
	}
	return lines
}

func round(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
