package cli

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/executor/slurm"
	"github.com/gpusched/gpusched/internal/workflow"
)

func newSlurmCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "slurm",
		Short: "Commands about running on a Slurm cluster (see docs/slurm.md)",
		Args:  unknownCommand,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },

		SuggestionsMinimumDistance: 2,
	}
	c.AddCommand(newSlurmCheckCmd())
	return c
}

// errCheckFailed ends a "slurm check" that found problems: the report
// said which, so nothing more is printed.
var errCheckFailed = errors.New("the check found problems")

func newSlurmCheckCmd() *cobra.Command {
	var runDir string
	var wait time.Duration
	var asJSON bool
	c := &cobra.Command{
		Use:   "check [WORKFLOW] [--run-dir DIR] [--wait DUR] [--json]",
		Short: "Check that Slurm can run a workflow's tasks from here",
		Long: `Check the Slurm cluster this machine reaches as a run with executor slurm
would use it, and say what is wrong, with a fix for each problem:

  programs     sbatch, squeue, scontrol, scancel and sinfo are in PATH, and
               scontrol ping says the controller is up
  partition    each partition the workflow's Slurm tasks name (or the
               default one) exists and is up, and what its nodes offer
               (CPUs, memory, GPUs with their types, time limit); what a
               task asks that no node of it has (GPUs, a GPU type, CPUs,
               memory, a feature, time) is a problem
  probe        one tiny job per set of the tasks' settings (partition,
               account, qos, constraint, extra_args; 1 CPU, --time=1),
               submitted as a task's attempts are: it runs gpusched's
               helper on a node, which reads a file written in the run
               directory and writes one back: the run directory must be
               on a file system the nodes share, at the same path, and so
               must gpusched. A job still pending after --wait (default
               2m) is cancelled, with Slurm's reason
  accounting   whether sacct answers (gpusched does not need it)

The run directory is --run-dir, else the workflow's default one, else the
current folder; the probe's files go in a folder of their own there and
are removed, with any folder the check made. Without WORKFLOW the default
partition is checked, with no settings. The tasks checked are those with
executor slurm; when none has it, all of them, as "gpusched run
--executor slurm" would run them.

--json prints {"ok", "problems", "run_dir", "findings": [{"step", "level"
(ok, note, problem), "message", "fix"}], "partitions", "probes"}.

Exit code 0 when nothing is wrong, 1 when something is (or the check was
interrupted), 2 for a workflow that cannot be read or a bad flag.`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			if wait <= 0 {
				return inputf("--wait: %v is not a positive duration (e.g. 2m)", wait)
			}
			wf := firstArg(args)
			cfg := slurm.CheckConfig{Wait: wait}
			var intro []slurm.Finding
			if wf != "" {
				w, err := loadWorkflow(wf)
				if err != nil {
					return err
				}
				cfg.Tasks, intro = checkTasks(w)
			}
			dir, err := checkRunDir(runDir, wf)
			if err != nil {
				return err
			}
			cfg.RunDir = dir
			ctx, stop := signal.NotifyContext(c.Context(), stopSignals...)
			defer stop()
			rep := slurm.Check(ctx, cfg)
			rep.Findings = append(intro, rep.Findings...)
			if asJSON {
				err = writeCheckJSON(c.OutOrStdout(), rep)
			} else {
				err = writeCheck(c.OutOrStdout(), wf, len(cfg.Tasks), rep)
			}
			switch {
			case err != nil:
				return fmt.Errorf("write the report: %w", err)
			case ctx.Err() != nil:
				return &interruptedError{}
			case rep.Problems() > 0:
				return errCheckFailed
			}
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "the run directory the probe job writes into (default: the workflow's, else the current folder)")
	c.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long the probe job may take, queued and running")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

// checkRunDir is the run directory a check probes: --run-dir, else the
// workflow's default one, else the current folder; absolute.
func checkRunDir(flag, workflowPath string) (string, error) {
	if flag == "" && workflowPath == "" {
		flag = "."
	}
	return runDirFor(flag, workflowPath)
}

// checkTasks are what the tasks of w that run on Slurm ask of it (all of
// them, with a note, when none does).
func checkTasks(w *workflow.Workflow) ([]slurm.CheckTask, []slurm.Finding) {
	var intro []slurm.Finding
	specs := make([]gpusched.TaskSpec, 0, len(w.Tasks))
	for _, sp := range w.Tasks {
		if sp.Executor == slurm.Name {
			specs = append(specs, sp)
		}
	}
	if len(specs) == 0 && len(w.Tasks) > 0 {
		specs = w.Tasks
		intro = append(intro, slurm.Finding{Step: "workflow", Level: slurm.LevelNote,
			Message: "no task has executor slurm: all are checked, as gpusched run --executor slurm would run them"})
	}
	grace := max(cmp.Or(w.Scheduling.KillGrace, gpusched.DefaultKillGrace), 0)
	tasks := make([]slurm.CheckTask, 0, len(specs))
	for _, sp := range specs {
		t := slurm.CheckTask{ID: sp.ID, Slurm: sp.Slurm, Dir: sp.Dir, CPUs: sp.Resources.CPUs, MemoryMiBHost: sp.Resources.MemoryMiBHost}
		if sp.Resources.MemoryHostAuto {
			t.MemoryMiBHost = sp.Resources.MemoryHostMaxMiB // its first budget, and the most a learned one is
		}
		if sp.Resources.GPU() {
			t.GPUs = max(sp.Resources.GPUs, 1)
			t.GPUType, t.LaterGPUTypes = gpuTypesOf(sp)
		}
		timeout := sp.Timeout
		if timeout == 0 {
			timeout = w.Scheduling.DefaultTimeout
		}
		if timeout > 0 {
			t.Time = timeout + grace
		}
		tasks = append(tasks, t)
	}
	return tasks, intro
}

// gpuTypesOf are the GPU types (slurm.gpu_types) a GPU task asks for now,
// as the executor picks it for its budget ("" for any type: no types, or
// no budget), and may ask for later, after running out of memory: the
// larger ones, smallest first.
func gpuTypesOf(sp gpusched.TaskSpec) (now string, later []string) {
	mib := sp.Resources.MemoryMiB
	if mib <= 0 {
		return "", nil
	}
	now, nowMiB, _ := sp.Slurm.GPUType(mib)
	if now == "" {
		return "", nil
	}
	for _, n := range slices.SortedFunc(maps.Keys(sp.Slurm.GPUTypes), func(a, b string) int {
		return cmp.Or(cmp.Compare(sp.Slurm.GPUTypes[a], sp.Slurm.GPUTypes[b]), strings.Compare(a, b))
	}) {
		if sp.Slurm.GPUTypes[n] > nowMiB {
			later = append(later, n)
		}
	}
	return now, later
}
