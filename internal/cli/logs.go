package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/suggest"
)

func newLogsCmd() *cobra.Command {
	var runDir, wfFlag, socket string
	var attempt int
	var follow bool
	c := &cobra.Command{
		Use:   "logs [WORKFLOW] TASK [--run-dir DIR] [--attempt N] [-f]",
		Short: "Print the log of a task's attempt",
		Long: `Print the output (stdout and stderr) of a task's last attempt, or of
attempt N with --attempt. Name the run as for status: the workflow file
first, for its default run directory, or --run-dir; with neither, the one
run under ./.gpusched. (-w/--workflow FILE, from older versions, still
names the workflow.)

-f (--follow) keeps printing what the attempt writes, like tail -f (waiting
for the task to start if it has not yet). When the attempt ends and the task
runs again, it goes on with the next attempt's log after a line
"--- attempt N ---". It exits once the task is complete, failed, blocked or
cancelled, or when no scheduler uses the run directory any more, after
printing the rest of the log.

A task of the daemon: gpusched logs ID, with ID as the daemon prints it
(12, 13/train), no workflow and no --run-dir, reads the daemon's log of
the task when a daemon answers (see gpusched submit for which). Only the
task's owner and root may read it. To read task 12 of a run directory
while a daemon is up, name the run: gpusched logs --run-dir DIR 12.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return inputf("%s takes a task id, after the workflow file if one is given (got %d arguments); see %s --help",
					c.CommandPath(), len(args), c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 && runDir == "" && wfFlag == "" && isDaemonID(args[0]) {
				if handled, err := daemonLogs(c, socket, args[0], attempt, follow); handled {
					return err
				}
			}
			wf, task := "", args[len(args)-1]
			if len(args) == 2 {
				wf = args[0]
			}
			if wfFlag != "" {
				if wf != "" {
					return inputf("the workflow is given twice (%s and -w %s); give it once, before the task", wf, wfFlag)
				}
				wf = wfFlag
				fmt.Fprintf(c.ErrOrStderr(), "gpusched: -w/--workflow is deprecated: give the workflow before the task (gpusched logs %s %s)\n", wf, task)
			}
			dir, err := findRunDir(runDir, wf)
			if err != nil {
				return err
			}
			if follow {
				return followLog(c.Context(), c.OutOrStdout(), dir, task, attempt)
			}
			rows, err := loadRows(dir)
			if err != nil {
				return err
			}
			path, err := logPath(rows, task, attempt)
			if err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("open log: %w", err)
			}
			defer f.Close()
			if _, err := io.Copy(c.OutOrStdout(), f); err != nil {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().StringVarP(&wfFlag, "workflow", "w", "", "workflow file whose default run directory to use (deprecated: give it before the task)")
	_ = c.Flags().MarkHidden("workflow")
	c.Flags().IntVar(&attempt, "attempt", 0, "attempt number (default: the last)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log as it is written, across the task's attempts, until the task ends")
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket, for a daemon's task")
	return c
}

func logPath(rows []store.Row, id string, attempt int) (string, error) {
	i := slices.IndexFunc(rows, func(r store.Row) bool { return r.ID == id })
	if i < 0 {
		msg := fmt.Sprintf("no task %q in this run", id)
		near := suggest.Closest(id, func(yield func(string) bool) {
			for _, r := range rows {
				if !yield(r.ID) {
					return
				}
			}
		})
		if near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return "", errors.New(msg)
	}
	r := rows[i]
	if len(r.Attempts) == 0 {
		return "", fmt.Errorf("task %q has not started yet (state %s)", id, r.State)
	}
	if attempt == 0 {
		return r.LastAttempt().LogPath, nil
	}
	for _, a := range r.Attempts {
		if a.Number == attempt {
			return a.LogPath, nil
		}
	}
	return "", inputf("task %q has no attempt %d (it has attempts %d to %d)", id, attempt, r.Attempts[0].Number, r.LastAttempt().Number)
}
