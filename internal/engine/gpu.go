package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// GPUConfig configures GPU admission.
type GPUConfig struct {
	// Probe reads the GPUs; nil means GPU tasks are refused at submit.
	Probe gpu.Probe
	// Settings are the admission settings (margin, cooldown, placement,
	// visible cards, quarantine).
	Settings gpu.Settings
	// PollInterval is how often the GPUs are read while GPU tasks wait or
	// run. Default 2s.
	PollInterval time.Duration
	// ReserveAfter is how long a GPU task that does not fit may be passed
	// over by smaller ones before it reserves a card. Negative: never.
	ReserveAfter time.Duration
	// UnknownTimeout: if the GPU state cannot be read for this long, the
	// waiting GPU tasks fail instead of waiting forever. Default 10m.
	UnknownTimeout time.Duration
}

// Defaults of GPUConfig, documented in docs/gpu.md.
const (
	DefaultPollInterval   = 2 * time.Second
	DefaultReserveAfter   = time.Minute
	DefaultUnknownTimeout = 10 * time.Minute
)

// Reading is a probe's answer taken outside the loop (at submit), handed to
// it with the tasks it was taken for.
type Reading struct {
	Snap gpu.Snapshot
	Err  error
}

func (e *Engine) initGPU() {
	c := &e.cfg.GPU
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.UnknownTimeout <= 0 {
		c.UnknownTimeout = DefaultUnknownTimeout
	}
	e.board = gpu.NewBoard(c.Settings)
	e.wake = time.NewTimer(time.Hour)
	e.wake.Stop()
	e.pollCtx, e.stopPolls = context.WithCancel(context.Background())
}

// checkSubmittedGPU refuses GPU tasks that cannot run here: no probe, or a
// request larger than every card.
func (e *Engine) checkSubmittedGPU(specs []*task.Spec, r *Reading) error {
	if r != nil {
		e.applyReading(*r)
	}
	for _, s := range specs {
		if !s.Resources.GPU() || e.placed(s) {
			continue
		}
		if e.cfg.GPU.Probe == nil {
			return task.Invalid(s.ID, "resources.device", "needs a GPU, and this scheduler has no GPU probe")
		}
		if err := e.neverFits(s.ID, needOf(s.Resources)); err != "" {
			return task.Invalid(s.ID, neverFitsField(s.Resources), "%s", err)
		}
	}
	return nil
}

// neverFitsField is the field a request no card can hold is blamed on:
// its count of cards when it asks for several, else its memory.
func neverFitsField(r task.ResourceRequest) string {
	if r.GPUCount() > 1 {
		return "resources.gpus"
	}
	return "resources.memory_mib"
}

// needOf is what a task with resources r asks of the cards, before any
// growth after running out of memory.
func needOf(r task.ResourceRequest) gpu.Need {
	return gpu.Need{MiB: r.MemoryMiB, Exclusive: r.Exclusive, Count: uint8(min(r.GPUCount(), task.MaxGPUs))}
}

// cardsOf returns the indices of the cards of n's running attempt, in the
// order chosen; nil when it holds none here.
func (e *Engine) cardsOf(n *node) []int {
	if cs := e.multi[n]; cs != nil {
		return cs
	}
	if n.card >= 0 {
		return []int{int(n.card)}
	}
	return nil
}

// setMulti records the cards of n's running attempt on several.
func (e *Engine) setMulti(n *node, cards []int) {
	if e.multi == nil {
		e.multi = map[*node][]int{}
	}
	e.multi[n] = cards
}

// placed reports whether GPU task s runs where its executor places it,
// not on this machine's cards (Config.PlacesGPUs).
func (e *Engine) placed(s *task.Spec) bool {
	return s.Resources.GPU() && e.cfg.PlacesGPUs != nil && e.cfg.PlacesGPUs(s)
}

// localGPU reports whether n is a GPU task admitted to this machine's
// cards.
func (n *node) localGPU() bool { return !n.placed && n.spec.Resources.GPU() }

// neverFits says why need can never be met on this machine, or "" if it
// may be (including when the cards are not known yet).
func (e *Engine) neverFits(id string, need gpu.Need) string {
	if !e.board.Known() {
		return ""
	}
	return gpu.NeverFits(e.board.Views(e.cfg.Now()), need, len(e.board.Settings().Visible) > 0)
}

