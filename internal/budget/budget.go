package budget

import (
	"fmt"
	"strconv"

	"github.com/gpusched/gpusched/internal/task"
)

// The rule's constants (see the package comment and docs/gpu.md).
const (
	// Window is how many recent attempts a budget is learned from.
	Window = 5
	// DefaultMiB is the first GPU memory budget of a task that sets no
	// maximum, and DefaultHostMiB its first host memory budget.
	DefaultMiB     int64 = 8192
	DefaultHostMiB int64 = 2048
	// StepMiB: learned budgets are rounded up to a multiple of it.
	StepMiB int64 = 256
	// MarginPercent of the peak, and at least MinMarginMiB, is added to it.
	MarginPercent       = 10
	MinMarginMiB  int64 = 512
)

// What lowered a budget (task.Budget.Cap).
const (
	CapMax     = "memory_mib_max"      // the task's own maximum (GPU memory)
	CapHostMax = "memory_mib_host_max" // the task's own maximum (host memory)
	CapCard    = "card"                // the largest card's capacity
	CapMachine = "machine"             // the host memory the scheduler gives tasks
)

// Resource is a budget that can be learned from history: it says which
// fields of an attempt hold what it asked for and the peak it reached.
type Resource uint8

// The resources whose budget can be learned.
const (
	// GPUMemory is resources.memory_mib: an attempt's MemRequestedMiB and
	// MemPeakMiB.
	GPUMemory Resource = iota + 1
	// HostMemory is resources.memory_mib_host: an attempt's
	// HostMemRequestedMiB and RSSPeakMiB.
	HostMemory
)

// String names the resource by its workflow key.
func (r Resource) String() string {
	switch r {
	case GPUMemory:
		return "memory_mib"
	case HostMemory:
		return "memory_mib_host"
	}
	return "resource(" + strconv.Itoa(int(r)) + ")"
}

// MaxKey is the workflow key of the resource's maximum.
func (r Resource) MaxKey() string { return r.String() + "_max" }

// Resources lists the resources whose budget can be learned.
var Resources = []Resource{GPUMemory, HostMemory}

// Default is the first budget of r for a task that sets no maximum.
func (r Resource) Default() int64 {
	if r == HostMemory {
		return DefaultHostMiB
	}
	return DefaultMiB
}

// Requested reports whether req asks for r's budget to be learned, and
// the maximum it sets (0: none).
func (r Resource) Requested(req *task.ResourceRequest) (auto bool, maxMiB int64) {
	switch r {
	case GPUMemory:
		return req.MemoryAuto && req.GPU(), req.MemoryMaxMiB
	case HostMemory:
		return req.MemoryHostAuto, req.MemoryHostMaxMiB
	}
	return false, 0
}

// Set records in req the budget chosen for r, and how.
func (r Resource) Set(req *task.ResourceRequest, mib int64, b task.Budget) {
	switch r {
	case GPUMemory:
		req.MemoryMiB, req.Budget = mib, &b
	case HostMemory:
		req.MemoryMiBHost, req.HostBudget = mib, &b
	}
}

// Chosen returns the budget of r req holds and how it was chosen; nil
// when it was not learned.
func (r Resource) Chosen(req *task.ResourceRequest) (int64, *task.Budget) {
	switch r {
	case GPUMemory:
		if req.MemoryAuto {
			return req.MemoryMiB, req.Budget
		}
	case HostMemory:
		if req.MemoryHostAuto {
			return req.MemoryMiBHost, req.HostBudget
		}
	}
	return 0, nil
}

// clear removes from req everything of r's budget, learned or not.
func (r Resource) clear(req *task.ResourceRequest) {
	switch r {
	case GPUMemory:
		req.MemoryMiB, req.MemoryAuto, req.MemoryMaxMiB, req.Budget = 0, false, 0, nil
	case HostMemory:
		req.MemoryMiBHost, req.MemoryHostAuto, req.MemoryHostMaxMiB, req.HostBudget = 0, false, 0, nil
	}
}

// limitCap names the machine's limit of r in task.Budget.Cap, and
// limitText for a person.
func (r Resource) limitCap() string {
	switch r {
	case GPUMemory:
		return CapCard
	case HostMemory:
		return CapMachine
	}
	return "machine"
}

