package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/hugeheap"
	"github.com/gpusched/gpusched/internal/workflow"
)

func newPlanCmd() *cobra.Command {
	var runDir string
	var asJSON bool
	var executor string
	var rerun rerunFlags
	c := &cobra.Command{
		Use:   "plan WORKFLOW [--run-dir DIR] [--executor NAME] [--force TASK | --only TASK | --from TASK] [--keep-edited] [--json]",
		Short: "Show what running a workflow again would run, and why",
		Long: `Show, task by task, what "gpusched run" would do on the run directory:
keep a task that completed earlier, or run it, and why:

  never ran                      no earlier run has it
  failed before                  (or blocked, cancelled, pending before)
  definition changed: args, env  the task's definition is not the one it completed with
  input changed: params.json     a file it reads changed since it ran
  input added: data/c.csv        (or removed) its inputs name other files now
  artifact missing: out/x.bin    a file it produced is gone
  artifact changed: out/x.bin (size 10 -> 12)
  upstream prepare reruns        something it depends on runs again
  forced                         --force, --only or --from names it
  complete, kept                 nothing to do
  not selected                   (skip) --only or --from leaves it out

A completed task whose artifacts were changed since it completed (edited
by hand) and that would run again is said after the table: running it
overwrites them, unless --keep-edited keeps it (its action is then keep).

A task that runs on the failure of another (dependencies: [{id: prepare,
on: failure}]) says "(only if prepare fails)" when that one runs, and is
skipped when that one is kept complete:

  not needed: prepare completes, and it runs on its failure

Nothing runs and nothing is written; the run directory is not locked, so
this works while a run is going. Same as "gpusched run --dry-run".

--executor NAME judges the tasks as "gpusched run --executor NAME" would
run them. A task's executor is not part of its definition: moving it to
another executor does not make it run again.

` + rerunHelp,
		Args: exactArgs(1, "one workflow file"),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := executorOptions(c, executor)
			if err != nil {
				return err
			}
			collectLess() // plan exits once it has printed
			return buffered(c.OutOrStdout(), func(w io.Writer) error {
				return runPlan(w, args[0], runDir, asJSON, opts, rerun)
			})
		},
	}
	addExecutorFlag(c, &executor)
	addRerunFlags(c, &rerun)
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory (default .gpusched/<workflow name> beside the workflow)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	return c
}

func runPlan(w io.Writer, workflowPath, runDir string, asJSON bool, opts workflow.Options, rerun rerunFlags) error {
	// The run directory is read while the workflow is parsed, on two
	// cores: each takes about a third of a plan of 100,000 tasks. Their
	// errors come in the order they would one after the other: the
	// workflow's, the run directory's name, --force and the like, the
	// tasks', then the run directory's contents.
	dir, dirErr := runDirFor(runDir, workflowPath)
	var planner *gpusched.Planner
	if dirErr == nil {
		prepareHeap(hugeheap.FileSize(workflowPath), dir) // before either starts reading
		planner = gpusched.NewPlanner(dir)
		defer planner.Wait() // nothing reads the run directory once plan returns
	}
	opts.KeepChecked = true // checked as it is parsed, not again by the plan
	wf, err := loadWorkflowWith(workflowPath, opts)
	if err != nil {
		return err
	}
	if dirErr != nil {
		return dirErr
	}
	sub, err := rerun.options(wf.Tasks)
	if err != nil {
		return err
	}
	var items []gpusched.PlanItem
	if checked := wf.Checked(); checked != nil {
		items, err = planner.PlanChecked(checked, sub)
	} else {
		items, err = planner.Plan(wf.Tasks, sub)
	}
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
	cells := make([]string, 3*len(items)) // the rows' cells, in one allocation
	rows := make([][]string, len(items)+1)
	rows[0] = []string{"TASK", "ACTION", "WHY"}
	for i, it := range items {
		action := "keep"
		switch {
		case it.Skipped || it.NotNeeded:
			action = "skip"
		case it.Adopt:
			action = "adopt"
			adopts++
		case it.Run:
			action = "run"
			runs++
		}
		row := cells[3*i : 3*i+3 : 3*i+3]
		row[0], row[1], row[2] = it.ID, action, it.Why
		rows[i+1] = row
	}
	writeAligned(w, rows) // as a tab writer with a gap of 2
	writeBudgets(w, items)
	fmt.Fprintf(w, "\n%d of %d tasks would run", runs, len(items))
	if adopts > 0 {
		fmt.Fprintf(w, ", %d still running would be adopted", adopts)
	}
	fmt.Fprintf(w, " (run directory %s)\n", dir)
	for _, it := range items {
		if len(it.Edited) > 0 {
			e := gpusched.EditedTask{ID: it.ID, Artifacts: it.Edited, Kept: !it.Run}
			if it.Run {
				e.Why = it.Why // a kept one says in the table why it would run
			}
			fmt.Fprintln(w, editedLine(e, sub.KeepEdited))
		}
	}
	return nil
}

// writeBudgets says, after the plan's table, the GPU and host memory
// budgets each task that learns them from history would ask for, and
// why.
func writeBudgets(w io.Writer, items []gpusched.PlanItem) {
	first := true
	for _, it := range items {
		for _, src := range []string{it.MemorySource, it.MemoryHostSource} {
			if src == "" {
				continue
			}
			if first {
				fmt.Fprintln(w)
				first = false
			}
			fmt.Fprintf(w, "%s: %s\n", it.ID, src)
		}
	}
}
