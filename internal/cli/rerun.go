package cli

import (
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/elide"
)

// rerunFlags are the flags of run and plan that choose what runs again:
// --force, --only, --from and --keep-edited (gpusched.SubmitOptions).
type rerunFlags struct {
	force, only, from []string // as given: ids and globs over ids
	keepEdited        bool
}

const rerunHelp = `Choosing what runs again:

  --force TASK      run TASK again even if it completed and is intact, and
                    everything downstream of it ("upstream TASK reruns");
                    the other tasks as usual
  --only TASK       run only TASK (again, whatever its state); the tasks it
                    depends on must be complete and intact, or nothing runs
                    and the command says which are not (exit 2)
  --from TASK       run TASK and everything downstream of it, and nothing
                    else; what they depend on must be complete and intact
  --keep-edited     keep as they are the completed tasks whose artifacts
                    were changed since they completed (by hand): without
                    it, such a task that runs again overwrites them, which
                    is said before anything runs

TASK is a task id or a glob over ids ("train-*", path.Match syntax); each
flag may be given several times or with a comma-separated list. An id or
glob that names no task is an error (exit 2). --force cannot be combined
with --only or --from, which already run every task they name. A task
named by --force, --only or --from runs even with --keep-edited.`

// addRerunFlags gives c the flags of f.
func addRerunFlags(c *cobra.Command, f *rerunFlags) {
	c.Flags().StringSliceVar(&f.force, "force", nil, "run `TASK` (an id or a glob) again, and what depends on it, even if complete")
	c.Flags().StringSliceVar(&f.only, "only", nil, "run only `TASK` (an id or a glob); what it depends on must be complete and intact")
	c.Flags().StringSliceVar(&f.from, "from", nil, "run `TASK` (an id or a glob) and everything downstream of it, nothing else")
	c.Flags().BoolVar(&f.keepEdited, "keep-edited", false, "keep complete the tasks whose artifacts were edited since they completed")
}

// options resolves the flags' ids and globs against tasks. An id or glob
// that names no task, a glob that does not parse, and --force with --only
// or --from are invalid input; each message names the flag.
func (f rerunFlags) options(tasks []gpusched.TaskSpec) (gpusched.SubmitOptions, error) {
	opts := gpusched.SubmitOptions{KeepEdited: f.keepEdited}
	if len(f.force) > 0 && len(f.only)+len(f.from) > 0 {
		return opts, inputf("--force cannot be combined with --only or --from: they run every task they name already")
	}
	var err error
	if opts.Force, err = matchIDs("--force", f.force, tasks); err != nil {
		return opts, err
	}
	if opts.Only, err = matchIDs("--only", f.only, tasks); err != nil {
		return opts, err
	}
	if opts.From, err = matchIDs("--from", f.from, tasks); err != nil {
		return opts, err
	}
	return opts, nil
}

// matchIDs returns the ids of tasks that patterns (ids, or globs over
// ids) name, in the tasks' order, each once. Every pattern must name at
// least one task: those that name none are said together.
func matchIDs(flag string, patterns []string, tasks []gpusched.TaskSpec) ([]string, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	picked := make([]bool, len(tasks))
	var unknown []string
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, inputf("%s: an empty task id", flag)
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, inputf("%s: %s is not a valid glob: use * (any characters), ? (one) and [a-z] (one of a set)", flag, elide.Quote(p))
		}
		found := false
		for i, t := range tasks {
			if ok, _ := path.Match(p, t.ID); ok || t.ID == p {
				picked[i], found = true, true
			}
		}
		if !found {
			unknown = append(unknown, elide.Quote(p))
		}
	}
	switch len(unknown) {
	case 0:
	case 1:
		return nil, inputf("%s: no task of the workflow matches %s", flag, unknown[0])
	default:
		return nil, inputf("%s: no task of the workflow matches %s", flag, strings.Join(unknown, ", "))
	}
	var ids []string
	for i, t := range tasks {
		if picked[i] {
			ids = append(ids, t.ID)
		}
	}
	return ids, nil
}

// sayEdited tells, before anything runs, of each task whose artifacts
// were changed since it completed: that running it overwrites them (and
// how to keep them), or that --keep-edited keeps it.
// keepEdited is whether --keep-edited was given: a task it did not keep
// was named to run.
func sayEdited(w io.Writer, edited []gpusched.EditedTask, keepEdited bool) {
	for _, e := range edited {
		fmt.Fprintln(w, "gpusched: "+editedLine(e, keepEdited))
	}
}

// editedLine is what sayEdited says of e, on one line.
func editedLine(e gpusched.EditedTask, keepEdited bool) string {
	files := strings.Join(e.Artifacts, ", ")
	was := "was"
	if len(e.Artifacts) > 1 {
		was = "were"
	}
	id := elide.Quote(e.ID)
	switch {
	case e.Kept && e.Why == "":
		return fmt.Sprintf("%s %s changed after task %s completed; --keep-edited keeps %s as it is", files, was, id, id)
	case e.Kept:
		return fmt.Sprintf("%s %s changed after task %s completed; --keep-edited keeps %s as it is (it would run again: %s)",
			files, was, id, id, e.Why)
	}
	if keepEdited {
		return fmt.Sprintf("warning: %s %s changed after task %s completed, and %s runs again, named by --force, --only or --from (%s): the change will be overwritten",
			files, was, id, id, e.Why)
	}
	return fmt.Sprintf("warning: %s %s changed after task %s completed, and %s runs again (%s): the change will be overwritten; give --keep-edited to keep %s as it is",
		files, was, id, id, e.Why, id)
}