func (r Resource) limitText() string {
	switch r {
	case GPUMemory:
		return "the largest card's capacity"
	case HostMemory:
		return "the machine's host memory"
	}
	return "the machine's"
}

// Peak returns the most of r attempt a was seen to use; 0: not seen.
func (r Resource) Peak(a *task.Attempt) int64 {
	switch r {
	case GPUMemory:
		return a.MemPeakMiB
	case HostMemory:
		return a.RSSPeakMiB
	}
	return 0
}

// Asked returns what attempt a was admitted with of r; 0: unknown.
func (r Resource) Asked(a *task.Attempt) int64 {
	switch r {
	case GPUMemory:
		return a.MemRequestedMiB
	case HostMemory:
		return a.HostMemRequestedMiB
	}
	return 0
}

// counts reports whether attempt a's peak of r is learned from: it ended
// by itself (not cancelled, not cut short by the scheduler's death, so
// the peak is not a partial one) and a peak was seen.
func counts(r Resource, a *task.Attempt) bool {
	return a.Ended() && !a.Cancelled && !a.Interrupted && r.Peak(a) > 0
}

// Margin is what is added to a peak: MarginPercent of it, at least
// MinMarginMiB.
func Margin(peakMiB int64) int64 { return max(peakMiB*MarginPercent/100, MinMarginMiB) }

// Propose returns the budget for a task that peaked at peakMiB: the peak
// plus the margin, rounded up to a multiple of StepMiB.
func Propose(peakMiB int64) int64 { return roundUp(peakMiB + Margin(peakMiB)) }

func roundUp(v int64) int64 { return (v + StepMiB - 1) / StepMiB * StepMiB }

// Seen is what a task's recent attempts show of a resource.
type Seen struct {
	PeakMiB  int64 // the largest peak
	Attempts int   // how many attempts it is taken over, at most Window
}

// Observe returns the largest peak of r over the last Window attempts
// numbered since or later that ended by themselves with a peak seen.
// attempts are oldest first.
func Observe(r Resource, attempts []task.Attempt, since int) Seen {
	var s Seen
	for i := len(attempts) - 1; i >= 0 && s.Attempts < Window; i-- {
		a := &attempts[i]
		if a.Number < since || !counts(r, a) {
			continue
		}
		s.PeakMiB = max(s.PeakMiB, r.Peak(a))
		s.Attempts++
	}
	return s
}

// Input is what a budget is chosen from.
type Input struct {
	Resource Resource
	// Attempts are the task's earlier attempts, oldest first; those
	// numbered below Since ran another definition.
	Attempts []task.Attempt
	Since    int
	// MaxMiB is the task's maximum (memory_mib_max,
	// memory_mib_host_max); 0: none.
	MaxMiB int64
	// LimitMiB is the most the machine can give of the resource (for
	// GPU memory, the largest card's capacity; for host memory, what the
	// scheduler gives tasks in all); 0: not known.
	LimitMiB int64
	// GrownMiB is the budget the task grew to after running out of
	// memory (the scheduler's persisted growth); 0: none.
	GrownMiB int64
}

// Choose returns the budget in MiB and how it was chosen (see the
// package comment).
func Choose(in Input) (int64, task.Budget) {
	seen := Observe(in.Resource, in.Attempts, in.Since)
	b := task.Budget{PeakMiB: seen.PeakMiB, Attempts: seen.Attempts, Since: max(in.Since, 1)}
	var mib int64
	switch {
	case seen.Attempts > 0:
		mib, b.Source = Propose(seen.PeakMiB), task.BudgetHistory
	case in.MaxMiB > 0:
		mib, b.Source = in.MaxMiB, task.BudgetMax
	default:
		mib, b.Source = in.Resource.Default(), task.BudgetDefault
	}
	if in.MaxMiB > 0 && mib > in.MaxMiB {
		mib, b.Cap = in.MaxMiB, in.Resource.MaxKey()
	}
	if in.LimitMiB > 0 && mib > in.LimitMiB {
		mib, b.Cap = in.LimitMiB, in.Resource.limitCap()
	}
	if in.GrownMiB > mib {
		mib, b.Source, b.Cap = in.GrownMiB, task.BudgetGrown, ""
	}
	return mib, b
}

