package slurm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/task"
)

// Config is how the executor talks to Slurm. Its zero value is usable:
// the defaults are below each field.
type Config struct {
	// Binary is the helper each batch job runs (with AttemptCommand):
	// a program that calls MaybeAttempt first thing, such as gpusched,
	// at a path the compute nodes see. Default: this program, provided
	// it called MaybeAttempt (gpusched.SupervisorMain does); else
	// attempts fail, saying so.
	Binary string
	// Commands runs sbatch, squeue, scontrol and scancel. Default: the
	// programs in PATH (PathCommands).
	Commands Commands
	// PollMin and PollMax bound the interval between two rounds of
	// tracking (one squeue for all jobs). Rounds start at PollMin after a
	// submission or a change, and double while nothing changes.
	// Defaults: 500 ms and 30 s.
	PollMin, PollMax time.Duration
	// LostGrace is how long a job that left Slurm (or ended) without a
	// result file is waited for: shared file systems show a file written
	// on another node late. Then the attempt is Lost. Default: 2 min.
	LostGrace time.Duration
	// MaxSubmitting is how many sbatch calls run at once; default 4.
	MaxSubmitting int
	// SubmitsPerSecond is how many sbatch calls start per second at
	// most; default 10.
	SubmitsPerSecond float64
	// SubmitRetries is how many times a submission Slurm refused is tried
	// again, with backoff (1 s, doubling), before the attempt fails; one
	// that could not reach the controller is tried until it can.
	// Default 3; negative: none.
	SubmitRetries int
	// Slack is how long past a job's kill grace (or, for its timeout,
	// past timeout and kill grace) the executor waits for the helper to
	// stop the task before it cancels the whole job. Default 10 s.
	Slack time.Duration
}

func (c Config) withDefaults() Config {
	c.PollMin = cmp.Or(c.PollMin, 500*time.Millisecond)
	c.PollMax = max(cmp.Or(c.PollMax, 30*time.Second), c.PollMin)
	c.LostGrace = cmp.Or(c.LostGrace, 2*time.Minute)
	c.MaxSubmitting = cmp.Or(c.MaxSubmitting, 4)
	c.SubmitsPerSecond = cmp.Or(c.SubmitsPerSecond, 10)
	switch {
	case c.SubmitRetries == 0:
		c.SubmitRetries = 3
	case c.SubmitRetries < 0:
		c.SubmitRetries = 0
	}
	c.Slack = cmp.Or(c.Slack, 10*time.Second)
	if c.Commands == nil {
		c.Commands = PathCommands{}
	}
	return c
}

// Executor runs each attempt as a Slurm batch job; see the package
// documentation. It is safe for concurrent use.
type Executor struct {
	cfg    Config
	cmds   Commands
	health *health
	lim    *limiter

	startOnce sync.Once
	tr        *tracker // started by the first use

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

var _ executor.Executor = (*Executor)(nil)

// New returns an executor over the Slurm that cfg reaches.
func New(cfg Config) *Executor {
	cfg = cfg.withDefaults()
	h := newHealth()
	return &Executor{cfg: cfg, cmds: cfg.Commands, health: h,
		lim: newLimiter(cfg.MaxSubmitting, cfg.SubmitsPerSecond), closed: make(chan struct{})}
}

// Name is "slurm".
func (e *Executor) Name() string { return Name }

var _ executor.Placer = (*Executor)(nil)

// PlacesWork is true: Slurm chooses the node and the GPUs of each job.
func (e *Executor) PlacesWork() bool { return true }

// MaxGPUMiB is the memory of the largest type in sp's slurm.gpu_types; 0
// without gpu_types (Slurm's GPUs are not known).
func (e *Executor) MaxGPUMiB(sp *task.Spec) int64 {
	_, mib := sp.Slurm.LargestGPUType()
	return mib
}

func (e *Executor) tracker() *tracker {
	e.startOnce.Do(func() { e.tr = newTracker(e.cmds, e.cfg.PollMin, e.cfg.PollMax, e.health) })
	return e.tr
}

// Close stops following jobs: Execute and Wait calls in flight return
// Lost, and the jobs go on in Slurm, for a later executor to recover.
// It never cancels a job.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() {
		close(e.closed)
		e.startOnce.Do(func() {}) // no tracker after Close
		if e.tr != nil {
			e.tr.close()
		}
	})
	return nil
}

