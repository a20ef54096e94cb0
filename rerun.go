package gpusched

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpusched/gpusched/internal/artifact"
	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// SubmitOptions change how a submission treats the tasks that ran in
// earlier runs on the run directory (SubmitWith, PlanWith). The zero
// value changes nothing. Ids are exact (a command line expands its globs
// first); an id that names no task of the batch is an ErrUnknownTask
// error.
type SubmitOptions struct {
	// Force names tasks that run again even if they completed and are
	// intact (their reason: "forced"); what depends on them runs again
	// too ("upstream train reruns").
	Force []string
	// Only, when not empty, submits only the tasks it names and those they
	// depend on, directly or not. Each named task runs (again); each task
	// it depends on must be complete and intact, to be kept as it is, or
	// the batch is refused with an ErrStaleDependency error naming them.
	// The other tasks of the batch are not submitted: the run directory
	// keeps them as they are.
	Only []string
	// From names tasks that run again with everything downstream of them
	// (every task that depends on them, directly or not), and nothing
	// else: it is Only, naming them and their successors.
	From []string
	// KeepEdited keeps complete a task that completed in an earlier run
	// and whose artifacts were changed since (edited by hand: running it
	// would overwrite them), whatever else would run it again (changed
	// inputs or definition, a task upstream that runs again). A task that
	// Force, Only or From names runs all the same: naming it is asking for
	// it. What is saved of a kept task stays as it was, so the next run
	// finds its artifacts edited again.
	KeepEdited bool
	// RunNext says that Run is called as soon as SubmitWith returns: a
	// big batch (a resumed run's) may then start its first task before
	// SubmitWith returns, the one Run would start first, so that it
	// starts sooner. Without it, nothing starts before Run.
	RunNext bool
}

// EditedTask is a task that completed in an earlier run and whose
// artifacts were changed since: running it again would overwrite them.
type EditedTask struct {
	ID string `json:"id"`
	// Artifacts are the edited ones, as the task lists them.
	Artifacts []string `json:"artifacts"`
	// Kept is true when the task is kept complete, its artifacts as they
	// are (SubmitOptions.KeepEdited); false when it runs again.
	Kept bool `json:"kept"`
	// Why is what makes it run again (or would, when it is kept), as
	// PlanItem.Why says it: "artifact changed: out/model.pt (size 10 ->
	// 12)", "input changed: params.json", "forced"...
	Why string `json:"why"`
}

// selection is what SubmitOptions make of a batch of tasks. Its slices
// are nil when the options name no task: a big batch pays nothing then.
type selection struct {
	submit []bool // in the batch: submitted (every task, without Only and From)
	force  []bool // runs whatever its earlier run says
	picked []bool // named by Only or From (or a successor of a From task)
	some   bool   // Only or From was given: not every task is submitted
}

// forced reports whether task i runs whatever its earlier run says.
func (sel selection) forced(i int) bool { return sel.force != nil && sel.force[i] }

// selectIn applies o to specs.
func (o SubmitOptions) selectIn(specs []*task.Spec) (selection, error) {
	if len(o.Force)+len(o.Only)+len(o.From) == 0 {
		return selection{}, nil
	}
	n := len(specs)
	sel := selection{submit: make([]bool, n), force: make([]bool, n), picked: make([]bool, n)}
	index := make(map[string]int, n)
	for i, sp := range specs {
		index[sp.ID] = i
	}
	lookup := func(field string, ids []string) ([]int, error) {
		out := make([]int, 0, len(ids))
		for _, id := range ids {
			i, ok := index[id]
			if !ok {
				return nil, &TaskError{TaskID: id, Field: field, Reason: "no task of the batch has this id", Kind: ErrUnknownTask}
			}
			out = append(out, i)
		}
		return out, nil
	}
	force, err := lookup("force", o.Force)
	if err != nil {
		return sel, err
	}
	only, err := lookup("only", o.Only)
	if err != nil {
		return sel, err
	}
	from, err := lookup("from", o.From)
	if err != nil {
		return sel, err
	}
	for _, i := range force {
		sel.force[i] = true
	}
	sel.some = len(only)+len(from) > 0
	if !sel.some {
		for i := range sel.submit {
			sel.submit[i] = true
		}
		return sel, nil
	}
	for _, i := range only {
		sel.picked[i] = true
	}
	if len(from) > 0 {
		// Successors: a task is picked when one of its dependencies is,
		// in dependency order.
		for _, i := range from {
			sel.picked[i] = true
		}
		done := make([]bool, n)
		var visit func(i int) bool
		visit = func(i int) bool {
			if !done[i] {
				done[i] = true
				for _, d := range specs[i].Dependencies {
					if j, ok := index[d]; ok && visit(j) {
						sel.picked[i] = true
					}
				}
			}
			return sel.picked[i]
		}
		for i := range specs {
			visit(i)
		}
	}
	// Submitted: what is picked, and what it depends on.
	var need func(i int)
	need = func(i int) {
		if sel.submit[i] {
			return
		}
		sel.submit[i] = true
		for _, d := range specs[i].Dependencies {
			if j, ok := index[d]; ok {
				need(j)
			}
		}
	}
	for i := range specs {
		if sel.picked[i] {
			sel.force[i] = true
			need(i)
		}
	}
	return sel, nil
}

