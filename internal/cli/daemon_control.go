package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newPauseCmd() *cobra.Command {
	var socket string
	var stop bool
	c := &cobra.Command{
		Use:   "pause [ID|RUN]...",
		Short: "Pause tasks or runs on the daemon: nothing of them starts until resumed",
		Long: `Pause tasks (12, 13/train) or whole runs (13) on the daemon; with no id,
every task of yours (root: every task). A paused pending task does not
start: gpusched queue shows it pending, waiting "paused". A paused
running task runs on, and does not start again if it fails; with --stop
its process group is stopped (SIGSTOP) until gpusched resume (SIGCONT).
A stopped task's timeout keeps counting. Pausing survives a restart of
the daemon. It prints each task it paused; finished tasks are left as
they are. Only a task's owner and root may pause it.`,
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := dialDaemon(c.Context(), socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			done, err := cl.Pause(c.Context(), stop, args...)
			printIDs(c, done)
			if err != nil {
				return refusal(fmt.Errorf("pause %s: %w", idsOrAll(args), err))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stop, "stop", false, "also stop running tasks (SIGSTOP to their process groups) until resumed")
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

func newResumeCmd() *cobra.Command {
	var socket string
	c := &cobra.Command{
		Use:   "resume [ID|RUN]...",
		Short: "Resume paused tasks or runs on the daemon",
		Long: `Resume paused tasks (12, 13/train) or whole runs (13) on the daemon; with
no id, every paused task of yours (root: every one). A pending task may
start again; a running one that pause --stop stopped continues (SIGCONT).
It prints each task it resumed. Only a task's owner and root may resume
it.`,
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := dialDaemon(c.Context(), socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			done, err := cl.Resume(c.Context(), args...)
			printIDs(c, done)
			if err != nil {
				return refusal(fmt.Errorf("resume %s: %w", idsOrAll(args), err))
			}
			return nil
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

func newRetryCmd() *cobra.Command {
	var socket string
	c := &cobra.Command{
		Use:   "retry ID|RUN...",
		Short: "Run failed, cancelled or blocked tasks on the daemon again",
		Long: `Run failed, cancelled or blocked tasks (12, 13/train) again on the daemon,
with their retries renewed, and the tasks they blocked; a run's id (13)
stands for those of its tasks that failed, were cancelled or are blocked.
A task named that is pending, running or complete, or one that depends
on a failed task not retried with it, is refused and nothing is retried.
A pending task that depends on a retried task on: any or on: failure
(or --after-any, --after-failure given while it had not finished) waits
for its new end, whether or not the daemon restarted since. It prints every task made pending again.
Only a task's owner and root may retry it.`,
		Args: needIDs,
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := dialDaemon(c.Context(), socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			done, err := cl.Retry(c.Context(), args...)
			if err != nil {
				return refusal(fmt.Errorf("retry %s: %w", strings.Join(args, " "), err))
			}
			printIDs(c, done)
			return nil
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

// printIDs prints task ids, one a line.
func printIDs(c *cobra.Command, ids []string) {
	for _, id := range ids {
		fmt.Fprintln(c.OutOrStdout(), id)
	}
}

// idsOrAll names what a command without ids acts on.
func idsOrAll(args []string) string {
	if len(args) == 0 {
		return "all your tasks"
	}
	return strings.Join(args, " ")
}