// applyReading takes a probe's answer into the board, and tells the
// observer when the GPUs become unreadable (GPU tasks wait, CPU tasks go
// on) and readable again.
func (e *Engine) applyReading(r Reading) {
	now := e.cfg.Now()
	if r.Err != nil {
		e.board.Fail(r.Err, now)
	} else {
		e.board.Apply(r.Snap, now)
	}
	e.cardsDirty = true
	e.noticeQuarantines()
	switch why, _ := e.board.Err(); {
	case why != "" && !e.gpuUnknownSaid:
		e.gpuUnknownSaid = true
		e.notify(Event{Kind: GPUUnknown, Error: why + "; GPU tasks wait"})
	case why == "" && e.gpuUnknownSaid:
		e.gpuUnknownSaid = false
		e.notify(Event{Kind: GPUKnown})
	}
}

// noticeQuarantines tells the observer of cards that went into quarantine.
func (e *Engine) noticeQuarantines() {
	for _, q := range e.board.TakeQuarantines() {
		e.notify(Event{Kind: CardQuarantined, Card: q.Index, Error: fmt.Sprintf("%s (until %s)", q.Reason, q.Until.Format(time.TimeOnly))})
	}
}

type snapshotEvent struct {
	Reading
	// topo answers the topology question when it was asked with this
	// reading (asked: the first good reading of the engine's life).
	asked   bool
	topo    *gpu.Topology
	topoErr error
}

func (ev snapshotEvent) apply(e *Engine) {
	e.polling = false
	e.nextPoll = e.cfg.Now().Add(e.cfg.GPU.PollInterval)
	if ev.asked {
		e.applyTopology(ev.topo, ev.topoErr)
	}
	e.applyReading(ev.Reading)
	e.fitCheck = true
	if ev.Err == nil {
		e.sample(e.cfg.Now())
	}
}

// sampleEvery bounds how often an unchanged card is sampled for reports.
const sampleEvery = 10 * time.Second

// sample queues the cards' memory for reports: a card whose numbers
// changed since its last sample, or whose last sample is old.
func (e *Engine) sample(now time.Time) {
	if e.lastSample == nil {
		e.lastSample = map[int]store.Sample{}
	}
	for _, v := range e.board.Views(now) {
		if v.State == gpu.CardHidden || v.State == gpu.CardUnknown {
			continue
		}
		s := store.Sample{At: now, Index: v.Index, TotalMiB: v.TotalMiB, UsedMiB: v.UsedMiB, ForeignMiB: v.ForeignMiB,
			ChargedMiB: v.ChargedMiB, CapacityMiB: v.CapacityMiB}
		for _, h := range v.Holders {
			s.ObservedMiB += h.ObservedMiB
		}
		last, ok := e.lastSample[v.Index]
		same := ok && last.UsedMiB == s.UsedMiB && last.ForeignMiB == s.ForeignMiB && last.ChargedMiB == s.ChargedMiB && last.ObservedMiB == s.ObservedMiB
		if !same || now.Sub(last.At) >= sampleEvery {
			e.batch.Samples = append(e.batch.Samples, s)
			e.lastSample[v.Index] = s
		}
	}
}

// pollGPUs starts a probe when one is due while GPU tasks wait or run, and
// returns when the loop should look again: the next poll or the next card
// that comes back from a cooldown or quarantine (zero: no need). It also
// queues the cards' view for saving.
func (e *Engine) pollGPUs() time.Time {
	now := e.cfg.Now()
	if e.cardsDirty {
		e.saveCards(now)
		e.sweepGPUWaits()
	}
	active := e.cfg.GPU.Probe != nil && e.run != nil && e.run.stop == nil && e.closing == nil && e.broken == nil &&
		(e.gpuReady > 0 || e.gpuRunning > 0)
	if !active {
		return time.Time{}
	}
	if !e.polling && !now.Before(e.nextPoll) {
		e.polling = true
		probe, ctx := e.cfg.GPU.Probe, e.pollCtx
		tr, askTopo := probe.(gpu.TopologyReader)
		askTopo = askTopo && !e.topoAsked
		go func() {
			ev := snapshotEvent{}
			snap, err := probe.Snapshot(ctx)
			ev.Reading = Reading{Snap: snap, Err: err}
			if err == nil && askTopo {
				// Once, at the first good reading: how the cards are
				// connected does not change while the machine runs.
				ev.asked = true
				ev.topo, ev.topoErr = tr.Topology(ctx)
			}
			e.send(ev)
		}()
	}
	var next time.Time
	if !e.polling {
		next = e.nextPoll
	}
	if c := e.board.NextChange(now); !c.IsZero() && e.gpuReady > 0 && (next.IsZero() || c.Before(next)) {
		next = c
	}
	return next
}

