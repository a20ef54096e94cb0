// Package slurm is the slurm executor: each attempt of a task is one
// Slurm batch job, while gpusched keeps the graph, the state, resume,
// artifacts and events, and Slurm places the work. See docs/slurm.md for
// setup, settings and limits.
//
// # An attempt
//
//	Execute ── log made (run directory's rules) ── batch script written
//	   │
//	   └─ sbatch --parsable --hold ... ──> held job J
//	          │  (refused: retried with backoff; controller unreachable:
//	          │   submissions wait, no attempt fails)
//	          v
//	      Hooks.Submitted(handle: J, result file, submit time)
//	          │  (fails: scancel J, never runs)
//	          v
//	      scontrol release J ──> PENDING ──> RUNNING: the helper starts
//	                                            the command and notes when
//	                                            (Hooks.Running, the clock)
//	                                                │
//	            result file (exit code or signal, written atomically) ─┘
//
// The batch script hands the helper (a program that calls MaybeAttempt,
// such as gpusched itself, started with AttemptCommand) the task's argv,
// folder and environment as JSON in a quoted here-document: no shell
// reads them. The helper runs the command as the local executor does (a
// process group, exactly the task's environment plus Slurm's SLURM_* and
// GPU variables), passes SIGTERM on (then SIGKILL after the kill grace),
// kills at once on SIGUSR1, stops the command at its timeout, and writes
// the outcome beside the log: attempt-N.result, through a temporary file
// renamed into place. Its start goes to attempt-N.started.
//
// # Tracking
//
// One goroutine (the tracker) follows every job of an executor: each
// round it reads the result files first, then asks one squeue call, with
// the list of job ids and a fixed format, about the others, scontrol
// about a job squeue no longer lists, and, where Slurm's accounting is on
// (the first such need finds out, once), one sacct call about the jobs
// scontrol no longer knows either. Rounds come every PollMin after a
// submission or a change, and slow down, doubling to PollMax, while
// nothing changes. A job that ended, or left Slurm, without a result file
// is waited for LostGrace, then mapped from Slurm's last state:
// TIMEOUT timed out, OUT_OF_MEMORY killed with that reason, PREEMPTED,
// NODE_FAIL and BOOT_FAIL interruptions (not charged), CANCELLED by
// someone else cancelled (saying so), and anything else Lost.
//
// # Stopping
//
// A cancel sends SIGTERM to the helper (scancel --batch --signal=TERM),
// which gives the command its kill grace; the whole job is cancelled
// (scancel) after that grace and Slack. KillNow sends SIGUSR1 (the
// helper kills at once). A job that has not started is cancelled at once.
// The end is confirmed from the result file or Slurm's state, never from
// scancel's exit status. Cancels queued together go in one scancel call.
//
// # Recovery
//
// The handle holds the job id, the result file and the submit time. A
// restarted scheduler's Recover reads the result file, or adopts the job
// (releasing one still held). An attempt whose handle was never saved (a
// crash between sbatch and the commit) is found by its job name,
// "gpusched." and the attempt's token (run, task, attempt), so no job is
// ever submitted twice for one attempt.
package slurm
