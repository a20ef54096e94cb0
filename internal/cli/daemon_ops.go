package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/client"
)

func newCancelCmd() *cobra.Command {
	var socket string
	c := &cobra.Command{
		Use:   "cancel ID|RUN...",
		Short: "Cancel tasks or runs on the daemon",
		Long: `Cancel tasks (12, 13/train) or whole runs (13) on the daemon: a pending
task never starts, a running one is stopped (SIGTERM to its process
group, SIGKILL after the kill grace); both end cancelled, and what depends
on them blocked. It prints each task it cancelled, once it has ended;
finished tasks are left as they are. Only a task's owner and root may
cancel it.`,
		Args: needIDs,
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := dialDaemon(c.Context(), socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			done, err := cl.Cancel(c.Context(), args...)
			if err != nil {
				return refusal(fmt.Errorf("cancel %s: %w", strings.Join(args, " "), err))
			}
			printIDs(c, done)
			return nil
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

func newWaitCmd() *cobra.Command {
	var socket string
	c := &cobra.Command{
		Use:   "wait ID|RUN...",
		Short: "Wait for tasks or runs on the daemon to finish",
		Long: `Wait until every task named (12, 13/train) or of every run named (13) is
finished. Exit code 0 when all completed; 1 otherwise, after a line that
says which did not and why. If the daemon restarts meanwhile, wait
connects again (and again, backing off up to 2s) and goes on.`,
		Args: needIDs,
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := dialDaemon(c.Context(), socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			tasks, err := cl.Wait(c.Context(), args, nil)
			if err != nil {
				return refusal(fmt.Errorf("wait for %s: %w", strings.Join(args, " "), err))
			}
			return unfinished(tasks)
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

// unfinished is nil when every task completed, else one line naming
// those that did not (the first few) and how they ended.
func unfinished(tasks []client.TaskInfo) error {
	var bad []string
	n := 0
	for _, t := range tasks {
		if t.State == "complete" {
			continue
		}
		n++
		if len(bad) == 5 {
			continue
		}
		why := t.State
		switch {
		case t.ExitCode != nil && *t.ExitCode != 0:
			why += fmt.Sprintf(" (exit code %d)", *t.ExitCode)
		case t.BlockedBy != "":
			why += " by " + t.BlockedBy
		case t.Error != "":
			why += " (" + oneLine(t.Error) + ")"
		}
		bad = append(bad, "task "+t.ID+" "+why)
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > len(bad) {
		more = fmt.Sprintf(", and %d more", n-len(bad))
	}
	return fmt.Errorf("%d of %d tasks did not complete: %s%s", n, len(tasks), strings.Join(bad, ", "), more)
}

// needIDs is the argument check of the commands that act on tasks or
// runs named by id.
func needIDs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return inputf("%s takes the ids of tasks or runs; see gpusched queue", c.CommandPath())
	}
	return nil
}
