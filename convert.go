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
		Resources: task.ResourceRequest{Device: task.Device(t.Resources.Device), MemoryMiB: t.Resources.MemoryMiB, Exclusive: t.Resources.Exclusive,
			GPUs: t.Resources.GPUs},
		Executor: t.Executor, Slurm: t.Slurm.Over(nil), Timeout: t.Timeout, Retries: t.Retries, RetryDelay: t.RetryDelay, RetryOnExitCodes: slices.Clone(t.RetryOnExitCodes),
		RetryOnTimeout: t.RetryOnTimeout, Env: maps.Clone(t.Env), Dir: t.Dir, Artifacts: slices.Clone(t.Artifacts),
		HashArtifacts: t.HashArtifacts, OnComplete: slices.Clone(t.OnComplete), CleanEnv: t.CleanEnv, Owner: t.Owner,
	}
}

// publicSpec is the task definition sp as handlers see it. It shares sp's
// slices and maps: handlers must not change them.
func publicSpec(sp *task.Spec) *TaskSpec {
	return &TaskSpec{
		ID: sp.ID, Kind: sp.Kind, Dependencies: sp.Dependencies, Payload: sp.Payload, Priority: sp.Priority,
		Resources: ResourceRequest{Device: Device(sp.Resources.Device), MemoryMiB: sp.Resources.MemoryMiB, Exclusive: sp.Resources.Exclusive,
			GPUs: sp.Resources.GPUs},
		Executor: sp.Executor, Slurm: sp.Slurm, Timeout: sp.Timeout, Retries: sp.Retries, RetryDelay: sp.RetryDelay, RetryOnExitCodes: sp.RetryOnExitCodes,
		RetryOnTimeout: sp.RetryOnTimeout, Env: sp.Env, Dir: sp.Dir, Artifacts: sp.Artifacts,
		HashArtifacts: sp.HashArtifacts, OnComplete: sp.OnComplete, CleanEnv: sp.CleanEnv, Owner: sp.Owner,
	}
}

// publicRecord converts a record; its slices are its own.
func publicRecord(r task.Record) Record {
	out := Record{ID: r.ID, State: State(r.State), ExitCode: r.ExitCode, Error: r.Error, BlockedBy: r.BlockedBy,
		Submitted: r.Submitted, RetryAt: r.RetryAt, Rerun: r.Rerun, Waiting: publicWait(r.Waiting), Paused: r.Paused}
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
		Error: ev.Error, Rerun: ev.Rerun, Card: ev.Card, RetryAt: ev.RetryAt, Ended: ev.Ended,
		Submitted: ev.Submitted}
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
			v.Holders[j] = Holding(h)
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
