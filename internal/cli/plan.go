package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

func newPlanCmd() *cobra.Command {
	var runDir string
	var asJSON bool
	var executor string
	c := &cobra.Command{
		Use:   "plan WORKFLOW [--run-dir DIR] [--executor NAME] [--json]",
		Short: "Show what running a workflow again would run, and why",
		Long: `Show, task by task, what "gpusched run" would do on the run directory:
keep a task that completed earlier, or run it, and why:

  never ran                      no earlier run has it
  failed before                  (or blocked, cancelled, pending before)
  definition changed: args, env  the task's definition is not the one it completed with
  artifact missing: out/x.bin    a file it produced is gone
  artifact changed: out/x.bin (size 10 -> 12)
  upstream prepare reruns        something it depends on runs again
  complete, kept                 nothing to do

A task that runs on the failure of another (dependencies: [{id: prepare,
on: failure}]) says "(only if prepare fails)" when that one runs, and is
skipped when that one is kept complete:

  not needed: prepare completes, and it runs on its failure

Nothing runs and nothing is written; the run directory is not locked, so
this works while a run is going. Same as "gpusched run --dry-run".

--executor NAME judges the tasks as "gpusched run --executor NAME" would
run them. A task's executor is not part of its definition: moving it to
another executor does not make it run again.`,
		Args: exactArgs(1, "one workflow file"),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := executorOptions(c, executor)
			if err != nil {
				return err
			}
			return runPlan(c.OutOrStdout(), args[0], runDir, asJSON, opts)
		},
	}
	addExecutorFlag(c, &executor)
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory (default .gpusched/<workflow name> beside the workflow)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	return c
}

func runPlan(w io.Writer, workflowPath, runDir string, asJSON bool, opts workflow.Options) error {
	wf, err := loadWorkflowWith(workflowPath, opts)
	if err != nil {
		return err
	}
	dir, err := runDirFor(runDir, workflowPath)
	if err != nil {
		return err
	}
	items, err := gpusched.Plan(dir, wf.Tasks)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		out := struct {
			RunDir string              `json:"run_dir"`
			Tasks  []gpusched.PlanItem `json:"tasks"`
		}{dir, items}
		if err := enc.Encode(out); err != nil {
			return err
		}
		return nil
	}
	runs, adopts := 0, 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tACTION\tWHY")
	for _, it := range items {
		action := "keep"
		switch {
		case it.NotNeeded:
			action = "skip"
		case it.Adopt:
			action = "adopt"
			adopts++
		case it.Run:
			action = "run"
			runs++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", it.ID, action, it.Why)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d of %d tasks would run", runs, len(items))
	if adopts > 0 {
		fmt.Fprintf(w, ", %d still running would be adopted", adopts)
	}
	fmt.Fprintf(w, " (run directory %s)\n", dir)
	return nil
}
