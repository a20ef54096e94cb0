package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
)

func newRunCmd() *cobra.Command {
	var runDir string
	var jobs int
	var dryRun bool
	var out runOutput
	c := &cobra.Command{
		Use:   "run WORKFLOW [--run-dir DIR] [-j N] [--no-progress] [--events FILE]",
		Short: "Run a workflow's tasks to the end",
		Long: `Run the tasks of WORKFLOW (a YAML file) until every one has completed,
failed, or been blocked by a failed dependency.

State and logs go to the run directory: --run-dir, by default
.gpusched/<workflow name> beside the workflow file. Running again on the
same run directory keeps the tasks that completed and runs the rest.

On a terminal, a live display shows an overall bar (tasks complete, failed,
running and waiting, time elapsed, an estimate of the time left) and a line
per running task (its card, its time, its GPU memory charged/requested);
failures, retries, cancellations and quarantined cards are printed above
it and stay in the scrollback. Elsewhere (a pipe, a file, CI), or with
--no-progress, it prints one timestamped line per change instead. Either
way it ends with a summary: counts by state, the time taken, and for each
failed task its exit code or signal, the last lines of its log and the
log's path.

--events FILE writes one JSON object per line per event, flushed line by
line, for other programs (FILE is truncated first; "-" is stdout, and the
human output then goes to stderr). Every line has "time" (RFC 3339) and
"event", one of started, attempt-ended, complete, retrying, failed,
blocked, cancelled, card-quarantined, event-failed; then, where they apply,
"task", "attempt" (from 1), "card" (GPU index), "memory_mib" (the GPU
memory an attempt was admitted with), "exit_code", "signal" (e.g. SIGKILL),
"error" (why it failed, or why a card was quarantined), "blocked_by",
"log" (the attempt's log file), "rerun" (why a task that ran before runs
again) and "duration_s" (of an attempt). An attempt that ends gives
attempt-ended, then complete, retrying, failed or cancelled.

Ctrl-C (SIGINT) or SIGTERM stops running tasks (SIGTERM to each task's
process group, SIGKILL after the kill grace) and records them cancelled.

Exit codes: 0 every task completed; 1 a task failed, was blocked or was
cancelled; 2 the workflow or the command line is invalid (nothing ran).`,
		Args: exactArgs(1, "one workflow file"),
		RunE: func(c *cobra.Command, args []string) error {
			if dryRun {
				return runPlan(c.OutOrStdout(), args[0], runDir, false)
			}
			w, err := loadWorkflow(args[0])
			if err != nil {
				return err
			}
			if c.Flags().Changed("jobs") {
				if jobs < 1 {
					return inputf("-j/--jobs must be at least 1, got %d", jobs)
				}
				w.Scheduling.MaxParallelTasks = jobs
			}
			// GPU requests no card can hold, or no nvidia-smi: invalid
			// input, refused before the run directory is created.
			if err := gpusched.CheckGPUs(c.Context(), w.Scheduling, w.Tasks); err != nil {
				return invalid(w.Locate(err))
			}
			dir, _ := runDirFor(runDir, args[0])
			return runWorkflow(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), w.Scheduling, w.Tasks, dir, out)
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory (default .gpusched/<workflow name> beside the workflow)")
	c.Flags().IntVarP(&jobs, "jobs", "j", 0, "run at most N tasks at once (default: the workflow's max_parallel_tasks, else the number of CPUs)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show what would run and why (as \"gpusched plan\"); run nothing")
	c.Flags().BoolVar(&out.noProgress, "no-progress", false, "no live display on a terminal: one timestamped line per change")
	c.Flags().StringVar(&out.events, "events", "", "write one JSON object per event to FILE (\"-\": stdout; the human output goes to stderr)")
	return c
}

// runOutput is how a run reports as it goes.
type runOutput struct {
	noProgress bool   // plain lines even on a terminal
	events     string // --events: a file, "-" for stdout, "" for none
}

func runWorkflow(ctx context.Context, stdout, stderr io.Writer, s gpusched.Scheduling, tasks []gpusched.TaskSpec, dir string, o runOutput) (err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	// Where the events go, and the human output.
	human := stdout
	var events *eventLog
	switch o.events {
	case "":
	case "-":
		human = stderr
		events = newEventLog(newLineQueue(stdout))
	default:
		f, err := os.OpenFile(o.events, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return inputf("--events: %w", err)
		}
		defer f.Close()
		events = newEventLog(newLineQueue(f))
	}
	if events != nil {
		defer func() {
			// A write error is said, unless a louder error is said already.
			if werr := events.close(); werr != nil && message(err) == "" {
				err = fmt.Errorf("--events %s: %w", o.events, werr)
			}
		}()
	}
	var display runDisplay
	if !o.noProgress && isTerminal(human) {
		display = newLiveDisplay(human, dir, len(tasks))
	} else {
		display = newPlainDisplay(human, stderr)
	}
	// Every way out of here gives the terminal back (the summary below
	// stops the display first; this is for the errors).
	defer display.stop()

	// A reader that goes away (gpusched run | head) must not kill the
	// scheduler in the middle of its tasks: with SIGPIPE notified, a write
	// to a closed pipe fails with EPIPE instead, and that output is dropped.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	// The first SIGINT or SIGTERM stops the run gracefully; later ones are
	// swallowed while the tasks are being stopped, so that gpusched itself
	// never dies leaving process groups behind.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	grace := s.KillGrace
	if grace == 0 {
		grace = gpusched.DefaultKillGrace
	}
	go func() {
		select {
		case sig := <-sigs:
			display.interrupted(fmt.Sprintf("gpusched: %s: stopping running tasks (SIGTERM, then SIGKILL after %s)", sig, grace))
			cancel()
		case <-ctx.Done():
		}
	}()

	start := time.Now()
	completedNow := 0 // touched by the observer only, read after Run
	sched, err := gpusched.New(dir, s, gpusched.WithObserver(func(ev gpusched.Event) {
		if ev.Kind == gpusched.EventComplete {
			completedNow++
		}
		if events != nil {
			events.observe(ev)
		}
		display.observe(ev)
	}))
	if err != nil {
		return err
	}
	defer sched.Close()
	if err := sched.SubmitMany(tasks); err != nil {
		return err
	}
	display.begin(sched.Records())
	records, err := sched.Run(ctx)
	display.stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	writeSummary(human, records, completedNow, time.Since(start), sched.RunDir())
	if n, err := pendingEvents(sched.RunDir()); err == nil && n > 0 {
		fmt.Fprintf(human, "%d completion event(s) not delivered yet (see gpusched status); they are delivered again on the next run\n", n)
	}
	for _, r := range records {
		if r.State != gpusched.StateComplete {
			return errUnfinished
		}
	}
	return nil
}

func writeSummary(w io.Writer, records []gpusched.Record, completedNow int, took time.Duration, runDir string) {
	counts := map[gpusched.State]int{}
	for _, r := range records {
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
	}
	fmt.Fprintf(w, "\n%d tasks in %s: %s\n", len(records), round(took), strings.Join(parts, ", "))
	tails := 0
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
			fmt.Fprintf(w, "  blocked %s: %s\n", r.ID, r.Error)
		}
	}
	if tails > maxSummaryTails {
		fmt.Fprintf(w, "  (the logs of the other %d failed tasks: gpusched logs TASK)\n", tails-maxSummaryTails)
	}
	fmt.Fprintf(w, "run directory: %s\n", runDir)
}

// The summary shows the last summaryTailLines lines of the log of each
// failed task, for the first maxSummaryTails of them.
const (
	summaryTailLines = 10
	maxSummaryTails  = 20
)

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
	text := strings.TrimRight(string(buf), "\n")
	if text == "" {
		return nil, nil
	}
	lines := strings.Split(text, "\n")
	if from > 0 && len(lines) > 1 {
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
	return lines, nil
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
