package gpusched

import (
	"encoding/json"
	"path/filepath"

	"github.com/gpusched/gpusched/internal/budget"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// GPU and host memory budgets learned from history
// (ResourceRequest.MemoryAuto, MemoryHostAuto; docs/gpu.md, "Budgets
// learned from history"): chosen when a task is
// submitted, by the rule of package budget, from the attempts the run
// directory holds of the task, or from those a WithBudgetHistory function
// finds.

// MemoryBudget says how the scheduler chose an auto GPU or host memory
// budget (ResourceRequest.Budget, HostBudget): its Source, the peak it
// learned from (PeakMiB, over Attempts attempts), what capped it (Cap:
// "memory_mib_max" or "card" for GPU memory, "memory_mib_host_max" or
// "machine" for host memory), and from which attempt on (Since) the
// task has had its current definition.
type MemoryBudget = task.Budget

// BudgetSource says where an auto budget comes from.
type BudgetSource = task.BudgetSource

// The sources of an auto budget.
const (
	// BudgetHistory: the largest peak of the task's last
	// BudgetWindow attempts, plus 10% (at least 512 MiB), rounded up to
	// a multiple of 256 MiB.
	BudgetHistory = task.BudgetHistory
	// BudgetMax: no attempt to learn from; MemoryMaxMiB.
	BudgetMax = task.BudgetMax
	// BudgetDefault: no attempt to learn from and no MemoryMaxMiB;
	// DefaultAutoMemoryMiB.
	BudgetDefault = task.BudgetDefault
	// BudgetGrown: an earlier attempt ran out of memory, and the budget it
	// grew to is more than history gives.
	BudgetGrown = task.BudgetGrown
)

// DefaultAutoMemoryMiB is the first budget of an auto task that sets no
// MemoryMaxMiB (capped by the largest card when the cards are known).
const DefaultAutoMemoryMiB = budget.DefaultMiB

// DefaultAutoHostMemoryMiB is the first host memory budget of a task
// with MemoryHostAuto that sets no MemoryHostMaxMiB (capped by the host
// memory the scheduler gives tasks).
const DefaultAutoHostMemoryMiB = budget.DefaultHostMiB

// BudgetWindow is how many recent attempts an auto budget is learned
// from.
const BudgetWindow = budget.Window

// WithBudgetHistory has the scheduler learn auto budgets (MemoryAuto)
// from the attempts f returns for a task, oldest first, in place of
// those the run directory holds of the same id: for a program whose
// tasks get a new id each time they are submitted (a daemon's runs).
// f is called from the goroutine that submits, with the task as it is
// submitted (its slices and maps are the scheduler's: read them only);
// it decides what counts as the same task. Attempts that did not end by
// themselves, or with no peak seen, are not learned from. With
// OrderLongestFirst, f is asked about every task, for its estimated run
// time too.
func WithBudgetHistory(f func(TaskSpec) []Attempt) Option {
	return func(o *options) { o.history = f }
}

// chooseBudgets sets the budget of each resource that a task of the
// batch asks to learn from history, and encodes its definition again with
// them. It reads the cards' capacity at most once. A host memory budget
// is capped by the host memory the scheduler gives tasks, for a task
// this machine runs.
func (s *Scheduler) chooseBudgets(specs []*task.Spec, blobs [][]byte, h *histories) error {
	capacity := int64(-1) // not looked at yet
	for i, sp := range specs {
		chosen := false
		var row *store.Row         // the run directory's, without a history function
		var history []task.Attempt // the history function's
		for _, res := range budget.Resources {
			auto, _ := res.Requested(&sp.Resources)
			if !auto {
				continue
			}
			if !chosen { // asked once per task, whatever it learns
				if s.history != nil {
					history = h.of(i, sp)
				} else {
					row, _ = s.engine.Earlier(sp.ID)
				}
			}
			in := budgetInput(res, sp, row)
			if s.history != nil {
				in.Attempts = history
			}
			switch {
			case res == budget.HostMemory:
				if !s.placesGPUs(sp) { // an executor that places it has the memory of another machine
					in.LimitMiB = s.settings.MemoryMiBHost
				}
			case res != budget.GPUMemory:
			case s.placesGPUs(sp):
				in.LimitMiB = s.maxGPUMiB(sp) // its executor's largest GPU, if it knows
			default:
				if capacity < 0 {
					capacity = s.largestCard()
				}
				in.LimitMiB = capacity
			}
			mib, b := budget.Choose(in)
			res.Set(&sp.Resources, mib, b)
			chosen = true
		}
		if !chosen {
			continue
		}
		var err error
		if blobs[i], err = json.Marshal(sp); err != nil {
			return &TaskError{TaskID: sp.ID, Field: "payload", Reason: "cannot be saved as JSON: " + err.Error(), Kind: ErrInvalidTask}
		}
	}
	return nil
}

// budgetInput is what task sp's budget of res is chosen from, when row
// (nil: none) is what the run directory holds of it. The machine's limit
// is left for the caller.
func budgetInput(res budget.Resource, sp *task.Spec, row *store.Row) budget.Input {
	_, maxMiB := res.Requested(&sp.Resources)
	in := budget.Input{Resource: res, MaxMiB: maxMiB, Since: 1}
	if row == nil {
		return in
	}
	in.Attempts = row.Attempts
	if res == budget.GPUMemory {
		in.GrownMiB = row.GPURequestMiB // the engine's out-of-memory growth
	}
	if row.Fingerprint != "" && row.Fingerprint == sp.Fingerprint() {
		// The same definition: only its saved budgets are needed, and
		// reading them alone is much cheaper than decoding the whole
		// definition.
		var saved struct {
			Resources task.ResourceRequest `json:"resources"`
		}
		if json.Unmarshal(row.Spec, &saved) == nil {
			in.Since = budget.SavedSince(&saved.Resources)
		}
		return in
	}
	var prev *task.Spec
	if p, err := task.DecodeSpec(row.Spec); err == nil {
		prev = &p
	}
	in.Since = budget.Since(prev, row.Attempts, sp)
	return in
}

// largestCard returns the largest capacity of the cards as admission sees
// them, or, before it has read them (a run reads them when it starts), as
// the last scheduler on the run directory saved them; 0 when neither is
// known.
func (s *Scheduler) largestCard() int64 {
	if cards, known := s.engine.Cards(); known {
		return largestCapacity(cards)
	}
	st, err := store.OpenSQLiteReadOnly(filepath.Join(s.runDir, StateFile), s.runDir)
	if err != nil {
		return 0
	}
	defer st.Close()
	cards, _, err := st.LoadCards()
	if err != nil {
		return 0
	}
	return largestCapacity(cards)
}

func largestCapacity(cards []gpu.CardView) int64 {
	var most int64
	for _, c := range cards {
		most = max(most, c.CapacityMiB)
	}
	return most
}

func internalAttempts(as []Attempt) []task.Attempt {
	out := make([]task.Attempt, len(as))
	for i, a := range as {
		out[i] = task.Attempt(a)
	}
	return out
}

// DescribeBudget says for a person how an auto budget of mib MiB was
// chosen: "memory_mib auto: 6400 MiB (peak 5800 MiB in 3 attempts +
// margin)".
func DescribeBudget(mib int64, b *MemoryBudget) string {
	return budget.Describe(budget.GPUMemory, mib, b)
}

// DescribeHostBudget is DescribeBudget for a host memory budget
// (MemoryHostAuto): "memory_mib_host auto: 768 MiB (...)".
func DescribeHostBudget(mib int64, b *MemoryBudget) string {
	return budget.Describe(budget.HostMemory, mib, b)
}
