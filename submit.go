package gpusched

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/internal/artifact"
	"github.com/gpusched/gpusched/internal/dag"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/executor/slurm"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/store"
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

// submit is SubmitManyContext with an idempotency key (SubmitKeyed).
func (s *Scheduler) submit(ctx context.Context, key string, tasks []TaskSpec) error {
	return s.submitWith(ctx, key, false, tasks)
}

// submitWith is submit, taking up retired tasks again when again is set
// (SubmitAgain).
func (s *Scheduler) submitWith(ctx context.Context, key string, again bool, tasks []TaskSpec) error {
	specs, blobs, err := prepare(tasks, s.handlers, s.qualified)
	if err != nil {
		return err
	}
	if err := s.checkNvidiaSMI(specs); err != nil {
		return err
	}
	if err := s.checkExecutors(specs); err != nil {
		return err
	}
	if err := s.chooseBudgets(specs, blobs); err != nil {
		return err
	}
	sub := engine.Submission{Specs: specs, JSON: blobs, Key: key, Again: again,
		Fingerprint: make([]string, len(specs)), Resume: make([]engine.Resume, len(specs))}
	for i, sp := range specs {
		sub.Fingerprint[i] = sp.Fingerprint()
		if r, ok := s.engine.Earlier(sp.ID); ok {
			if sub.Resume[i], err = resumeVerdict(ctx, sp, sub.Fingerprint[i], r); err != nil {
				return err
			}
		}
	}
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return publicError(s.engine.Submit(sub))
}

// resumeVerdict says whether task sp, completed in an earlier run as row
// r, is still valid: the same definition, and its artifacts as they were.
// It reads the artifacts (and hashes them when the task asks), so it runs
// in the caller's goroutine, not the scheduler's loop. It fails only when
// ctx is done before the verdict is known.
func resumeVerdict(ctx context.Context, sp *task.Spec, fingerprint string, r *store.Row) (engine.Resume, error) {
	if r.State != task.Complete {
		return engine.Resume{}, nil
	}
	if r.Fingerprint != "" && r.Fingerprint != fingerprint {
		why := "definition changed"
		var old task.Spec
		if err := json.Unmarshal(r.Spec, &old); err == nil {
			old.Normalize()
			if changed := sp.Changed(&old); len(changed) > 0 {
				why += ": " + strings.Join(changed, ", ")
			}
		}
		return engine.Resume{Why: why}, nil
	}
	why, err := artifact.Intact(ctx, sp, r.Artifacts)
	switch {
	case err != nil:
		return engine.Resume{}, fmt.Errorf("task %q: %w", sp.ID, err)
	case why != "":
		return engine.Resume{Why: why}, nil
	}
	return engine.Resume{Intact: true}, nil
}

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
	specs, _, err := prepare(tasks, map[string]Handler{task.DefaultKind: CommandHandler{}}, false)
	if err != nil {
		return err
	}
	// The built-in executors: a fresh scheduler has local and slurm.
	for _, sp := range specs {
		if sp.Executor != "" && sp.Executor != local.Name && sp.Executor != slurm.Name {
			return &TaskError{TaskID: sp.ID, Field: "executor", Reason: fmt.Sprintf("unknown executor %q (known: local, slurm)", sp.Executor), Kind: ErrInvalidTask}
		}
	}
	return publicError(dag.CheckBatch(specs, map[string]struct{}{}))
}

// prepare copies, normalizes and validates each spec on its own, and
// encodes it for the state database. qualified accepts RUN/TASK ids
// (WithQualifiedIDs).
func prepare(tasks []TaskSpec, handlers map[string]Handler, qualified bool) ([]*task.Spec, [][]byte, error) {
	all := make([]task.Spec, len(tasks)) // one allocation for the batch
	specs := make([]*task.Spec, len(tasks))
	blobs := make([][]byte, len(tasks))
	for i := range tasks {
		sp := &all[i]
		*sp = tasks[i].spec() // a copy: the caller may reuse its own
		sp.Normalize()
		if !sp.Resources.MemoryAuto {
			sp.Resources.Budget = nil // the scheduler's to say, for auto budgets only
		}
		validate := sp.Validate
		if qualified {
			validate = sp.ValidateQualified
		}
		if err := validate(); err != nil {
			return nil, nil, publicError(err)
		}
		h, ok := handlers[sp.Kind]
		if !ok {
			return nil, nil, &TaskError{TaskID: sp.ID, Field: "kind", Reason: fmt.Sprintf("no handler is registered for kind %q", sp.Kind), Kind: ErrUnknownKind}
		}
		var err error
		switch v := h.(type) {
		case CommandHandler:
			_, err = argv(sp.ID, sp.Payload)
		case PayloadValidator:
			err = v.ValidatePayload(publicSpec(sp))
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := json.Marshal(sp)
		if err != nil {
			return nil, nil, &TaskError{TaskID: sp.ID, Field: "payload", Reason: "cannot be saved as JSON: " + err.Error(), Kind: ErrInvalidTask}
		}
		specs[i], blobs[i] = sp, b
	}
	return specs, blobs, nil
}
