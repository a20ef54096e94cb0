package gpusched

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpusched/gpusched/internal/budget"
	"github.com/gpusched/gpusched/internal/dag"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/hostres"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// PlanItem says what running a task again on a run directory would do.
type PlanItem struct {
	ID string `json:"id"`
	// Run is true when the task would run (again); false when its earlier
	// completion is kept.
	Run bool `json:"run"`
	// Why, for a person: "never ran", "failed before", "definition changed:
	// args", "artifact missing: out/model.pt", "artifact changed: out/x.bin
	// (size 10 -> 12)", "upstream prepare reruns", or "complete, kept";
	// followed by "(only if prepare fails)" for a task that runs on the
	// failure of a task that runs; or, for a task not needed, "not needed:
	// prepare completes, and it runs on its failure".
	Why string `json:"why"`
	// NotNeeded is true when the task would not run because a
	// dependency's condition cannot be met with no failure behind it (it
	// runs on the failure of a task that is kept complete): the run
	// blocks it as not needed (Record.NotNeeded). Run is false then.
	NotNeeded bool `json:"not_needed,omitempty"`
	// Adopt is true when the task's attempt, left running by a scheduler
	// that died, still runs under its supervisor: it would be adopted,
	// not started again (Why: "adopt (running since ...)").
	Adopt bool `json:"adopt,omitempty"`
	// Edited lists the task's artifacts changed since it completed (by
	// hand, or by anything but the task): running it overwrites them.
	// With SubmitOptions.KeepEdited the task is kept instead (Run false,
	// Why "complete, kept with its edited artifacts (it would run:
	// input changed: params.json)").
	Edited []string `json:"edited,omitempty"`
	// Skipped is true for a task SubmitOptions.Only or From leaves out:
	// it is not submitted, and the run directory keeps it as it is (Why:
	// "not selected").
	Skipped bool `json:"skipped,omitempty"`
	// MemoryMiB, for a task whose GPU memory budget is learned from
	// history (MemoryAuto), is the budget it would ask for, and
	// MemorySource says how it was chosen: "memory_mib auto: 6400 MiB
	// (peak 5800 MiB in 3 attempts + margin)". A kept task has neither.
	MemoryMiB    int64  `json:"memory_mib,omitempty"`
	MemorySource string `json:"memory_mib_source,omitempty"`
	// MemoryMiBHost and MemoryHostSource are the same for a host memory
	// budget learned from history (MemoryHostAuto), capped by the
	// machine's memory as Scheduling's defaults read it.
	MemoryMiBHost    int64  `json:"memory_mib_host,omitempty"`
	MemoryHostSource string `json:"memory_mib_host_source,omitempty"`
}

// Plan says, task by task and in the given order, what running tasks on
// runDir would run and why, without running anything or taking the run
// directory's lock: the same checks and the same rules as Run. A run
// directory that does not exist yet means everything runs. Plan cannot
// know how tasks that run will end: a task it says runs may be blocked,
// by a failure, or as not needed when it runs on the failure of a task
// that then completes (its Why says so).
func Plan(runDir string, tasks []TaskSpec) ([]PlanItem, error) {
	return PlanWith(runDir, tasks, SubmitOptions{})
}

// PlanWith is Plan for a submission with opts (SubmitWith): the same
// checks, the same errors, and the same rules.
func PlanWith(runDir string, tasks []TaskSpec, opts SubmitOptions) ([]PlanItem, error) {
	return NewPlanner(runDir).Plan(tasks, opts)
}

// A Planner is PlanWith in two steps, for a caller that knows the run
// directory before it has the tasks: NewPlanner starts reading what a
// plan needs of the run directory, and the caller gets its tasks ready
// meanwhile (parses a workflow file, say) on another core; Plan then
// checks the tasks and judges them against what was read. Its methods
// may be called from several goroutines.
type Planner struct {
	runDir string
	done   chan struct{} // closed once read has set the fields below
	// Set by read, on its own goroutine, before done is closed; only
	// read after that.
	earlier  map[string]*store.Row
	capacity int64 // the largest card's, as the last run saw it
	fates    map[string]RunningFate
	err      error
}

// NewPlanner starts reading, on a goroutine of its own, what a plan
// needs of runDir: its tasks as the last run left them, its cards, and
// what became of the tasks it left running. Nothing is written and the
// run directory is not locked. A run directory that does not exist yet
// has nothing to read.
func NewPlanner(runDir string) *Planner {
	p := &Planner{runDir: runDir, done: make(chan struct{})}
	go p.read()
	return p
}

