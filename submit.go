package gpusched

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/gpusched/gpusched/internal/dag"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/executor/slurm"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/task"
)

// Submit adds one task; see SubmitMany.
func (s *Scheduler) Submit(t TaskSpec) error { return s.SubmitMany([]TaskSpec{t}) }

// SubmitMany adds a batch of tasks, all or none. It rejects, with a
// *TaskError or *CycleError: an invalid field, an unknown kind or a payload
// its handler refuses, a duplicate id (within the batch or against tasks
// already submitted), a dependency on a task never submitted, and a cycle.
// Tasks may depend on tasks of earlier batches, even finished ones. It works
// before and during Run, from any goroutine.
//
// A task completed in an earlier run on the same run directory stays
// complete when submitted again, provided the tasks it depends on do too;
// anything else runs again, its attempt numbers continuing.
func (s *Scheduler) SubmitMany(tasks []TaskSpec) error {
	return s.SubmitManyContext(context.Background(), tasks)
}

// SubmitManyContext is SubmitMany, stopped when ctx is done: checking
// whether tasks completed in an earlier run are still valid reads (and may
// hash) their artifacts, which can take a while. When ctx is done first,
// nothing is submitted and the error wraps ctx's cause.
func (s *Scheduler) SubmitManyContext(ctx context.Context, tasks []TaskSpec) error {
	return s.submit(ctx, "", tasks)
}

// SubmitWith is SubmitManyContext with options that change how the
// tasks completed in earlier runs on the run directory are treated: some
// forced to run again, only some submitted, those whose artifacts were
// edited by hand kept (SubmitOptions). It returns, before anything runs,
// the tasks whose artifacts were changed since they completed: those not
// kept will overwrite them, which a caller should say.
func (s *Scheduler) SubmitWith(ctx context.Context, tasks []TaskSpec, opts SubmitOptions) ([]EditedTask, error) {
	return s.submitWith(ctx, "", false, tasks, opts)
}

// submit is SubmitManyContext with an idempotency key (SubmitKeyed).
func (s *Scheduler) submit(ctx context.Context, key string, tasks []TaskSpec) error {
	_, err := s.submitWith(ctx, key, false, tasks, SubmitOptions{})
	return err
}

// submitWith is submit, taking up retired tasks again when again is set
// (SubmitAgain), with opts (SubmitWith).
func (s *Scheduler) submitWith(ctx context.Context, key string, again bool, tasks []TaskSpec, opts SubmitOptions) ([]EditedTask, error) {
	specs, blobs, err := prepare(tasks, s.handlers, s.qualified, true)
	if err != nil {
		return nil, err
	}
	return s.submitPrepared(ctx, key, again, specs, blobs, opts)
}

// SubmitChecked is SubmitWith of the tasks CheckTasks accepted, without
// copying them once more, nor checking them again where this scheduler's
// checks of a task are those CheckTasks made (the built-in command
// handler for the default kind, ids not qualified): of 100,000 tasks, a
// good part of what comes before the judging of a resumed run. The
// tasks are the scheduler's from then on: c is emptied, and submitting
// or planning it again finds no tasks.
func (s *Scheduler) SubmitChecked(ctx context.Context, c *CheckedTasks, opts SubmitOptions) ([]EditedTask, error) {
	specs := c.specs
	c.specs = nil
	command := make([]bool, len(specs))
	_, same := s.handlers[task.DefaultKind].(CommandHandler)
	same = same && !s.qualified
	valid, invalid := len(specs), error(nil)
	for i, sp := range specs {
		// CheckTasks accepts only the default kind, whose handler is
		// CommandHandler there.
		if !same {
			if invalid = checkSpec(sp, s.handlers, s.qualified); invalid != nil {
				valid = i
				break
			}
		}
		_, command[i] = s.handlers[sp.Kind].(CommandHandler)
	}
	specs, blobs, err := encodeSpecs(specs, command, valid, invalid, true)
	if err != nil {
		return nil, err
	}
	return s.submitPrepared(ctx, "", false, specs, blobs, opts)
}

