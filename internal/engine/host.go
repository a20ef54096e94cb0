package engine

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Admission by the machine's cores, host memory and custom resources
// (decide's View.Host; docs/workflow.md, "CPU, memory and custom
// resources"), and the sampling of running attempts' resident memory.
// What is free is counted here, in the loop: each attempt takes its share
// when it starts (or is adopted) and gives it back when it ends.

// HostConfig configures admission by the machine's resources besides the
// GPUs, and the sampling of attempts' memory.
type HostConfig struct {
	// CPUs is the cores running attempts may take together; a task takes
	// task.ResourceRequest.CPUCount (1 unless it asks more), none if its
	// executor runs it elsewhere (PlacesGPUs). 0: no limit.
	CPUs int
	// MemoryMiB is what the host memory budgets of running attempts
	// (task.ResourceRequest.MemoryMiBHost) may add up to. 0: no limit.
	MemoryMiB int64
	// Counters are the custom resources, by name, and how many units
	// each has; a task that names another is refused at submit.
	Counters map[string]int
	// ReserveAfter: a task ready this long that still does not fit holds
	// back what it needs (see decide). 0 means DefaultReserveAfter;
	// negative: never.
	ReserveAfter time.Duration
	// SampleRSS returns the resident memory of process groups, in MiB by
	// group id (hostres.Machine.GroupRSS); it runs on a goroutine of its
	// own. Nil: attempts' memory is not sampled.
	SampleRSS func(pgids []int) (map[int]int64, error)
	// SampleEvery is how often the running attempts' memory is sampled
	// while some run. 0 means DefaultSampleEvery.
	SampleEvery time.Duration
}

// DefaultSampleEvery is how often attempts' memory is sampled when
// HostConfig.SampleEvery is 0.
const DefaultSampleEvery = 2 * time.Second

// unlimited stands for a capacity without a limit: far above anything a
// task may ask, far from overflowing when taken from.
const unlimited = math.MaxInt32

// hostState is what the loop knows of the machine's resources.
type hostState struct {
	on   bool     // some capacity is counted: decide gets view
	view HostView // what is free now; decide reads it, the loop changes it
	// held is what each running attempt took, by node: given back as
	// taken, whatever its spec says by then (a submission may claim an
	// adopted node with another). Kept whenever on or sampling.
	held map[*node]hostTake
	// Sampling of attempts' memory: one sample in flight at most.
	sampling   bool
	nextSample time.Time
}

// hostTake is what an attempt took of the machine.
type hostTake struct {
	cpus     int
	mib      int64
	counters map[string]int // the spec's: never changed
}

func (e *Engine) initHost() {
	c := &e.cfg.Host
	c.ReserveAfter = cmp.Or(c.ReserveAfter, DefaultReserveAfter) // negative stays: never
	if c.SampleEvery <= 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	h := &e.host
	h.on = c.CPUs > 0 || c.MemoryMiB > 0 || len(c.Counters) > 0
	h.view = HostView{CPUs: unlimited, MemoryMiB: unlimited, Counters: maps.Clone(c.Counters), ReserveAfter: c.ReserveAfter}
	if c.CPUs > 0 {
		h.view.CPUs = c.CPUs
	}
	if c.MemoryMiB > 0 {
		h.view.MemoryMiB = c.MemoryMiB
	}
	if h.view.Counters == nil {
		h.view.Counters = map[string]int{}
	}
	if h.on || c.SampleRSS != nil {
		h.held = map[*node]hostTake{}
	}
}

// hostView is what decide sees of the machine's resources: nil when none
// is counted.
func (e *Engine) hostView() *HostView {
	if !e.host.on {
		return nil
	}
	return &e.host.view
}

// remote reports whether task s runs where its executor places it (Slurm),
// taking none of this machine's cores or memory.
func (e *Engine) remote(s *task.Spec) bool { return e.cfg.PlacesGPUs != nil && e.cfg.PlacesGPUs(s) }

