// Package fakeremote is a fake remote executor for tests: it behaves as an
// executor over a batch system (Slurm) does, without one. Jobs go to a
// Controller, an in-process stand-in for the batch system's controller
// that outlives the executors using it, as slurmctld outlives a scheduler.
//
// An attempt goes through these steps:
//
//	Execute ── submit ──> held ── Hooks.Submitted(handle: job id) ──> released
//	                        │ (hook fails: cancelled, never runs)        │
//	                        v                                            v
//	                    cancelled                            queued (Controller's delay)
//	                                                                     │
//	                              Hooks.Running (PID 0) <── running <────┘
//	                                                           │
//	                      exited, signalled, timed out, cancelled,
//	                      preempted, node failure
//
// The handle (executor "fakeremote", version 1) holds the controller's job
// id, told before the job can run. Once released, a job waits in the queue,
// then runs on this machine under the local executor; Job.Timeout counts
// from then, not from its submission. Cancelling the context of Execute (or
// of an adopted attempt's Wait) asks the controller to stop the job, as
// scancel does; KillNow kills it at once.
//
// Close plays the death of the scheduler that held an executor: its
// Execute and Wait calls return Lost, and its jobs go on in the
// Controller. A new Executor over the same Controller recovers them by job
// id: still held, queued or running, it reattaches (a held one is
// released: its handle was saved); ended, it reports how; an id the
// controller does not know, a handle of another executor or none at all,
// Lost (a job found by the orphan's token is then stopped first).
//
// The Controller can preempt a running job (SIGTERM, the job's kill grace,
// SIGKILL; it ends Preempted) and fail the node under it (SIGKILL at once;
// it ends NodeFailure), as a batch system does.
package fakeremote