// submitPrepared is submitWith of the tasks prepare returned.
func (s *Scheduler) submitPrepared(ctx context.Context, key string, again bool, specs []*task.Spec, blobs [][]byte, opts SubmitOptions) ([]EditedTask, error) {
	sel, err := opts.selectIn(specs)
	if err != nil {
		return nil, err
	}
	if sel.some {
		specs, blobs, sel = sel.keep(specs, blobs)
	}
	if err := s.checkNvidiaSMI(specs); err != nil {
		return nil, err
	}
	if err := s.checkExecutors(specs); err != nil {
		return nil, err
	}
	h := &histories{f: s.history}
	if err := s.chooseBudgets(specs, blobs, h); err != nil {
		return nil, err
	}
	sub := engine.Submission{Specs: specs, JSON: blobs, Key: key, Again: again, RunNext: opts.RunNext,
		Fingerprint: make([]string, len(specs)), Resume: make([]engine.Resume, len(specs)), Estimate: s.estimates(specs, h)}
	var runs []bool // with Only or From: whether each task runs on its own account, and why
	var whys []string
	if sel.some {
		runs, whys = make([]bool, len(specs)), make([]string, len(specs))
	}
	// Each task is judged on its own (its earlier row, its files): the
	// tasks of commands, whose payloads are plain data, are judged across
	// the processors; what is rare (an error, edited artifacts) is
	// gathered under mu and put in task order after. Other kinds'
	// payloads may have encoders of their own (a fingerprint encodes the
	// payload): their tasks are judged in order, after.
	plain := func(i int) bool { _, ok := specs[i].Payload.([]string); return ok }
	var mu sync.Mutex
	var edits []editedAt
	failed, failure := len(specs), error(nil) // the first task, in order, whose judging failed
	found := func(i int, e EditedTask, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			edits = append(edits, editedAt{i, e})
		case i < failed:
			failed, failure = i, err
		}
	}
	parallel(len(specs), func(i int) {
		if plain(i) {
			sub.Fingerprint[i] = specs[i].Fingerprint()
			s.judgeOne(ctx, i, specs[i], sel, opts, &sub, runs, whys, found)
		}
	})
	for i, sp := range specs {
		if i > failed {
			break
		}
		if !plain(i) {
			sub.Fingerprint[i] = sp.Fingerprint()
			s.judgeOne(ctx, i, sp, sel, opts, &sub, runs, whys, found)
		}
	}
	if failure != nil {
		return nil, failure
	}
	slices.SortFunc(edits, func(a, b editedAt) int { return cmp.Compare(a.i, b.i) })
	var edited []EditedTask
	for _, e := range edits {
		edited = append(edited, e.task)
	}
	if runs != nil {
		if err := staleDependencies(specs, sel, runs, whys); err != nil {
			return nil, err
		}
	}
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	if err := s.engine.Submit(sub); err != nil {
		return nil, publicError(err)
	}
	return edited, nil
}

// editedAt is task i's EditedTask.
type editedAt struct {
	i    int
	task EditedTask
}

// judgeOne judges task i of a submission, sp, against its earlier run,
// if it had one, and sets what the submission keeps of the verdict:
// sub.Resume[i], its fingerprint cleared for a pinned task, and runs[i]
// and whys[i] when they are kept. found is called with i and the task's
// EditedTask when it has edited artifacts, or with the error that kept
// it from being judged. It is called for different tasks at the same
// time: it writes only their own entries.
func (s *Scheduler) judgeOne(ctx context.Context, i int, sp *task.Spec, sel selection, opts SubmitOptions,
	sub *engine.Submission, runs []bool, whys []string, found func(int, EditedTask, error)) {
	r, ok := s.engine.Earlier(sp.ID)
	if !ok {
		if runs != nil {
			runs[i], whys[i] = true, "never ran"
		}
		return
	}
	v, err := resumeVerdict(ctx, sp, sub.Fingerprint[i], r)
	if err != nil {
		found(i, EditedTask{}, err)
		return
	}
	j := judge(v, r.State, sel.forced(i), opts.KeepEdited)
	if len(j.edited) > 0 {
		found(i, EditedTask{ID: sp.ID, Artifacts: j.edited, Kept: j.Pinned, Why: j.editedWhy}, nil)
	}
	if j.Pinned {
		// Kept as it is: its saved definition too, so that the next
		// run still sees what changed.
		sub.Fingerprint[i] = ""
	}
	sub.Resume[i] = j.Resume
	if runs != nil {
		runs[i], whys[i] = j.runs, j.Why
	}
}