// takeOf is what n's attempt takes of the machine when it starts now.
func takeOf(n *node) hostTake {
	r := &n.spec.Resources
	t := hostTake{cpus: r.CPUCount(), mib: r.MemoryMiBHost, counters: r.Counters}
	if n.placed {
		t.cpus, t.mib = 0, 0
	}
	return t
}

// takeHost counts n's attempt, starting or adopted, against the machine's
// resources until releaseHost.
func (e *Engine) takeHost(n *node) {
	h := &e.host
	if h.held == nil {
		return
	}
	t := takeOf(n)
	h.held[n] = t
	h.view.CPUs -= t.cpus
	h.view.MemoryMiB -= t.mib
	for name, units := range t.counters {
		h.view.Counters[name] -= units
	}
}

// releaseHost gives back what n's attempt took.
func (e *Engine) releaseHost(n *node) {
	h := &e.host
	t, ok := h.held[n]
	if !ok {
		return
	}
	delete(h.held, n)
	h.view.CPUs += t.cpus
	h.view.MemoryMiB += t.mib
	for name, units := range t.counters {
		h.view.Counters[name] += units
	}
}

// checkSubmittedHost refuses tasks that could never start here
// (CheckHost).
func (e *Engine) checkSubmittedHost(specs []*task.Spec) error {
	return CheckHost(e.cfg.Host, specs, e.remote)
}