// Wait returns once the run directory has been read (or could not be):
// for a caller that gives up before Plan (its tasks did not load), so
// that nothing reads the run directory once it returns.
func (p *Planner) Wait() { <-p.done }

func (p *Planner) read() {
	defer close(p.done)
	p.earlier = map[string]*store.Row{}
	path := filepath.Join(p.runDir, StateFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return
	} else if err != nil {
		p.err = fmt.Errorf("open state db: %w", err)
		return
	}
	st, err := store.OpenSQLiteReadOnly(path, p.runDir)
	if err != nil {
		p.err = err
		return
	}
	rows, err := st.LoadJudged() // what a plan reads of them, not all
	if err == nil {
		var cards []gpu.CardView
		cards, _, err = st.LoadCards()
		p.capacity = largestCapacity(cards)
	}
	st.Close()
	if err != nil {
		p.err = err
		return
	}
	p.earlier = make(map[string]*store.Row, len(rows))
	var running []*store.Row
	for i := range rows {
		p.earlier[rows[i].ID] = &rows[i]
		if rows[i].State == task.Running { // runningFates looks at no other
			running = append(running, &rows[i])
		}
	}
	p.fates = runningFates(p.runDir, running) // one look at the supervisor for all of them
}

// Plan is PlanWith on the planner's run directory: the same checks, the
// same errors and the same rules. A problem with the tasks is reported
// before one with the run directory. It returns once the run directory
// has been read, even with an error.
func (p *Planner) Plan(tasks []TaskSpec, opts SubmitOptions) ([]PlanItem, error) {
	defer p.Wait()
	all, _, err := prepare(tasks, map[string]Handler{task.DefaultKind: CommandHandler{}}, false, false)
	if err != nil {
		return nil, err
	}
	if err := dag.CheckBatch(all, map[string]struct{}{}); err != nil {
		return nil, err
	}
	return p.plan(all, opts)
}

// CheckedTasks are tasks that passed every check of ValidateTasks, kept
// as the checks read them (CheckTasks), so that Planner.PlanChecked does
// not check them again. They are read-only.
type CheckedTasks struct {
	specs []*task.Spec
}

// PlanChecked is Plan of the tasks that CheckTasks accepted: the same
// items and the same errors, without checking the tasks again (ValidateTasks
// checks all that Plan does, and more).
func (p *Planner) PlanChecked(c *CheckedTasks, opts SubmitOptions) ([]PlanItem, error) {
	defer p.Wait()
	return p.plan(c.specs, opts)
}