// parallelMin is the fewest calls parallel gives a goroutine of its own.
// A variable so that a test can see small batches spread.
var parallelMin = 1024

// checkNvidiaSMI checks that a batch with GPU tasks can be run here at all: a
// machine without nvidia-smi refuses GPU tasks at once. It never runs
// nvidia-smi, which may hang for its whole timeout: the engine reads the
// cards when the run starts, CPU tasks start meanwhile, and requests no
// card can hold fail when the cards are first seen (at submit, once they
// have been). A batch without GPU tasks, or whose GPU tasks all run where
// their executor places them (Slurm), never looks for nvidia-smi.
func (s *Scheduler) checkNvidiaSMI(specs []*task.Spec) error {
	i := slices.IndexFunc(specs, func(sp *task.Spec) bool { return sp.Resources.GPU() && !s.placesGPUs(sp) })
	if i < 0 || !s.smi {
		return nil
	}
	if _, err := nvidiasmi.Bin(); err != nil {
		return noSMI(specs[i].ID)
	}
	return nil
}

// ValidateTasks runs every check SubmitMany would on a fresh scheduler with
// the built-in handlers and executors (local), without a run directory:
// nothing is written and nothing runs. It returns the first problem found,
// as SubmitMany would.
func ValidateTasks(tasks []TaskSpec) error {
	_, err := CheckTasks(tasks)
	return err
}

// CheckTasks is ValidateTasks keeping the tasks as it checked them, for
// Planner.PlanChecked: nil with the problem it finds.
func CheckTasks(tasks []TaskSpec) (*CheckedTasks, error) {
	specs, _, err := prepare(tasks, map[string]Handler{task.DefaultKind: CommandHandler{}}, false, false)
	if err != nil {
		return nil, err
	}
	// The built-in executors: a fresh scheduler has local and slurm.
	for _, sp := range specs {
		if sp.Executor != "" && sp.Executor != local.Name && sp.Executor != slurm.Name {
			return nil, &TaskError{TaskID: sp.ID, Field: "executor", Reason: fmt.Sprintf("unknown executor %q (known: local, slurm)", sp.Executor), Kind: ErrInvalidTask}
		}
	}
	if err := dag.CheckBatch(specs, map[string]struct{}{}); err != nil {
		return nil, publicError(err)
	}
	return &CheckedTasks{specs: specs}, nil
}

// prepare copies, normalizes and validates each spec on its own, and
// with encode encodes it for the state database. qualified accepts
// RUN/TASK ids (WithQualifiedIDs). Without encode, blobs is nil; a
// command's definition, which always encodes, is then not encoded at all.
// The first problem in task order is the one returned.
func prepare(tasks []TaskSpec, handlers map[string]Handler, qualified, encode bool) (specs []*task.Spec, blobs [][]byte, err error) {
	all := make([]task.Spec, len(tasks)) // one allocation for the batch
	specs = make([]*task.Spec, len(tasks))
	command := make([]bool, len(tasks)) // its handler is CommandHandler
	valid := len(tasks)                 // the tasks before this one are valid
	var invalid error                   // what is wrong with that one
	for i := range tasks {
		sp := &all[i]
		*sp = tasks[i].spec() // a copy: the caller may reuse its own
		sp.Normalize()
		if !sp.Resources.MemoryAuto {
			sp.Resources.Budget = nil // the scheduler's to say, for auto budgets only
		}
		if !sp.Resources.MemoryHostAuto {
			sp.Resources.HostBudget = nil
		}
		if invalid = checkSpec(sp, handlers, qualified); invalid != nil {
			valid = i
			break
		}
		_, command[i] = handlers[sp.Kind].(CommandHandler)
		specs[i] = sp
	}
	return encodeSpecs(specs, command, valid, invalid, encode)
}