func (e *Executor) isClosed() bool {
	select {
	case <-e.closed:
		return true
	default:
		return false
	}
}

// Unreachable reports whether the controller did not answer the last
// call, since when and why: submissions wait meanwhile.
func (e *Executor) Unreachable() (bool, time.Time, error) { return e.health.state() }

// HonoursGate: Execute waits for Job.Gate before it writes or submits
// anything.
func (e *Executor) HonoursGate() {}

var _ executor.Gated = (*Executor)(nil)

// Execute submits job as a held batch job, tells hooks.Submitted its
// handle, releases it, and follows it to its end; see the package
// documentation. Running is told with PID 0 and the time Slurm started
// the job. Progress is told while submission waits for an unreachable
// controller, then the job id once the job is released, then Slurm's
// state, reason and node each time the tracker sees them change.
func (e *Executor) Execute(ctx context.Context, job executor.Job, hooks executor.Hooks) executor.Result {
	begun := time.Now()
	fail := func(reason executor.EndReason, err error) executor.Result {
		return executor.Result{Reason: reason, Start: begun, End: time.Now(), Err: err}
	}
	switch {
	case e.isClosed():
		return fail(executor.Infrastructure, errors.New("submit to slurm: executor closed"))
	case len(job.Args) == 0:
		return fail(executor.Unrunnable, executor.CommandFault(errors.New("empty command")))
	case job.User != nil:
		return fail(executor.Unrunnable, executor.CommandFault(fmt.Errorf("task %s: the slurm executor runs tasks as the scheduler's own user only", job.TaskID)))
	case ctx.Err() != nil:
		return fail(executor.Cancelled, context.Cause(ctx))
	}
	if err := job.AwaitGate(); err != nil {
		return fail(executor.Infrastructure, err)
	}
	binary := e.cfg.Binary
	if binary == "" {
		self, err := os.Executable()
		if err != nil || !helperReady.Load() {
			return fail(executor.Unrunnable, executor.CommandFault(fmt.Errorf(
				"task %s: this program cannot serve as its Slurm jobs' helper: call gpusched.SupervisorMain first thing in main, or give the slurm executor a helper binary", job.TaskID)))
		}
		binary = self
	}
	// The log is made here, with the run directory's protections: Slurm
	// opens --output following links, so it must find a file of ours.
	f, err := local.OpenLog(job.LogRoot, job.LogPath)
	if err != nil {
		return fail(executor.Infrastructure, executor.EnvironmentFault(err))
	}
	gres, note := gresFor(job)
	if note != "" {
		fmt.Fprintf(f, "gpusched: %s\n", note)
	}
	f.Close()
	fs := filesOf(job)
	for _, old := range []string{fs.result, fs.started} {
		if err := os.Remove(old); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fail(executor.Infrastructure, executor.EnvironmentFault(fmt.Errorf("remove a file of an earlier attempt: %w", err)))
		}
	}
	script, err := scriptFor(binary, job, fs.result)
	if err != nil {
		return fail(executor.Unrunnable, executor.CommandFault(err))
	}
	if err := writeFileAtomic(fs.script, script, 0o700); err != nil {
		return fail(executor.Infrastructure, executor.EnvironmentFault(err))
	}
	rep := &reporter{tell: hooks.Progress}
	id, err := e.submit(ctx, job, fs, rep)
	switch {
	case err != nil && ctx.Err() != nil:
		return fail(executor.Cancelled, context.Cause(ctx))
	case errors.Is(err, executor.ErrCommand):
		return fail(executor.Unrunnable, err)
	case err != nil:
		return fail(executor.Infrastructure, err)
	}
	hd := handleData{JobID: id, Result: fs.result, Name: jobName(job), Submitted: begun, Gres: gres}
	if hooks.Submitted != nil {
		if err := hooks.Submitted(encodeHandle(hd)); err != nil {
			e.cancelNow(id)
			return fail(executor.Infrastructure, fmt.Errorf("save the handle of slurm job %s: %w", id, err))
		}
	}
	if e.isClosed() {
		// The scheduler died after it saved the handle: the job stays
		// held until one recovers (and releases) it.
		return fail(executor.Lost, fmt.Errorf("slurm executor closed: job %s stays held for the next scheduler", id))
	}
	if err := e.release(ctx, id); err != nil && ctx.Err() == nil {
		// Slurm refused to let it run: it would wait held for ever.
		e.cancelNow(id)
		return fail(executor.Infrastructure, fmt.Errorf("release slurm job %s: %w", id, err))
	}
	rep.report(executor.Progress{Job: id, State: "PENDING", Queued: true}) // the tracker soon says why
	return e.follow(ctx, job, hd, hooks.Running, rep, time.Time{})
}