// staleDependencies returns an ErrStaleDependency error naming the tasks
// submitted only as dependencies of picked ones (sel.some) that would
// run again, each with why (runs[i], whys[i]); nil if there are none.
func staleDependencies(specs []*task.Spec, sel selection, runs []bool, whys []string) error {
	var stale []string
	first := ""
	for i, sp := range specs {
		if !sel.submit[i] || sel.picked[i] || !runs[i] {
			continue
		}
		stale = append(stale, fmt.Sprintf("%s (%s)", elide.Quote(sp.ID), whys[i]))
		if first == "" {
			first = sp.ID
		}
	}
	if len(stale) == 0 {
		return nil
	}
	// Named after a picked task that depends on the first of them.
	who := first
	for i, sp := range specs {
		if sel.picked[i] && dependsOn(specs, sp, first) {
			who = specs[i].ID
			break
		}
	}
	what, fix := "a task it depends on would run again: ", "; select it too, or run it first"
	if len(stale) > 1 {
		what, fix = "tasks it depends on would run again: ", "; select them too, or run them first"
	}
	return &TaskError{TaskID: who, Field: "dependencies", Kind: ErrStaleDependency,
		Reason: what + strings.Join(stale, ", ") + fix}
}

// dependsOn reports whether sp depends on task id, directly or not,
// among specs.
func dependsOn(specs []*task.Spec, sp *task.Spec, id string) bool {
	byID := make(map[string]*task.Spec, len(specs))
	for _, s := range specs {
		byID[s.ID] = s
	}
	seen := map[string]bool{}
	var walk func(s *task.Spec) bool
	walk = func(s *task.Spec) bool {
		for _, d := range s.Dependencies {
			if d == id {
				return true
			}
			if ds := byID[d]; ds != nil && !seen[d] {
				seen[d] = true
				if walk(ds) {
					return true
				}
			}
		}
		return false
	}
	return walk(sp)
}

// verdict is what a task's earlier run says about running it again.
type verdict struct {
	engine.Resume
	// edited are the artifacts changed since it completed (a complete
	// task only): running it again overwrites them.
	edited []string
}

// resumeVerdict says whether task sp, completed in an earlier run as row
// r, is still valid: the same definition, its inputs as they were when it
// ran, and its artifacts as they were when it completed. It also finds
// the artifacts edited since, which running it again would overwrite,
// whatever makes it run. It reads the inputs and artifacts (and hashes
// them when the task asks), so it runs in the caller's goroutine, not the
// scheduler's loop. It fails only when ctx is done before the verdict is
// known.
func resumeVerdict(ctx context.Context, sp *task.Spec, fingerprint string, r *store.Row) (verdict, error) {
	if r.State != task.Complete {
		return verdict{}, nil
	}
	why := ""
	sameDir := true
	if r.Fingerprint != "" && r.Fingerprint != fingerprint {
		why = "definition changed"
		var old task.Spec
		if err := json.Unmarshal(r.Spec, &old); err == nil {
			old.Normalize()
			if changed := sp.Changed(&old); len(changed) > 0 {
				why += ": " + strings.Join(changed, ", ")
			}
			sameDir = old.Dir == sp.Dir
		} else {
			sameDir = false // where its artifacts were is not known
		}
	}
	// Inputs are compared while the task has some: a task that no longer
	// lists any has nothing to compare (and its old record stays unused).
	if why == "" && len(sp.Inputs) > 0 {
		now, err := artifact.Inputs(ctx, sp, r.Inputs)
		switch {
		case err != nil && ctx.Err() != nil:
			return verdict{}, fmt.Errorf("task %q: %w", sp.ID, err)
		case err != nil:
			why = err.Error() // "input data/p: not a regular file (a named pipe)"
		default:
			why = artifact.InputsChanged(r.Inputs, now, sp.HashInputs)
		}
	}
	var v verdict
	if sameDir {
		arts, edited, err := artifact.Check(ctx, sp, r.Artifacts)
		if err != nil {
			return verdict{}, fmt.Errorf("task %q: %w", sp.ID, err)
		}
		if why == "" {
			why = arts
		}
		v.edited = edited
	}
	v.Why, v.Intact = why, why == ""
	return v, nil
}

// keep returns the submitted tasks of specs (and their blobs), and the
// selection of them, in the same order.
func (sel selection) keep(specs []*task.Spec, blobs [][]byte) ([]*task.Spec, [][]byte, selection) {
	var out selection
	out.some = sel.some
	var ks []*task.Spec
	var kb [][]byte
	for i := range specs {
		if !sel.submit[i] {
			continue
		}
		ks, kb = append(ks, specs[i]), append(kb, blobs[i])
		out.submit = append(out.submit, true)
		out.force = append(out.force, sel.force[i])
		out.picked = append(out.picked, sel.picked[i])
	}
	return ks, kb, out
}

// judged is a task's verdict once a submission's options are applied.
type judged struct {
	verdict
	// runs: the task runs on its own account (not only because a task
	// upstream does); Why says why.
	runs bool
	// editedWhy is what would run it again, for a task with edited
	// artifacts (kept or not).
	editedWhy string
}

// judge applies a submission's options to v, the verdict on a task whose
// earlier run left it in state: force (Force, Only, From) makes it run,
// keepEdited keeps it (Resume.Pinned) when its artifacts were edited and
// it is not forced.
func judge(v verdict, state task.State, force, keepEdited bool) judged {
	j := judged{verdict: v}
	if state != task.Complete {
		j.runs, j.Why = true, state.String()+" before"
		return j
	}
	j.editedWhy = v.Why
	switch {
	case force:
		j.runs, j.Intact = true, false
		if v.Intact {
			j.Why = "forced"
			j.editedWhy = "forced"
		}
	case len(v.edited) > 0 && keepEdited:
		j.Resume = engine.Resume{Intact: true, Pinned: true}
	default:
		j.runs = !v.Intact
	}
	return j
}