// CheckHost refuses the first task of specs that could never start under
// c: more cores or host memory than the tasks may take in all, a custom
// resource c does not have, or more units of one than it has. A task
// remote reports (its executor runs it elsewhere) is checked for custom
// resources only; remote may be nil.
func CheckHost(c HostConfig, specs []*task.Spec, remote func(*task.Spec) bool) error {
	for _, s := range specs {
		r := &s.Resources
		if !r.Host() {
			continue
		}
		if remote == nil || !remote(s) {
			if c.CPUs > 0 && r.CPUs > c.CPUs {
				return task.Invalid(s.ID, "resources.cpus", "asks for %d cpus; this scheduler's tasks may take %d in all (scheduling.cpus)", r.CPUs, c.CPUs)
			}
			if c.MemoryMiB > 0 && r.MemoryMiBHost > c.MemoryMiB {
				return task.Invalid(s.ID, "resources.memory_mib_host", "asks for %d MiB; this scheduler's tasks may take %d MiB of host memory in all (scheduling.memory_mib_host)",
					r.MemoryMiBHost, c.MemoryMiB)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(r.Counters)) {
			have, ok := c.Counters[name]
			switch {
			case !ok:
				return task.Invalid(s.ID, "resources."+name, "%s", UnknownResource(name, c.Counters))
			case r.Counters[name] > have:
				return task.Invalid(s.ID, "resources."+name, "asks for %d of %q, which has %d in all (scheduling.resources)", r.Counters[name], name, have)
			}
		}
	}
	return nil
}

// UnknownResource says that name is not one of the custom resources
// declared (scheduling.resources), naming those that are.
func UnknownResource(name string, declared map[string]int) string {
	if len(declared) == 0 {
		return fmt.Sprintf("%q is not a resource: declare it under scheduling.resources (e.g. resources: {%s: 2}), or use cpus, memory_mib_host", name, name)
	}
	return fmt.Sprintf("%q is not a resource declared under scheduling.resources (%s)", name, strings.Join(slices.Sorted(maps.Keys(declared)), ", "))
}

// hostReason is the reason of n, passed over for what p says it lacks of
// the machine, worded from what is free now; heldFor is the task the
// machine's resources are held for, if any.
func (e *Engine) hostReason(n *node, p Pass, heldFor string) task.WaitReason {
	t := takeOf(n)
	h := &e.host.view
	var need, free, all string
	switch {
	case p.Why == task.WaitCPU:
		need, free, all = plural(t.cpus, "cpu", "cpus"), "those free are", inAll(e.cfg.Host.CPUs, "")
	case p.Why == task.WaitHostMemory:
		need, free, all = fmt.Sprintf("%d MiB of host memory", t.mib), "what is left is", inAll(e.cfg.Host.MemoryMiB, " MiB")
	default:
		names := slices.Sorted(maps.Keys(t.counters))
		name := ""
		for _, k := range names {
			if t.counters[k] > h.Counters[k] {
				name = k
				break
			}
		}
		if name == "" && len(names) > 0 {
			name = names[0]
		}
		need, free, all = fmt.Sprintf("%d of %q", t.counters[name], name), "those free are", fmt.Sprintf("%d in all", e.cfg.Host.Counters[name])
	}
	if p.Held && heldFor != "" {
		return task.WaitReason{Kind: p.Why, Detail: fmt.Sprintf("needs %s; %s held for %q, which has waited longest", need, free, heldFor)}
	}
	return task.WaitReason{Kind: p.Why, Detail: fmt.Sprintf("needs %s, more than is free now (%s)", need, all)}
}

// inAll says a capacity for a reason's detail: "16 in all", "no limit".
func inAll[T int | int64](c T, unit string) string {
	if c <= 0 {
		return "no limit"
	}
	return fmt.Sprintf("%d%s in all", c, unit)
}

// plural is "1 cpu", "4 cpus".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// hostKind reports whether k is a reason about the machine's resources.
func hostKind(k task.WaitKind) bool {
	return k == task.WaitCPU || k == task.WaitHostMemory || k == task.WaitResource
}

// rssTarget is a running attempt whose memory a sample reads.
type rssTarget struct {
	n      *node
	number int
	pgid   int
}

// sampleRSS starts a sample of the running attempts' resident memory when
// one is due, and returns when the next is (zero: none).
func (e *Engine) sampleRSS(now time.Time) time.Time {
	h := &e.host
	sample := e.cfg.Host.SampleRSS
	if sample == nil || h.sampling || len(h.held) == 0 || e.closing != nil {
		return time.Time{}
	}
	if now.Before(h.nextSample) {
		return h.nextSample
	}
	h.nextSample = now.Add(e.cfg.Host.SampleEvery)
	var targets []rssTarget
	for n := range h.held {
		number := len(n.rec.Attempts)
		if a := &n.rec.Attempts[number-1]; a.PID > 0 && !a.Ended() {
			targets = append(targets, rssTarget{n: n, number: number, pgid: a.PID})
		}
	}
	if len(targets) == 0 {
		return h.nextSample // none has a process here yet
	}
	h.sampling = true
	pgids := make([]int, len(targets))
	for i, t := range targets {
		pgids[i] = t.pgid
	}
	go func() {
		rss, err := sample(pgids)
		e.send(rssEvent{targets: targets, rss: rss, err: err})
	}()
	return time.Time{}
}

// rssEvent is a sample of the running attempts' resident memory.
type rssEvent struct {
	targets []rssTarget
	rss     map[int]int64 // MiB by process group
	err     error
}

// apply raises each attempt's peak. An attempt that goes over its host
// memory budget by far (task.Attempt.OverHostMemory) is written at once,
// so that status shows it while it runs; the others' peaks are written
// when they end.
func (ev rssEvent) apply(e *Engine) {
	e.host.sampling = false
	if ev.err != nil {
		return // none this time; the next sample may read
	}
	for _, t := range ev.targets {
		n := t.n
		mib, ok := ev.rss[t.pgid]
		if !ok || len(n.rec.Attempts) != t.number || n.rec.State != task.Running {
			continue
		}
		a := &n.rec.Attempts[t.number-1]
		if a.Ended() || mib <= a.RSSPeakMiB {
			continue
		}
		over := a.OverHostMemory()
		a.RSSPeakMiB = mib
		if !over && a.OverHostMemory() {
			e.writeAttempt(n, t.number)
		}
	}
}
