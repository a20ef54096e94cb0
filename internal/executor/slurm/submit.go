package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// sbatchArgs are the arguments of the sbatch call that submits job, held,
// with its batch script at f.script.
func sbatchArgs(job executor.Job, f files) []string {
	args := []string{"--parsable", "--hold",
		"--job-name=" + jobName(job), "--comment=" + comment(job),
		"--export=NONE", "--output=" + job.LogPath, "--open-mode=append",
		"--chdir=" + filepath.Dir(f.script)}
	if job.Timeout > 0 {
		args = append(args, "--time="+strconv.Itoa(timeLimitMinutes(job.Timeout, job.KillGrace)))
	}
	if gres, _ := gresFor(job); gres != "" {
		args = append(args, "--gres="+gres)
	}
	opt := func(name, v string) {
		if v != "" {
			args = append(args, "--"+name+"="+v)
		}
	}
	s := job.Slurm
	if s != nil {
		opt("partition", s.Partition)
		opt("account", s.Account)
		opt("qos", s.QOS)
		opt("constraint", s.Constraint)
	}
	cpus, mem := hostAsk(s, job.CPUs, job.MemoryMiBHost)
	if cpus > 0 {
		opt("cpus-per-task", strconv.Itoa(cpus))
	}
	opt("mem", mem)
	if s != nil {
		args = append(args, s.ExtraArgs...)
	}
	return append(args, f.script)
}

// hostAsk is what a job asks of its node's cores and memory:
// slurm.cpus_per_task, else the task's resources.cpus when above 1 (0:
// Slurm's default, one); slurm.mem, else its memory_mib_host in MiB
// ("24000M"; "": Slurm's default). The slurm: keys win, as options meant
// for Slurm alone. gpusched slurm check judges the same numbers.
func hostAsk(s *task.SlurmSettings, cpus int, hostMiB int64) (cpusPerTask int, mem string) {
	if s != nil {
		cpusPerTask, mem = s.CPUsPerTask, s.Mem
	}
	if cpusPerTask <= 0 && cpus > 1 {
		cpusPerTask = cpus
	}
	if mem == "" && hostMiB > 0 {
		mem = strconv.FormatInt(hostMiB, 10) + "M"
	}
	return max(cpusPerTask, 0), mem
}

// gresFor is the generic resource job asks of Slurm: job.GPUs GPUs (the
// task's resources.gpus, "gpu:N"), each of the type of its
// slurm.gpu_types that the smallest holds its GPU memory budget
// ("gpu:TYPE:N"; see task.SlurmSettings.GPUType);
// "" for a job without GPUs. Without gpu_types, or without a budget (an
// exclusive task), any type. A budget larger than every type asks for
// the largest, and note says so, for the attempt's log.
func gresFor(job executor.Job) (gres, note string) {
	if job.GPUs <= 0 {
		return "", ""
	}
	n := strconv.Itoa(job.GPUs)
	if job.GPUMiB <= 0 {
		return "gpu:" + n, ""
	}
	name, mib, fits := job.Slurm.GPUType(job.GPUMiB)
	switch {
	case name == "":
		return "gpu:" + n, ""
	case !fits:
		note = fmt.Sprintf("a GPU memory budget of %d MiB is more than any type in slurm.gpu_types has: asking for the largest, %s (%d MiB), where the task may run out of memory again",
			job.GPUMiB, name, mib)
	}
	return "gpu:" + name + ":" + n, note
}

// timeLimitMinutes is a job's --time: its timeout and kill grace, rounded
// up to whole minutes (Slurm's unit), at least 1. The helper stops the
// task at its timeout itself, to the second; Slurm's limit is the
// backstop for a helper that could not.
func timeLimitMinutes(timeout, grace time.Duration) int {
	d := timeout + max(grace, 0)
	return max(1, int((d+time.Minute-1)/time.Minute))
}

// limiter bounds submissions: at most slots sbatch calls at once, and at
// most one start per every.
type limiter struct {
	slots chan struct{}
	every time.Duration
	mu    sync.Mutex // guards next
	next  time.Time
}