// plan is Plan of all, the tasks checked and normalized; it only reads them.
func (p *Planner) plan(all []*task.Spec, opts SubmitOptions) ([]PlanItem, error) {
	sel, err := opts.selectIn(all)
	if err != nil {
		return nil, err
	}
	specs := all
	if sel.some {
		specs, _, sel = sel.keep(all, make([][]byte, len(all)))
	}
	p.Wait()
	if p.err != nil {
		return nil, p.err
	}
	earlier, capacity, fates := p.earlier, p.capacity, p.fates
	hostMiB := int64(-1) // the machine's host memory for tasks; not read yet

	items := make([]PlanItem, len(specs))
	index := make(map[string]int, len(specs))
	for i, sp := range specs {
		index[sp.ID] = i
	}
	own := make([]bool, len(specs))  // runs on its own account, not only for a task upstream
	runs := make([]bool, len(specs)) // runs, is adopted or still runs
	runsID := func(id string) bool { return runs[index[id]] }
	notNeeded := map[string]string{} // task not needed -> the kept task that makes it so
	// Decide in dependency order, report in the given order.
	var visit func(i int)
	var failed error
	done := make([]bool, len(specs))
	visit = func(i int) {
		if done[i] || failed != nil {
			return
		}
		done[i] = true
		sp := specs[i]
		for _, d := range sp.Dependencies {
			visit(index[d])
		}
		it := PlanItem{ID: sp.ID}
		pinned := false
		r, seen := earlier[sp.ID]
		switch {
		case !seen:
			it.Run, it.Why = true, "never ran"
		case r.State == task.Running:
			f := fates[r.ID]
			it.Run, it.Why = !f.Adopt && !(f.Ended && f.Result.Err == nil && f.Result.Signal == 0 && f.Result.ExitCode == 0), f.Note
			it.Adopt = f.Adopt
		case r.State != task.Complete:
			it.Run, it.Why = true, r.State.String()+" before"
		default:
			// Plan has no context to stop by yet: a long hash runs to its end.
			v, err := resumeVerdict(context.Background(), sp, sp.Fingerprint(), r)
			if err != nil {
				failed = err
				return
			}
			j := judge(v, r.State, sel.forced(i), opts.KeepEdited)
			it.Run, it.Edited = j.runs, j.edited
			if j.runs {
				it.Why = j.Why
			}
			if pinned = j.Pinned; pinned {
				it.Why = "complete, kept with its edited artifacts (it would run: " + j.editedWhy + ")"
			}
		}
		own[i] = it.Run || it.Adopt || seen && r.State == task.Running
		if !it.Run && !pinned {
			for _, d := range sp.Dependencies {
				if runsID(d) {
					it.Run, it.Why = true, fmt.Sprintf("upstream %s reruns", d)
					break
				}
			}
		}
		switch {
		case pinned:
		case !it.Run && !it.Adopt && (!seen || r.State != task.Running):
			it.Why = "complete, kept"
		}
		if it.Run && !it.Adopt {
			planConditions(sp, runsID, notNeeded, &it)
		}
		runs[i] = it.Run || it.Adopt || seen && r.State == task.Running
		if auto, _ := budget.GPUMemory.Requested(&sp.Resources); it.Run && auto {
			in := budgetInput(budget.GPUMemory, sp, r)
			in.LimitMiB = capacity
			mib, b := budget.Choose(in)
			it.MemoryMiB, it.MemorySource = mib, budget.Describe(budget.GPUMemory, mib, &b)
		}
		if auto, _ := budget.HostMemory.Requested(&sp.Resources); it.Run && auto {
			in := budgetInput(budget.HostMemory, sp, r)
			if !placedByBuiltin(sp.Executor) {
				if hostMiB < 0 {
					_, hostMiB = Scheduling{}.hostCapacity(hostres.Machine{})
				}
				in.LimitMiB = hostMiB
			}
			mib, b := budget.Choose(in)
			it.MemoryMiBHost, it.MemoryHostSource = mib, budget.Describe(budget.HostMemory, mib, &b)
		}
		items[i] = it
	}
	for i := range specs {
		visit(i)
	}

	if failed != nil {
		return nil, failed
	}
	if sel.some {
		whys := make([]string, len(items))
		for i := range items {
			whys[i] = items[i].Why
		}
		if err := staleDependencies(specs, sel, own, whys); err != nil {
			return nil, err
		}
		// Every task, in the given order: those left out say so.
		byID := make(map[string]PlanItem, len(items))
		for _, it := range items {
			byID[it.ID] = it
		}
		out := make([]PlanItem, len(all))
		for i, sp := range all {
			it, ok := byID[sp.ID]
			if !ok {
				it = PlanItem{ID: sp.ID, Why: "not selected", Skipped: true}
			}
			out[i] = it
		}
		items = out
	}
	return items, nil
}

// planConditions completes the plan item of task sp, which would run, with
// what its dependencies' conditions say, as the run judges them: a task
// that runs on the failure of a task kept complete, or after a task not
// needed (but with on: any), is not needed; one that runs on the failure
// of a task that runs runs only if that one fails. runs (whether a task
// it depends on runs) and notNeeded are what was planned for the tasks it
// depends on; a task not needed is added to notNeeded, with the kept task
// that makes it so.
func planConditions(sp *task.Spec, runs func(id string) bool, notNeeded map[string]string, it *PlanItem) {
	if sp.DependencyOn == nil && len(notNeeded) == 0 {
		return // the common case: nothing to say
	}
	var onlyIf []string
	for _, d := range sp.Dependencies {
		on := sp.On(d)
		root, skipped := notNeeded[d]
		switch {
		case on == task.AfterAny:
		case skipped:
			it.Run, it.NotNeeded = false, true
			it.Why = fmt.Sprintf("not needed: %s is not needed (%s completes)", d, root)
			notNeeded[sp.ID] = root
			return
		case !runs(d) && on == task.AfterFailure:
			it.Run, it.NotNeeded = false, true
			it.Why = fmt.Sprintf("not needed: %s completes, and it runs on its failure", d)
			notNeeded[sp.ID] = d
			return
		case on == task.AfterFailure:
			onlyIf = append(onlyIf, d)
		}
	}
	if len(onlyIf) > 0 {
		it.Why += fmt.Sprintf(" (only if %s fails)", strings.Join(onlyIf, " and "))
	}
}