// Describe says for a person how budget mib of r was chosen:
// "memory_mib auto: 6400 MiB (peak 5800 MiB in 3 attempts + margin)".
func Describe(r Resource, mib int64, b *task.Budget) string {
	head := fmt.Sprintf("%s auto: %d MiB", r, mib)
	if b == nil {
		return head
	}
	var why string
	switch b.Source {
	case task.BudgetHistory:
		why = fmt.Sprintf("peak %d MiB in %s + margin", b.PeakMiB, attempts(b.Attempts))
	case task.BudgetMax:
		why = r.MaxKey() + ": no earlier attempt to learn from"
	case task.BudgetDefault:
		why = "the default: no earlier attempt to learn from"
	case task.BudgetGrown:
		why = "grown after running out of memory"
		if b.Attempts > 0 {
			why += fmt.Sprintf("; peak %d MiB in %s", b.PeakMiB, attempts(b.Attempts))
		}
	default:
		why = string(b.Source)
	}
	switch b.Cap {
	case "":
	case r.MaxKey():
		why += ", capped at " + r.MaxKey()
	default:
		why += ", capped at " + r.limitText()
	}
	return head + " (" + why + ")"
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

// Identity is the digest of sp's definition without its budgets: two
// specs with the same identity run the same thing, whatever they ask for.
func Identity(sp *task.Spec) string {
	c := *sp
	for _, r := range Resources {
		r.clear(&c.Resources)
	}
	return c.Fingerprint()
}

// Since returns the number of the first attempt of cur's definition, for
// a task whose stored definition is prev (nil when it cannot be read)
// with attempts (oldest first): 1 when prev has the same identity and
// says no more, prev's own Since when it says, and the next attempt's
// number when the definition changed.
func Since(prev *task.Spec, attempts []task.Attempt, cur *task.Spec) int {
	next := 1
	if n := len(attempts); n > 0 {
		next = attempts[n-1].Number + 1
	}
	if prev == nil || Identity(prev) != Identity(cur) {
		return next
	}
	return SavedSince(&prev.Resources)
}

// SavedSince returns the Since that a saved request of the same
// definition holds (the latest any of its learned budgets says); 1 when
// it holds none. The definition is one for all the resources.
func SavedSince(saved *task.ResourceRequest) int {
	since := 1
	for _, r := range Resources {
		if _, b := r.Chosen(saved); b != nil {
			since = max(since, b.Since)
		}
	}
	return since
}

// Flag marks a budget that is far from what the task uses.
type Flag string

// The flags.
const (
	// Wasted: the last attempt asked for at least WasteFactor times the
	// proposal, and WasteMiB more.
	Wasted Flag = "wasted"
	// OOMRisk: the peak is within the margin of what was asked, or above.
	OOMRisk Flag = "oom-risk"
)

// When an ask is wasted.
const (
	WasteFactor       = 1.5
	WasteMiB    int64 = 2048
)

// Advice is what a task's recent attempts say of its budget of a
// resource.
type Advice struct {
	AskedMiB    int64 // what its last attempt asked for; 0: unknown
	PeakMiB     int64 // the largest peak over its recent attempts
	Attempts    int   // how many attempts PeakMiB is taken over
	ProposedMiB int64 // Propose(PeakMiB); 0 with no attempt to learn from
	Flag        Flag
}

// Advise returns the advice for a task's attempts (oldest first),
// learning from those numbered since or later.
func Advise(r Resource, attempts []task.Attempt, since int) Advice {
	seen := Observe(r, attempts, since)
	ad := Advice{PeakMiB: seen.PeakMiB, Attempts: seen.Attempts}
	for i := len(attempts) - 1; i >= 0; i-- {
		if a := &attempts[i]; a.Number >= since && r.Asked(a) > 0 {
			ad.AskedMiB = r.Asked(a)
			break
		}
	}
	if seen.Attempts == 0 {
		return ad
	}
	ad.ProposedMiB = Propose(seen.PeakMiB)
	switch {
	case ad.AskedMiB == 0:
	case seen.PeakMiB+Margin(seen.PeakMiB) > ad.AskedMiB:
		ad.Flag = OOMRisk
	case float64(ad.AskedMiB) >= WasteFactor*float64(ad.ProposedMiB) && ad.AskedMiB-ad.ProposedMiB >= WasteMiB:
		ad.Flag = Wasted
	}
	return ad
}
