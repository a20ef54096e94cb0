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
	c := &cobra.Command{
		Use:   "run WORKFLOW [--run-dir DIR] [-j N]",
		Short: "Run a workflow's tasks to the end",
		Long: `Run the tasks of WORKFLOW (a YAML file) until every one has completed,
failed, or been blocked by a failed dependency.

State and logs go to the run directory: --run-dir, by default
.gpusched/<workflow name> beside the workflow file. Running again on the
same run directory keeps the tasks that completed and runs the rest.

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
					return invalid(fmt.Errorf("-j/--jobs must be at least 1, got %d", jobs))
				}
				w.Scheduling.MaxParallelTasks = jobs
			}
			// GPU requests no card can hold, or no nvidia-smi: invalid
			// input, refused before the run directory is created.
			if err := gpusched.CheckGPUs(c.Context(), w.Scheduling, w.Tasks); err != nil {
				return invalid(w.Locate(err))
			}
			dir, _ := runDirFor(runDir, args[0])
			return runWorkflow(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), w.Scheduling, w.Tasks, dir)
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory (default .gpusched/<workflow name> beside the workflow)")
	c.Flags().IntVarP(&jobs, "jobs", "j", 0, "run at most N tasks at once (default: the workflow's max_parallel_tasks, else the number of CPUs)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show what would run and why (as \"gpusched plan\"); run nothing")
	return c
}

func runWorkflow(ctx context.Context, stdout, stderr io.Writer, s gpusched.Scheduling, tasks []gpusched.TaskSpec, dir string) error {
	if ctx == nil {
		ctx = context.Background()
	}
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
			fmt.Fprintf(stderr, "gpusched: %s: stopping running tasks (SIGTERM, then SIGKILL after %s)\n", sig, grace)
			cancel()
		case <-ctx.Done():
		}
	}()

	start := time.Now()
	completedNow := 0 // touched by the observer only, read after Run
	obs := lineObserver(stdout)
	sched, err := gpusched.New(dir, s, gpusched.WithObserver(func(ev gpusched.Event) {
		if ev.Kind == gpusched.EventComplete {
			completedNow++
		}
		obs(ev)
	}))
	if err != nil {
		return failed(err)
	}
	defer sched.Close()
	if err := sched.SubmitMany(tasks); err != nil {
		return invalid(err) // validated already; only a programming error lands here
	}
	records, err := sched.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return failed(err)
	}
	writeSummary(stdout, records, completedNow, time.Since(start), sched.RunDir())
	if v, err := loadRun(sched.RunDir()); err == nil && v.nPending > 0 {
		fmt.Fprintf(stdout, "%d completion event(s) not delivered yet (see gpusched status); they are delivered again on the next run\n", v.nPending)
	}
	for _, r := range records {
		if r.State != gpusched.StateComplete {
			return &exitError{code: ExitFailed}
		}
	}
	return nil
}

// lineObserver prints one timestamped line per transition: readable in a
// terminal, a pipe or a CI log alike.
func lineObserver(w io.Writer) func(gpusched.Event) {
	return func(ev gpusched.Event) {
		ts := ev.Time.Format("15:04:05")
		a := ev.Attempt
		switch ev.Kind {
		case gpusched.EventStarted:
			detail := fmt.Sprintf("attempt %d", a.Number)
			if a.GPU != nil {
				detail += fmt.Sprintf(", card %d, %d MiB", *a.GPU, a.MemRequestedMiB)
			}
			if ev.Rerun != "" {
				detail += "; runs again: " + ev.Rerun
			}
			fmt.Fprintf(w, "%s start     %s (%s)\n", ts, ev.TaskID, detail)
		case gpusched.EventComplete:
			fmt.Fprintf(w, "%s complete  %s (attempt %d, %s)\n", ts, ev.TaskID, a.Number, round(a.End.Sub(a.Start)))
		case gpusched.EventRetrying:
			fmt.Fprintf(w, "%s retry     %s: attempt %d %s; log %s\n", ts, ev.TaskID, a.Number, a.Error, a.LogPath)
		case gpusched.EventFailed:
			if a.Number == 0 {
				fmt.Fprintf(w, "%s failed    %s: %s\n", ts, ev.TaskID, ev.Error)
				break
			}
			fmt.Fprintf(w, "%s failed    %s: attempt %d %s; log %s\n", ts, ev.TaskID, a.Number, a.Error, a.LogPath)
		case gpusched.EventBlocked:
			fmt.Fprintf(w, "%s blocked   %s (by %s)\n", ts, ev.TaskID, ev.BlockedBy)
		case gpusched.EventCancelled:
			fmt.Fprintf(w, "%s cancelled %s\n", ts, ev.TaskID)
		case gpusched.EventDeliveryFailed:
			fmt.Fprintf(w, "%s event     %s: completion handler failed, will retry: %s\n", ts, ev.TaskID, ev.Error)
		}
	}
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
	for _, r := range records {
		switch r.State {
		case gpusched.StateFailed:
			if a := r.LastAttempt(); a != nil {
				fmt.Fprintf(w, "  failed  %s: %s after %d attempt(s); log %s\n", r.ID, r.Error, len(r.Attempts), a.LogPath)
			} else {
				fmt.Fprintf(w, "  failed  %s: %s (it never started)\n", r.ID, r.Error)
			}
		case gpusched.StateBlocked:
			fmt.Fprintf(w, "  blocked %s: %s\n", r.ID, r.Error)
		}
	}
	fmt.Fprintf(w, "run directory: %s\n", runDir)
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
