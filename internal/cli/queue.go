package cli

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/task"
)

func newQueueCmd() *cobra.Command {
	var o client.QueueOptions
	var states string
	var asJSON bool
	var socket string
	c := &cobra.Command{
		Use:   "queue [--json] [--all] [--user U] [--state S]",
		Short: "Show the daemon's tasks",
		Long: `Show the daemon's tasks not finished yet (--all: every task), in submission
order: id, owner, state (and why a pending one waits, when known: the
tasks it runs after, each with its condition when not success, "after
13/prep (any outcome)"; a blocked one not needed says so), card (every
card, "2,1", for a task on several), time (running for, or how long its
last attempt took), a note when some task has one (the GPU memory budget
learned from history, gpu_mib_auto; the Slurm job), and the command (your
own tasks; others' show their run's name).

--user U shows one user's tasks (a name or a uid); --state S (pending,
running, complete, failed, blocked, cancelled; comma-separated) tasks in
these states. --json prints {"tasks": [{"id", "run", "kind", "name",
"owner", "uid", "state", "attempts", "exit_code", "gpu", "gpus",
"waiting", "error", "blocked_by", "not_needed", "submitted", "started",
"ended", "gpu_mib", "gpu_mib_source", "gpu_budget", "job", "command",
"dir"}]}; exit_code and gpu are null when not known (gpu is the first
card; gpus, all of them, only for a task on several), waiting is "" when
the reason is not known; gpu_mib (the budget chosen), gpu_mib_source
(history, max, default or grown) and gpu_budget (how, in words) only for
a task not finished that learns its budget; job ({"system", "id",
"state", "node", "reason", "queued"}) only for a task not finished whose
attempt runs in Slurm.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if states != "" {
				o.States = strings.Split(states, ",")
			}
			cl, err := dialDaemon(c.Context(), socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			if asJSON {
				// The daemon's answer is the output: passed on as it comes.
				out := bufio.NewWriterSize(c.OutOrStdout(), 256<<10)
				if err := cl.QueueJSON(c.Context(), o, out); err != nil {
					return refusal(fmt.Errorf("queue: %w", err))
				}
				return out.Flush()
			}
			tasks, err := cl.Queue(c.Context(), o)
			if err != nil {
				return refusal(fmt.Errorf("queue: %w", err))
			}
			writeQueue(c.OutOrStdout(), tasks, time.Now())
			return nil
		},
	}
	c.Flags().BoolVar(&o.All, "all", false, "finished tasks too")
	c.Flags().StringVar(&o.User, "user", "", "only this user's tasks")
	c.Flags().StringVar(&states, "state", "", "only tasks in these states (comma-separated)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

// writeQueue prints the queue as a table; with a NOTE column when a task
// has a note (queueNote).
func writeQueue(w io.Writer, tasks []client.TaskInfo, now time.Time) {
	if len(tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
		return
	}
	notes := make([]string, len(tasks))
	noted := false
	for i := range tasks {
		notes[i] = queueNote(&tasks[i])
		noted = noted || notes[i] != ""
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if noted {
		fmt.Fprintln(tw, "ID\tOWNER\tSTATE\tCARD\tTIME\tNOTE\tCOMMAND")
	} else {
		fmt.Fprintln(tw, "ID\tOWNER\tSTATE\tCARD\tTIME\tCOMMAND")
	}
	for i, t := range tasks {
		state := t.State
		switch {
		case t.Waiting != "":
			state += ": " + t.Waiting
		case t.Paused && t.State == "running":
			state += " (paused: no retry starts)"
		case t.NotNeeded && t.BlockedBy != "":
			state += ": not needed (" + t.BlockedBy + " completed)"
		case t.NotNeeded:
			state += ": not needed"
		}
		card := "-"
		switch {
		case len(t.GPUs) > 0:
			card = task.CardList(t.GPUs)
		case t.GPU != nil:
			card = strconv.Itoa(*t.GPU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", t.ID, t.Owner, elide.Line(state, 40), card, taskTime(t, now))
		if noted {
			fmt.Fprintf(tw, "%s\t", cmp.Or(elide.Line(notes[i], 70), "-"))
		}
		fmt.Fprintln(tw, taskWhat(t))
	}
	tw.Flush()
}

// queueNote says what else the queue knows of t, "; " between, as gpusched
// status says it: the GPU and host memory budgets learned from history,
// and its batch system's job; "" for none.
func queueNote(t *client.TaskInfo) string {
	var parts []string
	if t.GPUBudget != "" {
		parts = append(parts, t.GPUBudget)
	}
	if t.HostBudget != "" {
		parts = append(parts, t.HostBudget)
	}
	if j := t.Job; j != nil {
		parts = append(parts, jobText(&task.RemoteJob{System: j.System, ID: j.ID, State: j.State, Node: j.Node, Reason: j.Reason, Queued: j.Queued}))
	}
	return strings.Join(parts, "; ")
}

// taskTime is how long a running task has run, or its last attempt took.
func taskTime(t client.TaskInfo, now time.Time) string {
	switch {
	case t.Started == nil:
		return "-"
	case t.Ended == nil:
		return clock(now.Sub(*t.Started))
	}
	return clock(t.Ended.Sub(*t.Started))
}

// taskWhat is the command, for its owner, else the run's name (in
// parentheses).
func taskWhat(t client.TaskInfo) string {
	if len(t.Command) == 0 {
		return "(" + elide.Line(t.Name, 60) + ")"
	}
	parts := make([]string, len(t.Command))
	for i, a := range t.Command {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return elide.Line(strings.Join(parts, " "), 80)
}
