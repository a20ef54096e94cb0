package gpusched

import (
	"maps"
	"slices"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// The public types are the package's own, documented for its users; the
// engine, the store and the probes work on internal ones. This file is the
// border between the two: every conversion happens here.

// spec copies t into the engine's definition of a task. Slices and maps are
// copied too: the caller may reuse its own.
func (t *TaskSpec) spec() task.Spec {
	return task.Spec{
		ID: t.ID, Kind: t.Kind, Dependencies: slices.Clone(t.Dependencies), Payload: t.Payload, Priority: t.Priority,
		Resources: t.Resources.internal(),
		Executor:  t.Executor, Slurm: t.Slurm.Over(nil), Timeout: t.Timeout, Retries: t.Retries, RetryDelay: t.RetryDelay, RetryOnExitCodes: slices.Clone(t.RetryOnExitCodes),
		RetryOnTimeout: t.RetryOnTimeout, Env: maps.Clone(t.Env), Dir: t.Dir, Artifacts: slices.Clone(t.Artifacts),
		HashArtifacts: t.HashArtifacts, Inputs: slices.Clone(t.Inputs), HashInputs: t.HashInputs, OnComplete: slices.Clone(t.OnComplete), OnFailure: slices.Clone(t.OnFailure), CleanEnv: t.CleanEnv, Owner: t.Owner,
		DependencyOn: conditions(t.DependencyOn),
	}
}

// conditions copies a task's dependency conditions into the engine's,
// leaving out the default ones: a task without others has none, and is
// saved as before conditions existed.
func conditions(on map[string]DependencyCondition) map[string]task.Condition {
	var out map[string]task.Condition
	for id, c := range on {
		if c == AfterSuccess {
			continue
		}
		if out == nil {
			out = make(map[string]task.Condition, len(on))
		}
		out[id] = task.Condition(c)
	}
	return out
}

// publicConditions is conditions the other way.
func publicConditions(on map[string]task.Condition) map[string]DependencyCondition {
	if on == nil {
		return nil
	}
	out := make(map[string]DependencyCondition, len(on))
	for id, c := range on {
		out[id] = DependencyCondition(c)
	}
	return out
}

// publicSpec is the task definition sp as handlers see it. It shares sp's
// slices and maps (but the conditions' map, of another type): handlers
// must not change them.
func publicSpec(sp *task.Spec) *TaskSpec {
	return &TaskSpec{
		ID: sp.ID, Kind: sp.Kind, Dependencies: sp.Dependencies, Payload: sp.Payload, Priority: sp.Priority,
		Resources: publicResources(sp.Resources),
		Executor:  sp.Executor, Slurm: sp.Slurm, Timeout: sp.Timeout, Retries: sp.Retries, RetryDelay: sp.RetryDelay, RetryOnExitCodes: sp.RetryOnExitCodes,
		RetryOnTimeout: sp.RetryOnTimeout, Env: sp.Env, Dir: sp.Dir, Artifacts: sp.Artifacts,
		HashArtifacts: sp.HashArtifacts, Inputs: sp.Inputs, HashInputs: sp.HashInputs, OnComplete: sp.OnComplete, OnFailure: sp.OnFailure, CleanEnv: sp.CleanEnv, Owner: sp.Owner,
		DependencyOn: publicConditions(sp.DependencyOn),
	}
}

// internal copies r into the engine's request; Budget and HostBudget are
// copied too.
func (r ResourceRequest) internal() task.ResourceRequest {
	out := task.ResourceRequest{Device: task.Device(r.Device), MemoryMiB: r.MemoryMiB, Exclusive: r.Exclusive,
		GPUs: r.GPUs, MemoryAuto: r.MemoryAuto, MemoryMaxMiB: r.MemoryMaxMiB,
		CPUs: r.CPUs, MemoryMiBHost: r.MemoryMiBHost, Counters: maps.Clone(r.Counters),
		MemoryHostAuto: r.MemoryHostAuto, MemoryHostMaxMiB: r.MemoryHostMaxMiB}
	if r.Budget != nil {
		b := *r.Budget
		out.Budget = &b
	}
	if r.HostBudget != nil {
		b := *r.HostBudget
		out.HostBudget = &b
	}
	return out
}

// publicResources is r as handlers see it; it shares r's Budget,
// HostBudget and Counters.
func publicResources(r task.ResourceRequest) ResourceRequest {
	return ResourceRequest{Device: Device(r.Device), MemoryMiB: r.MemoryMiB, Exclusive: r.Exclusive,
		GPUs: r.GPUs, MemoryAuto: r.MemoryAuto, MemoryMaxMiB: r.MemoryMaxMiB, Budget: r.Budget,
		CPUs: r.CPUs, MemoryMiBHost: r.MemoryMiBHost, Counters: r.Counters,
		MemoryHostAuto: r.MemoryHostAuto, MemoryHostMaxMiB: r.MemoryHostMaxMiB, HostBudget: r.HostBudget}
}

// publicRecord converts a record; its slices are its own.
func publicRecord(r task.Record) Record {
	out := Record{ID: r.ID, State: State(r.State), ExitCode: r.ExitCode, Error: r.Error, BlockedBy: r.BlockedBy,
		Submitted: r.Submitted, RetryAt: r.RetryAt, Rerun: r.Rerun, Waiting: publicWait(r.Waiting), Paused: r.Paused,
		NotNeeded: r.NotNeeded}
	out.Attempts = make([]Attempt, len(r.Attempts))
	for i, a := range r.Attempts {
		out.Attempts[i] = Attempt(a)
	}
	if r.Artifacts != nil {
		out.Artifacts = make([]Artifact, len(r.Artifacts))
		for i, a := range r.Artifacts {
			out.Artifacts[i] = Artifact(a)
		}
	}
	return out
}

func publicWait(w task.WaitReason) WaitReason {
	return WaitReason{Kind: WaitKind(w.Kind), Detail: w.Detail, Until: w.Until}
}

func (w WaitReason) internal() task.WaitReason {
	return task.WaitReason{Kind: task.WaitKind(w.Kind), Detail: w.Detail, Until: w.Until}
}

func publicWaits(m map[string]task.WaitReason) map[string]WaitReason {
	if m == nil {
		return nil
	}
	out := make(map[string]WaitReason, len(m))
	for id, w := range m {
		out[id] = publicWait(w)
	}
	return out
}

func publicRecords(rs []task.Record) []Record {
	if rs == nil {
		return nil
	}
	out := make([]Record, len(rs))
	for i := range rs {
		out[i] = publicRecord(rs[i])
	}
	return out
}

// eventKinds maps the engine's event kinds to the public ones.
var eventKinds = [...]EventKind{
	engine.Started: EventStarted, engine.Retrying: EventRetrying, engine.Completed: EventComplete,
	engine.Failed: EventFailed, engine.TaskBlocked: EventBlocked, engine.TaskCancelled: EventCancelled,
	engine.DeliveryFailed: EventDeliveryFailed, engine.CardQuarantined: EventCardQuarantined,
	engine.GPUUnknown: EventGPUUnknown, engine.GPUKnown: EventGPUKnown, engine.Adopted: EventAdopted,
	engine.JobChanged: EventJob,
}

func publicEvent(ev engine.Event) Event {
	var k EventKind
	if int(ev.Kind) < len(eventKinds) {
		k = eventKinds[ev.Kind]
	}
	return Event{Seq: ev.Seq, Time: ev.Time, Kind: k, TaskID: ev.TaskID, Attempt: Attempt(ev.Attempt), BlockedBy: ev.BlockedBy,
		NotNeeded: ev.NotNeeded, Error: ev.Error, Rerun: ev.Rerun, Card: ev.Card, RetryAt: ev.RetryAt, Ended: ev.Ended,
		Submitted: ev.Submitted, Notification: ev.Notification, GaveUp: ev.GaveUp}
}

// publicObserver adapts an observer of public events to the engine's.
func publicObserver(f func(Event)) func(engine.Event) {
	if f == nil {
		return nil
	}
	return func(ev engine.Event) { f(publicEvent(ev)) }
}

func publicCards(cs []gpu.CardView) []CardView {
	out := make([]CardView, len(cs))
	for i, c := range cs {
		v := CardView{Index: c.Index, UUID: c.UUID, Name: c.Name, TotalMiB: c.TotalMiB, UsedMiB: c.UsedMiB, FreeMiB: c.FreeMiB,
			CapacityMiB: c.CapacityMiB, ForeignMiB: c.ForeignMiB, ForeignProcs: c.ForeignProcs, ChargedMiB: c.ChargedMiB,
			AvailableMiB: c.AvailableMiB, Holders: make([]Holding, len(c.Holders)), Exclusive: c.Exclusive,
			State: CardState(c.State), Reason: c.Reason, Until: c.Until, ReservedFor: c.ReservedFor}
		for j, h := range c.Holders {
			v.Holders[j] = Holding{Task: h.Task, PID: h.PID, RequestMiB: h.RequestMiB, ObservedMiB: h.ObservedMiB, PeakMiB: h.PeakMiB,
				Exclusive: h.Exclusive}
		}
		out[i] = v
	}
	return out
}

// publicError gives the validation errors of the internal packages their
// public types, so that errors.As finds a *TaskError or a *CycleError.
// Other errors are returned as they are.
func publicError(err error) error {
	switch e := err.(type) {
	case *task.Error:
		return (*TaskError)(e)
	case *task.CycleError:
		return (*CycleError)(e)
	}
	return err
}