// applyTopology takes the answer to the topology question, asked once:
// the cards' topology, or why it cannot be read, in which case no set of
// cards is preferred to another. Either way it is saved with the run
// (store.MetaGPUTopology), where status shows a failure.
func (e *Engine) applyTopology(t *gpu.Topology, err error) {
	e.topoAsked = true
	e.topo = t
	why := ""
	if err != nil {
		e.topo = nil
		why = "cannot read how the cards are connected (" + err.Error() + "): tasks on several cards get the cards with the most room, not the closest"
	}
	if e.batch.Meta == nil {
		e.batch.Meta = map[string]string{}
	}
	e.batch.Meta[store.MetaGPUTopology] = why
}

// arm sets the loop's wake-up to the earliest of the times given (zero
// times are ignored), or stops it.
func (e *Engine) arm(times ...time.Time) {
	var next time.Time
	for _, t := range times {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() {
		e.wake.Stop()
		return
	}
	e.wake.Reset(max(next.Sub(e.cfg.Now()), 0))
}

// saveCards queues the cards' view, with reservations, for the state
// database, where `gpusched status` and `gpusched gpus` read it.
func (e *Engine) saveCards(now time.Time) {
	views := e.cardViews(now)
	if views == nil {
		views = []gpu.CardView{}
	}
	e.batch.Cards = views
	unknown, _ := e.board.Err()
	if e.gpuReady == 0 && e.gpuRunning == 0 && unknown == gpu.NotReadYet {
		unknown = ""
	}
	if e.batch.Meta == nil {
		e.batch.Meta = map[string]string{}
	}
	e.batch.Meta[store.MetaGPUUnknown] = unknown // beside other facts of the batch (submit keys)
	e.cardsDirty = false
}

// setReserved records the cards decide reserved for starving tasks.
func (e *Engine) setReserved(r map[int]string) {
	if len(r) != len(e.reserved) {
		e.cardsDirty = true
	} else {
		for k, v := range r {
			if e.reserved[k] != v {
				e.cardsDirty = true
			}
		}
	}
	e.reserved = r
}

// oomCase is what a GPU attempt's end says about memory.
type oomCase struct {
	oom bool // its output shows CUDA running out of memory
	// contention: it ran out while inside its budget (its peak plus the
	// failed allocation within its request) and others grew on the card
	// since it started: not its fault.
	contention bool
	peak       int64 // the most its processes were seen to use
	tried      int64 // the failed allocation, when the message says
	request    int64 // what it was admitted with
	grownTo    int64 // its next request, when it grew
	foreign    [2]int64
	// A task whose executor places it (no card here, its use unseen):
	// placed, and the most its executor can give, when growth met it.
	placed bool
	limit  int64
	wanted int64 // what it would have grown to without the limit
	// outgrown: why its grown request fits no card, if it does not (kept
	// here, not in the node: its 512 bytes are a size class).
	outgrown string
}

// releaseGPU ends an attempt's charge on its cards. A failed attempt makes
// the task avoid those cards next time; one that ran out of memory by its
// own growth makes it ask for more (on each card: its peak is the most
// one of its cards was seen to hold), while one that ran out because
// another process took its cards' memory keeps its request, and such a
// failure does not count towards the cards' quarantine.
func (e *Engine) releaseGPU(n *node, failed bool, out Outcome) oomCase {
	now := e.cfg.Now()
	cards := e.cardsOf(n)
	oc := oomCase{oom: failed && out.OOM, tried: out.OOMTriedMiB, request: n.need.MiB}
	if oc.oom {
		found := false
		for _, c := range cards {
			if held, ok := e.board.Holding(n.spec.ID, c); ok {
				oc.peak, oc.request, found = max(oc.peak, held.PeakMiB), held.RequestMiB, true
			}
		}
		if found {
			foreignNow, othersOver := e.cardPressure(n, cards)
			oc.foreign = [2]int64{n.foreignAtStart, foreignNow}
			oc.contention = oc.peak+oc.tried <= oc.request && (foreignNow > n.foreignAtStart || othersOver > 0)
		}
	}
	var peak int64
	for _, c := range cards {
		h := e.board.Release(n.spec.ID, c, failed && !oc.contention, now)
		peak = max(peak, h.PeakMiB)
		if failed && !oc.contention && !slices.Contains(n.need.Avoid, c) {
			n.need.Avoid = append(n.need.Avoid, c)
		}
	}
	e.noticeQuarantines()
	n.rec.Attempts[len(n.rec.Attempts)-1].MemPeakMiB = peak
	e.gpuRunning--
	e.cardsDirty = true
	e.nextPoll = now // read the cards again right away
	n.card = -1
	delete(e.multi, n)
	if oc.oom && !oc.contention {
		n.need.MiB = gpu.GrowAfterOOM(n.need.MiB, peak, out.OOMTriedMiB, e.board.Settings().SafetyMarginMiB)
		oc.grownTo = n.need.MiB
		oc.outgrown = e.neverFits(n.spec.ID, n.need)
	}
	return oc
}

// growPlaced grows the GPU memory budget of a task whose executor places
// it, after its attempt ran out of GPU memory: as for a task on a card
// here (its budget, the failed allocation, the safety margin), but with
// no peak seen, and up to the most its executor can give (MaxGPUMiB), no
// further: the retry then asks for that, and may fail the same way. No
// card here can refuse it: it does not run here.
func (e *Engine) growPlaced(n *node, out Outcome) oomCase {
	oc := oomCase{oom: true, placed: true, tried: out.OOMTriedMiB, request: n.need.MiB}
	grown := gpu.GrowAfterOOM(n.need.MiB, 0, out.OOMTriedMiB, e.board.Settings().SafetyMarginMiB)
	if e.cfg.MaxGPUMiB != nil {
		if limit := e.cfg.MaxGPUMiB(n.spec); limit > 0 && grown > limit {
			oc.limit, oc.wanted, grown = limit, grown, max(limit, n.need.MiB)
		}
	}
	n.need.MiB, oc.grownTo = grown, grown
	return oc
}

// cardPressure returns, for the cards task n runs on, the memory foreign
// to us now and how far our other tasks there are above their requests,
// added up over the cards.
func (e *Engine) cardPressure(n *node, cards []int) (foreign, othersOver int64) {
	for _, v := range e.board.Views(e.cfg.Now()) {
		if !slices.Contains(cards, v.Index) {
			continue
		}
		for _, h := range v.Holders {
			if h.Task != n.spec.ID {
				othersOver += max(0, h.ObservedMiB-h.RequestMiB)
			}
		}
		foreign += v.ForeignMiB
	}
	return foreign, othersOver
}

// describe says what the out-of-memory failure means for the task, to be
// added to the attempt's error; retry says whether another attempt follows.
func (oc oomCase) describe(retry bool) string {
	switch {
	case !oc.oom:
		return ""
	case oc.placed && oc.limit > 0 && retry:
		return fmt.Sprintf("; CUDA out of memory: its GPU memory budget grows from %d to %d MiB, not %d: no GPU its executor can give has more (the largest GPU type); the retry asks for that one and may run out of memory again",
			oc.request, oc.grownTo, oc.wanted)
	case oc.placed && retry:
		return fmt.Sprintf("; CUDA out of memory: its GPU memory budget grows from %d to %d MiB", oc.request, oc.grownTo)
	case oc.placed:
		return fmt.Sprintf("; CUDA out of memory (GPU memory budget %d MiB)", oc.request)
	case oc.contention:
		return fmt.Sprintf("; CUDA out of memory while within its budget (peak seen %d MiB of %d): another process took the card's memory (foreign %d -> %d MiB), so this does not count against the task and its request stays %d MiB",
			oc.peak, oc.request, oc.foreign[0], oc.foreign[1], oc.request)
	case retry:
		return fmt.Sprintf("; CUDA out of memory (peak seen %d MiB): its request grows from %d to %d MiB", oc.peak, oc.request, oc.grownTo)
	}
	return fmt.Sprintf("; CUDA out of memory (peak seen %d MiB, request %d MiB)", oc.peak, oc.request)
}

// checkGPUWaits fails waiting GPU tasks that can never start: their request
// is larger than every card (checked after each reading), or the GPU state
// has been unknown for longer than UnknownTimeout.
func (e *Engine) checkGPUWaits() {
	if e.gpuReady == 0 {
		return
	}
	now := e.cfg.Now()
	var why func(n *node) string
	if err, since := e.board.Err(); err != "" && !since.IsZero() && now.Sub(since) >= e.cfg.GPU.UnknownTimeout {
		why = func(*node) string {
			return fmt.Sprintf("GPU state unknown for %s: %s", now.Sub(since).Round(time.Second), err)
		}
	} else if e.fitCheck && e.board.Known() {
		// The check Submit makes when the cards are known already, made
		// when they are first seen: a request no card can hold fails.
		why = func(n *node) string {
			if w := e.neverFits(n.spec.ID, n.need); w != "" {
				return "resources.memory_mib: " + w
			}
			return ""
		}
	}
	e.fitCheck = false
	if why == nil {
		return
	}
	var doomed []*node
	e.ready.Ascend(func(n *node) bool {
		if n.localGPU() {
			if w := why(n); w != "" {
				n.rec.Error = w
				doomed = append(doomed, n)
			}
		}
		return true
	})
	for _, n := range doomed {
		e.unready(n)
		n.rec.State = task.Failed
		e.writeTask(n)
		e.notify(Event{Kind: Failed, TaskID: n.spec.ID, Error: n.rec.Error, Submitted: n.rec.Submitted})
		e.settle(n)
	}
}
