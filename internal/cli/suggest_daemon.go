package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/budget"
	"github.com/gpusched/gpusched/internal/workflow"
)

// "gpusched suggest" through a daemon: the daemon's history, as GET
// /v1/budgets gives it, in place of a run directory's (see suggest.go).

func suggestThroughDaemon(c *cobra.Command, workflowPath string, rt runRoute, asJSON bool) error {
	var tasks []gpusched.TaskSpec
	var dir string
	if workflowPath != "" {
		// Read first: an invalid workflow exits 2 without dialing.
		wf, err := loadWorkflowWith(workflowPath, workflow.Options{DeclaredElsewhere: true})
		if err != nil {
			return err
		}
		if dir, err = workflowFolder(workflowPath); err != nil {
			return err
		}
		tasks = wf.Tasks
	}
	ctx := c.Context()
	cl := rt.cl
	if cl == nil {
		var err error
		if cl, err = dialDaemon(ctx, rt.socket); err != nil {
			return err
		}
	}
	defer cl.Close()
	rows, err := cl.Budgets(ctx)
	if err != nil {
		return daemonError(err)
	}
	var out []suggestion
	if workflowPath != "" {
		out = suggestForDaemon(tasks, dir, os.Getuid(), rows)
	} else {
		for _, b := range rows {
			out = append(out, daemonSuggestion(b.Task, b))
		}
	}
	if asJSON {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		if out == nil {
			out = []suggestion{}
		}
		return enc.Encode(struct {
			Daemon string       `json:"daemon"`
			Tasks  []suggestion `json:"tasks"`
		}{cl.Socket(), out})
	}
	writeSuggestionsFrom(c.OutOrStdout(), "the daemon at "+cl.Socket(), out)
	return nil
}

// daemonSuggestion is the suggestion row of a daemon's budget b, shown as
// task id.
func daemonSuggestion(id string, b client.Budget) suggestion {
	res := budget.GPUMemory
	if b.Resource == budget.HostMemory.String() {
		res = budget.HostMemory
	}
	return suggestion{ID: id, Resource: b.Resource, MemoryMiB: b.MemoryMiB, MemoryAuto: b.MemoryAuto, MemoryMaxMiB: b.MemoryMaxMiB,
		AskedMiB: b.AskedMiB, PeakMiB: b.PeakMiB, Attempts: b.Attempts, ProposedMiB: b.ProposedMiB, Flag: budget.Flag(b.Flag),
		Owner: b.Owner, Runs: b.Runs, exclusive: b.Exclusive, ran: b.Ran, res: res}
}

// suggestForDaemon advises the tasks of a workflow, in file order, as a
// run of it through the daemon would have them (their command, and dir
// under the workflow's folder dir), from the daemon's rows of user uid's
// tasks. Its settings are the workflow's, the figures the daemon's.
func suggestForDaemon(tasks []gpusched.TaskSpec, dir string, uid int, rows []client.Budget) []suggestion {
	var out []suggestion
	for i := range tasks {
		t := &tasks[i]
		argv, _ := t.Payload.([]string)
		tdir := t.Dir
		switch {
		case tdir == "":
			tdir = dir
		case !filepath.IsAbs(tdir):
			tdir = filepath.Join(dir, tdir)
		}
		for _, res := range budget.Resources {
			s := suggestion{ID: t.ID, Resource: res.String(), res: res}
			r := t.Resources
			switch {
			case res == budget.GPUMemory && r.GPU():
				s.MemoryAuto, s.MemoryMaxMiB, s.exclusive = r.MemoryAuto, r.MemoryMaxMiB, r.Exclusive
				if !r.MemoryAuto {
					s.MemoryMiB = r.MemoryMiB
				}
			case res == budget.HostMemory && (r.MemoryHostAuto || r.MemoryMiBHost > 0):
				s.MemoryAuto, s.MemoryMaxMiB = r.MemoryHostAuto, r.MemoryHostMaxMiB
				if !r.MemoryHostAuto {
					s.MemoryMiB = r.MemoryMiBHost
				}
			default:
				continue
			}
			for _, b := range rows {
				if b.UID == uid && b.Name == t.ID && b.Dir == tdir && b.Resource == s.Resource && slices.Equal(b.Command, argv) {
					s.AskedMiB, s.PeakMiB, s.Attempts, s.ProposedMiB, s.Flag = b.AskedMiB, b.PeakMiB, b.Attempts, b.ProposedMiB, budget.Flag(b.Flag)
					s.Owner, s.Runs, s.ran = b.Owner, b.Runs, b.Ran
					break
				}
			}
			out = append(out, s)
		}
	}
	return out
}