// cancelNow cancels held job id at once, not through the tracker's
// queue: the scheduler may close the executor right after (a commit that
// failed), and a job left held would wait in Slurm for ever. When scancel
// fails, the tracker tries again.
func (e *Executor) cancelNow(id string) {
	if _, err := e.cmds.Run(context.Background(), "scancel", id); err != nil {
		e.tracker().send(signalReq{ids: []string{id}})
	}
}

// follow watches the job of hd until it ends: ctx done stops it (SIGTERM
// to the helper, which passes it on and gives the task its kill grace;
// the job is cancelled after that grace and Slack), KillNow kills it at
// once, and a job past its timeout, kill grace and Slack is cancelled.
// running, when not nil, is told once when the command runs (the helper
// notes it beside the result file); rep is told what Slurm says of the
// job as that changes; since, when not zero, is when it started (an
// adopted attempt).
func (e *Executor) follow(ctx context.Context, job executor.Job, hd handleData, running func(executor.Running), rep *reporter, since time.Time) executor.Result {
	w := e.tracker().follow(hd.JobID, hd.Result)
	defer e.tracker().unfollow(w)
	var deadline, hard, grace <-chan time.Time
	told := !since.IsZero()
	arm := func() {
		if job.Timeout > 0 {
			deadline = time.After(time.Until(since.Add(job.Timeout + job.KillGrace + e.cfg.Slack)))
		}
	}
	tell := func(t time.Time) {
		if told {
			return
		}
		told, since = true, t
		if running != nil {
			running(executor.Running{Handle: encodeHandle(hd), Since: since})
		}
		arm()
	}
	if told {
		arm()
	}
	// started reports whether the command runs: the tracker may not have
	// read the helper's note yet, and a stop must know (a job whose
	// command runs gets SIGTERM and its kill grace, not Slurm's scancel).
	started := func() bool {
		if !told {
			if at, ok := readStarted(hd.Result); ok {
				tell(at)
			}
		}
		return told
	}
	var last jobState
	var gone, cancelled, killed, timedOut bool
	cancelJob := func() { e.tracker().send(signalReq{ids: []string{hd.JobID}}) }
	done, killNow := ctx.Done(), job.KillNow
	for {
		select {
		case s := <-w.ch:
			if !s.started.IsZero() {
				tell(s.started)
			}
			switch {
			case s.err != nil:
				return executor.Result{Reason: executor.Lost, Started: told, Start: since, End: time.Now(), Err: s.err}
			case s.outcome != nil:
				r := s.outcome.result()
				// Its job ends as the helper exits: say so, not the state
				// last seen (RUNNING), which would stay the attempt's.
				rep.report(progressOf(jobState{ID: hd.JobID, State: endState(r, last.State), Node: last.Node}, true))
				if r.Started {
					tell(r.Start)
					r.Start = since
				}
				return e.judge(r, hd, last, cancelled, timedOut)
			case s.gone:
				gone = true
			default:
				last = s.state
				rep.report(progressOf(last, told))
				if terminal(last.State) && cancelled && !told {
					now := time.Now()
					return executor.Result{Reason: executor.Cancelled, Start: now, End: now,
						Err: fmt.Errorf("slurm job %s cancelled before its command ran", hd.JobID)}
				}
			}
			if (gone || terminal(last.State)) && grace == nil {
				grace = time.After(e.cfg.LostGrace)
			}
		case <-grace:
			return e.withoutResult(hd, last, gone, told, since, cancelled, killed, timedOut)
		case <-done:
			done, cancelled = nil, true
			if started() {
				e.tracker().send(signalReq{ids: []string{hd.JobID}, sig: "TERM", batch: true})
				hard = time.After(job.KillGrace + e.cfg.Slack)
			} else {
				cancelJob()
			}
		case <-killNow:
			killNow, cancelled, killed = nil, true, true
			if started() {
				e.tracker().send(signalReq{ids: []string{hd.JobID}, sig: "USR1", batch: true})
				hard = time.After(e.cfg.Slack)
			} else {
				cancelJob()
			}
		case <-deadline:
			deadline, timedOut = nil, true
			cancelJob()
		case <-hard:
			hard = nil
			cancelJob()
		case <-e.closed:
			return executor.Result{Reason: executor.Lost, Started: told, Start: since, End: time.Now(),
				Err: fmt.Errorf("slurm executor closed: job %s goes on without it", hd.JobID)}
		}
	}
}

