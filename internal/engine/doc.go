// Package engine is gpusched's scheduling loop. One goroutine, the loop,
// owns every task's state, the ready queue and the count of running
// attempts. Everything else reaches it through events on one channel: API
// calls (submit, cancel, records, run) carry a reply channel; workers report
// that an attempt started and that it ended.
//
// Each turn of the loop applies a batch of events, asks decide (a pure
// function of a View) which ready tasks to start, writes every resulting
// transition to the store in one transaction, and only then acts: launches
// workers, answers callers, notifies the observer. A crash therefore never
// leaves an action without its record.
//
// Task life cycle (see docs/states.md):
//
//	pending ──start──▶ running ──exit 0──▶ complete
//	   ▲                  │
//	   └──retry left──────┤ failed / timed out
//	                      ├──no retry left──▶ failed ──▶ dependents blocked
//	                      └──cancelled──────▶ cancelled ──▶ dependents blocked
//
// "Dependents blocked" is the default condition's rule. Each dependency
// has a condition (task.Condition: success, failure, any), and settle
// judges each pending dependent's by it when the dependency ends: met, it
// waits for one dependency less; no longer possible, it is blocked,
// naming the failure upstream, or (task.Record.NotNeeded) the task that
// completed when it runs on a failure.
//
// # The engine as a service
//
// Run schedules what was submitted until nothing more can run, then
// returns. Serve schedules whatever is submitted, from any goroutine and
// at any time, until its context ends or the engine closes; Run and Serve
// share one gate and stop the same way (running attempts are stopped and
// recorded cancelled, tasks not started stay pending). Wait returns once
// the tasks it names are finished, with their records, after the commit.
// Cancel, too, answers once the cancellation is committed, for a running
// task once its attempt has ended.
//
// Every event the observer sees is numbered (Event.Seq: 1, 2, 3... in
// commit order within the engine's life) and also goes to the subscribers
// (Subscribe). Each has a bounded buffer; the loop never waits for one: a
// subscriber whose buffer is full is dropped (ErrSlowSubscriber) and may
// resume after the last event it read, from the last EventHistory events
// the engine keeps (ErrTooOld beyond them).
//
// A batch with a key (Submission.Key) submitted again adds nothing; the
// key is saved with the batch, so a restarted engine knows it too, for
// KeyWindow after the batch's commit; then it is deleted (keys.go).
//
// A batch with Again may name, and depend on, finished tasks the engine
// does not hold: retired ones (retire.go) and those an earlier engine
// left finished (earlier.go). A dependency on one is judged by its stored
// end; naming one takes it up again and links to it the pending tasks
// that depend on it, so that they wait for its new end as they would for
// a task held (Retry).
//
// # Why tasks wait
//
// The loop gives each pending task a reason (task.WaitReason: its
// dependencies, a slot, GPU memory, a reserved or resting card, the GPU
// state, a retry delay or back-off) where it decides; decide reports, in
// Plan.Passed, the GPU tasks it passed over whose reason changed. Reasons
// go to the store with the tasks' rows, in the turn's commit (wait.go says
// how details are throttled); Waiting and Records answer in process. A
// running task whose attempt waits in a batch system (Slurm's queue) has
// the one reason a running task may have, WaitQueued, from what the
// executor tells (Hooks.Progress); its attempt records the job
// (progress.go).
//
// # GPU tasks placed elsewhere
//
// A GPU task whose executor places its work itself (Config.PlacesGPUs:
// Slurm) is, for admission, a CPU task: decide sees it with GPU false, it
// takes a slot and no card, and never waits for the GPU state. Its GPU
// memory budget (the node's need) still grows after a CUDA out-of-memory
// failure, up to Config.MaxGPUMiB, is saved as the task's GPU request, and
// goes to the Runner in AttemptRequest.GPUMiB (gpu.go: growPlaced).
//
// # Pause, resume, retry
//
// Pause keeps tasks out of the ready queue (decide never sees them; they
// wait with WaitPaused), saved with their rows so that a reopened engine
// keeps them so; with stop, running attempts get SIGSTOP through the
// Runner, if it is a Signaler, and Resume sends SIGCONT. Retry makes
// failed, cancelled or blocked tasks pending again with what they blocked
// (pause.go).
//
// # Fair share
//
// The ready queue is one queue per owner (task.Spec.Owner), walked by
// priority, then the owner's decayed usage (slot·seconds and GPU
// MiB·seconds, halved every Config.FairShareHalfLife), then submission;
// with one owner, by priority then submission as always. Per-user caps
// (Config.UserMaxRunning, UserMaxGPUMiB) hold an owner's further tasks
// (task.WaitUserCap). The usage is saved in the store's meta with each
// commit in which an attempt ended, and read at Open (fair.go).
//
// With Config.Retire, finished tasks leave memory once their end is
// committed and their completion event delivered; later submissions,
// Cancel and Wait find them in the store, so a long-lived engine's heap
// follows the unfinished tasks, not all it ever ran. Records and Run then
// return only the tasks in memory (retire.go says what is kept and why).
package engine
