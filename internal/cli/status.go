package cli

import (
	"bufio"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	var runDir string
	var asJSON, watch bool
	var interval time.Duration
	c := &cobra.Command{
		Use:   "status [WORKFLOW] [--run-dir DIR] [--json | --watch [--interval 1s]]",
		Short: "Show the state of every task of a run",
		Long: `Show every task of a run: state, attempts, last exit code, card, time, why
it failed or is blocked, and why a pending task is still waiting, as the
scheduler decided it (its dependencies, a free slot, GPU memory: what it
needs and what stands in the way on the best card, a reserved or cooling
card, its retry delay; see docs/states.md). With GPU
tasks, the cards are shown too: the scheduler's last view of them and how
old it is (after the run, how they were when it ended). Name the run with
--run-dir, or give the workflow file to use its default run directory
("-": the run of a workflow read from standard input); with neither, the
one run under ./.gpusched is shown. It reads the state database without
locking it, so it works while "gpusched run" is going.

A Slurm task's note names its job and node, or, while its job waits in
Slurm's queue, Slurm's reason ("queued in Slurm as job 4242: Priority").

--json prints {"run_dir": ..., "scheduler_pid": ..., "tasks": [{"id",
"state", "attempts", "exit_code", "gpu", "waiting", "waiting_kind", "job",
...}], "gpus": [...], "gpus_as_of": ...}; exit_code and gpu are null when
not known; waiting_kind ("dependencies", "slot", "gpu-memory", ...; for a
running Slurm task whose job waits, "queued") is there while a scheduler
runs; job ({"system", "id", "state", "node", "reason", "queued"}) is the
last attempt's Slurm job, as Slurm last said (see docs/slurm.md).

--watch shows it again every --interval (1s) until Ctrl-C, or until the run
is over (no scheduler uses the run directory), when it prints the final
state once and exits 0; with no scheduler running it prints it once. On a
terminal it redraws in place, full screen; elsewhere (a pipe, a file) it
prints a new full status every interval, after a blank line.`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			wf := firstArg(args)
			dir, err := findRunDir(runDir, wf)
			if err != nil {
				return err
			}
			if watch {
				switch {
				case asJSON:
					return inputf("--watch and --json cannot be used together; poll status --json instead")
				case interval < 100*time.Millisecond:
					return inputf("--interval must be at least 100ms, got %s", interval)
				}
				return watchStatus(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), dir, interval)
			}
			if c.Flags().Changed("interval") {
				return inputf("--interval goes with --watch")
			}
			prepareHeap(0, dir)
			collectLess() // status exits once it has printed
			v, err := loadRun(dir)
			if err != nil {
				return err
			}
			return buffered(c.OutOrStdout(), func(w io.Writer) error {
				if asJSON {
					return writeStatusJSON(w, v)
				}
				writeStatusTable(w, v, time.Now(), 0)
				return nil
			})
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	c.Flags().BoolVar(&watch, "watch", false, "show it again every --interval until Ctrl-C or the end of the run")
	c.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch refreshes")
	return c
}

// buffered calls write with a buffer in front of w, and empties it: a
// table of 100,000 rows is otherwise written a line, a system call, at a
// time.
func buffered(w io.Writer, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	err := write(bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}