// judge is the result of an attempt whose helper wrote r: a command the
// helper stopped on a signal from outside (Cancelled) was stopped by
// gpusched (cancelled, or its deadline), or else by Slurm, whose state
// says why.
func (e *Executor) judge(r executor.Result, hd handleData, last jobState, cancelled, timedOut bool) executor.Result {
	if r.Reason != executor.Cancelled {
		return r
	}
	switch {
	case timedOut:
		r.Reason = executor.TimedOut
		return r
	case cancelled:
		return r
	}
	if !terminal(last.State) {
		if out, err := e.cmds.Run(context.Background(), "scontrol", "show", "job", hd.JobID); err == nil {
			if s, err := parseShowJob(out); err == nil {
				last = s
			}
		}
	}
	mapped := byState(hd.JobID, last.State)
	if mapped.Reason != 0 && mapped.Reason != executor.Lost {
		r.Reason, r.Err = mapped.Reason, mapped.Err
	} else {
		r.Err = fmt.Errorf("slurm job %s was stopped from outside gpusched (Slurm says %s)", hd.JobID, cmp.Or(last.State, "nothing"))
	}
	return r
}

// withoutResult is the result of a job that ended, or left Slurm, and
// wrote no result file within LostGrace.
func (e *Executor) withoutResult(hd handleData, last jobState, gone, started bool, since time.Time, cancelled, killed, timedOut bool) executor.Result {
	r := executor.Result{Started: started, Start: since, End: time.Now()}
	if !started {
		r.Start = r.End
	}
	switch {
	case cancelled:
		r.Reason = executor.Cancelled
		if killed && started {
			r.Signal = syscall.SIGKILL
		}
		return r
	case timedOut:
		r.Reason = executor.TimedOut
		return r
	}
	state := last.State
	if gone && !terminal(state) {
		state = ""
	}
	m := byState(hd.JobID, state)
	r.Reason, r.Signal, r.Err = m.Reason, m.Signal, m.Err
	if r.Reason == executor.Lost {
		r.Err = fmt.Errorf("slurm job %s %s without a result file at %s (waited %v for it)", hd.JobID,
			map[bool]string{true: "left Slurm", false: "ended " + state}[state == ""], hd.Result, e.cfg.LostGrace)
	}
	return r
}

// byState is how a job that ended in Slurm's state ended for gpusched,
// when its result file does not say: interruptions are not the task's
// fault; COMPLETED, FAILED and an unknown state leave the outcome
// unknown (Lost).
func byState(id, state string) executor.Result {
	switch state {
	case "TIMEOUT", "DEADLINE":
		return executor.Result{Reason: executor.TimedOut}
	case "OUT_OF_MEMORY":
		return executor.Result{Reason: executor.Signalled, Signal: syscall.SIGKILL,
			Err: fmt.Errorf("out of memory: Slurm stopped job %s (OUT_OF_MEMORY)", id)}
	case "PREEMPTED":
		return executor.Result{Reason: executor.Preempted, Err: fmt.Errorf("slurm job %s was preempted", id)}
	case "NODE_FAIL":
		return executor.Result{Reason: executor.NodeFailure, Err: fmt.Errorf("the node of slurm job %s failed", id)}
	case "BOOT_FAIL":
		return executor.Result{Reason: executor.NodeFailure, Err: fmt.Errorf("the node of slurm job %s failed to boot", id)}
	case "CANCELLED":
		return executor.Result{Reason: executor.Cancelled, Err: fmt.Errorf("slurm job %s was cancelled outside gpusched (scancel by someone else)", id)}
	}
	return executor.Result{Reason: executor.Lost}
}