func newLimiter(inFlight int, perSecond float64) *limiter {
	return &limiter{slots: make(chan struct{}, inFlight), every: time.Duration(float64(time.Second) / perSecond)}
}

// wait takes a slot when the rate allows; release gives it back.
func (l *limiter) wait(ctx context.Context) (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	now := time.Now()
	at := now
	if l.next.After(now) {
		at = l.next
	}
	l.next = at.Add(l.every)
	l.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			<-l.slots
			return nil, ctx.Err()
		}
	}
	return func() { <-l.slots }, nil
}

// submit hands job to Slurm, held, and returns its job id. It waits for
// the rate limit; while the controller does not answer it waits and
// tries again (first looking for the job by name, in case the failed
// call did submit it); a refusal is tried again SubmitRetries times with
// backoff, then returned, marked executor.ErrCommand (the settings are
// wrong). It returns ctx's error when ctx is done first. While it waits
// for the controller, rep is told so.
func (e *Executor) submit(ctx context.Context, job executor.Job, f files, rep *reporter) (string, error) {
	args := sbatchArgs(job, f)
	refused := 0
	uncertain := false // an earlier call may have submitted the job
	for {
		if down, since, _ := e.health.state(); down {
			rep.report(unreachable(since))
		}
		if err := e.waitUp(ctx); err != nil {
			return "", err
		}
		if uncertain {
			if s, ok, err := e.findByName(ctx, jobName(job)); err == nil && ok {
				return s.ID, nil
			}
		}
		release, err := e.lim.wait(ctx)
		if err != nil {
			return "", err
		}
		out, err := e.cmds.Run(ctx, "sbatch", args...)
		release()
		err = classify(err)
		e.health.note(err)
		if err == nil {
			return parseJobID(out)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, ErrUnreachable) {
			uncertain = true
			continue // waitUp waits for the controller
		}
		refused++
		if refused > e.cfg.SubmitRetries {
			return "", executor.CommandFault(fmt.Errorf("submit task %s: %w", job.TaskID, err))
		}
		if err := sleepCtx(ctx, backoff(refused)); err != nil {
			return "", err
		}
	}
}

// waitUp returns once the controller last answered, or after the time
// health asks to wait before trying it again.
func (e *Executor) waitUp(ctx context.Context) error {
	if e.health.up() {
		return ctx.Err()
	}
	return sleepCtx(ctx, e.health.retryIn())
}

// backoff is the wait before try n+1 of a refused submission: 1 s,
// doubling, at most 30 s.
func backoff(n int) time.Duration {
	return min(time.Second<<min(n-1, 5), 30*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// findByName looks for a job named name (any state Slurm remembers);
// ok is false when there is none. Of several, a job still queued or
// running is preferred, then the newest.
func (e *Executor) findByName(ctx context.Context, name string) (jobState, bool, error) {
	out, err := e.cmds.Run(ctx, "squeue", "--name="+name, "--states=all", "--noheader", "--format="+queueFormat)
	err = classify(err)
	e.health.note(err)
	if err != nil {
		return jobState{}, false, err
	}
	jobs, err := parseQueue(out)
	if err != nil || len(jobs) == 0 {
		return jobState{}, false, err
	}
	best := jobs[0]
	for _, j := range jobs[1:] {
		bt, jt := terminal(best.State), terminal(j.State)
		bn, _ := strconv.ParseUint(best.ID, 10, 64)
		jn, _ := strconv.ParseUint(j.ID, 10, 64)
		if bt && !jt || bt == jt && jn > bn {
			best = j
		}
	}
	return best, true, nil
}

// release lets held jobs run, trying again while the controller does not
// answer; the jobs' state confirms it.
func (e *Executor) release(ctx context.Context, ids ...string) error {
	for {
		_, err := e.cmds.Run(ctx, "scontrol", "release", joinIDs(ids))
		err = classify(err)
		e.health.note(err)
		if err == nil || !errors.Is(err, ErrUnreachable) {
			return err
		}
		if err := e.waitUp(ctx); err != nil {
			return err
		}
	}
}

func joinIDs(ids []string) string { return strings.Join(ids, ",") }