// encodeSpecs is the end of prepare: specs[:valid] copied, normalized and
// checked, command[i] whether specs[i]'s handler is CommandHandler,
// invalid what is wrong with specs[valid] (nil when valid is all). With
// encode it encodes specs[:valid] for the state database; without, it
// encodes only the definitions that might not encode (not commands'), to
// check them.
func encodeSpecs(specs []*task.Spec, command []bool, valid int, invalid error, encode bool) (_ []*task.Spec, blobs [][]byte, err error) {
	// Encoding is most of the work, and a definition's encoding depends
	// on it alone: commands' are encoded in parallel; other kinds', whose
	// payloads may have encoders of their own, in order.
	if encode {
		blobs = make([][]byte, len(specs))
	}
	errs := make([]error, valid)
	encodeOne := func(i int) {
		b, err := json.Marshal(specs[i])
		if err != nil {
			errs[i] = &TaskError{TaskID: specs[i].ID, Field: "payload", Reason: "cannot be saved as JSON: " + err.Error(), Kind: ErrInvalidTask}
		} else if encode {
			blobs[i] = b
		}
	}
	if encode {
		parallelRanges(valid, func(lo, hi int) {
			var buf []byte // the definitions of up to 1,024 tasks, each a slice of it
			for i := lo; i < hi; i++ {
				if !command[i] {
					continue
				}
				if i%1024 == 0 || buf == nil {
					buf = make([]byte, 0, 160*min(1024, hi-i))
				}
				start := len(buf)
				var ok bool
				if buf, ok = specs[i].AppendJSON(buf); ok { // json.Marshal's bytes, by hand
					blobs[i] = buf[start:len(buf):len(buf)]
				} else {
					encodeOne(i)
				}
			}
		})
	}
	for i := range valid {
		if !command[i] {
			encodeOne(i)
		}
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
	}
	if invalid != nil {
		return nil, nil, invalid
	}
	return specs, blobs, nil
}

// checkSpec checks one normalized spec, and its payload against its
// kind's handler.
func checkSpec(sp *task.Spec, handlers map[string]Handler, qualified bool) error {
	validate := sp.Validate
	if qualified {
		validate = sp.ValidateQualified
	}
	if err := validate(); err != nil {
		return publicError(err)
	}
	h, ok := handlers[sp.Kind]
	if !ok {
		return &TaskError{TaskID: sp.ID, Field: "kind", Reason: fmt.Sprintf("no handler is registered for kind %q", sp.Kind), Kind: ErrUnknownKind}
	}
	switch v := h.(type) {
	case CommandHandler:
		_, err := argv(sp.ID, sp.Payload)
		return err
	case PayloadValidator:
		return v.ValidatePayload(publicSpec(sp))
	}
	return nil
}

// parallel calls f(i) for every i below n, spread over the processors
// when n is large enough to pay for the goroutines (a goroutine per
// parallelMin calls at least).
func parallel(n int, f func(i int)) {
	parallelRanges(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			f(i)
		}
	})
}

// parallelRanges calls f on ranges [lo, hi) that cover every i below n
// once, each range on a processor of its own when n is large enough to
// pay for the goroutines (parallelMin calls a range at least).
func parallelRanges(n int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), 8, n/parallelMin)
	if workers <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { f(w*n/workers, (w+1)*n/workers) })
	}
	wg.Wait()
}
