package gpusched

// What the engine calls back into the public package for: running an
// attempt through its kind's handler and the executor, naming attempts for
// their processes, and handing completion events and failures to handlers.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/artifact"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// runner carries out attempts for the engine: handler, executor, verdict.
type runner struct{ s *Scheduler }

// HonoursGate: Run builds the command of the built-in command kind, reads
// the inputs, makes the environment and hands the attempt to its executor
// while req.Gate blocks (the engine commits the start meanwhile); a kind's
// own Prepare and Command (code of the program's, which may act), a line
// in the log, and the executor's start (Job.Gate, or the gate awaited
// here for an executor that does not honour it) wait for it.
func (runner) HonoursGate() {}

var _ engine.GatedRunner = runner{}

func (r runner) Run(ctx context.Context, req engine.AttemptRequest, hooks executor.Hooks) engine.Outcome {
	h := r.s.handlers[req.Spec.Kind]
	t := publicSpec(req.Spec) // the task as the handler sees it
	gate := req.Gate
	if gate == nil {
		gate = func() error { return nil }
	}
	if _, builtIn := h.(CommandHandler); !builtIn {
		if err := gate(); err != nil {
			return engine.Outcome{Result: executor.Result{Err: err}, Verdict: err}
		}
	}
	as, err := runAs(req.Spec)
	if err != nil {
		if gerr := gate(); gerr != nil {
			return engine.Outcome{Result: executor.Result{Err: gerr}, Verdict: gerr}
		}
		if os.Geteuid() == 0 {
			// Its log folder is the owner's: root writes nothing there.
			// An owner who is no longer a user is still a uid, and the
			// reason is written with that uid's rights, as its log would
			// have been.
			if uid, perr := strconv.ParseUint(req.Spec.Owner, 10, 32); perr == nil {
				gone := &executor.User{UID: uint32(uid), GID: noGroup, Name: "uid " + req.Spec.Owner}
				return r.failBeforeStart(req, gone, err, gate)
			}
			return engine.Outcome{Result: executor.Result{Err: err}, Verdict: err}
		}
		return r.failBeforeStart(req, nil, err, gate)
	}
	ex, err := r.s.executorFor(req.Spec)
	if err != nil {
		return r.failBeforeStart(req, as, err, gate)
	}
	if p, ok := h.(Preparer); ok {
		if err := p.Prepare(ctx, t, req.Number); err != nil {
			return r.failBeforeStart(req, as, fmt.Errorf("prepare: %w", err), gate)
		}
	}
	cmd, err := h.Command(ctx, t, req.Number)
	if err != nil {
		return r.failBeforeStart(req, as, fmt.Errorf("prepare command: %w", err), gate)
	}
	dir := cmd.Dir
	if dir == "" {
		dir = req.Spec.Dir
	}
	// The inputs as the attempt finds them: what is saved if it
	// completes, so that an input changed while it runs makes it run
	// again next time.
	inputs, err := r.inputs(ctx, req.Spec)
	if err != nil {
		if ctx.Err() == nil {
			err = executor.CommandFault(err) // its inputs name what cannot be one
		}
		return r.failBeforeStart(req, as, err, gate)
	}
	job := r.job(req)
	job.Args, job.Env, job.Dir, job.User = cmd.Args, r.env(req, cmd.Env), dir, as
	if _, ok := ex.(executor.Gated); ok {
		job.Gate = gate
	} else if err := gate(); err != nil {
		return engine.Outcome{Result: executor.Result{Err: err}, Verdict: err}
	}
	res := ex.Execute(ctx, job, hooks)
	if !res.Started {
		if err := gate(); err != nil {
			return engine.Outcome{Result: res, Verdict: err} // the engine reports it as never run
		}
	}
	out := r.judge(ctx, req, res)
	if out.Verdict == nil {
		out.Inputs = inputs
	}
	return out
}

// inputs reads sp's inputs now (artifact.Inputs), hashing only the files
// that changed since the earlier run recorded them.
func (r runner) inputs(ctx context.Context, sp *task.Spec) ([]task.Input, error) {
	if len(sp.Inputs) == 0 {
		return nil, nil
	}
	var prev []task.Input
	if row, ok := r.s.engine.Earlier(sp.ID); ok {
		prev = row.Inputs
	}
	ins, err := artifact.Inputs(ctx, sp, prev)
	if err != nil {
		return nil, fmt.Errorf("read inputs: %w", err)
	}
	return ins, nil
}

// job is the executor's job for an attempt, less what its handler makes of
// the task (Args, Env, Dir): what is needed to find it again, too.
func (r runner) job(req engine.AttemptRequest) executor.Job {
	return executor.Job{
		TaskID:    req.Spec.ID,
		Attempt:   req.Number,
		LogPath:   req.LogPath,
		Timeout:   req.Timeout,
		KillGrace: r.s.settings.KillGrace,
		KillNow:   req.KillNow,
		LogRoot:   r.s.runDir,
		Token:     r.s.token(req.Spec.ID, req.Number),
		GPUs:      gpus(req.Spec),
		GPUMiB:    req.GPUMiB,
		Slurm:     req.Spec.Slurm,
		CPUs:      req.Spec.Resources.CPUs,
		// The budget as chosen, when it is learned (memory_mib_host: auto).
		MemoryMiBHost: req.Spec.Resources.MemoryMiBHost,
	}
}

// gpus is how many whole GPUs sp asks of an executor that places work
// itself: resources.gpus (one when it says nothing) for a GPU task, none
// for a CPU task.
func gpus(sp *task.Spec) int { return sp.Resources.GPUCount() }

// runAs is whom sp's attempts run as: nil for the scheduler's own user
// (sp has no Owner, or it is the scheduler's), else its owner's account,
// which only a scheduler running as root can take. A scheduler that is
// not root cannot run another user's task, and an owner who is no longer
// a user cannot run anything: both are the task's fault, and it fails at
// once (executor.CommandFault).
func runAs(sp *task.Spec) (*executor.User, error) {
	uid, other, err := otherOwner(sp)
	if err != nil || !other {
		return nil, err
	}
	if me := os.Geteuid(); me != 0 {
		return nil, executor.CommandFault(fmt.Errorf("task %s belongs to user %s, and this scheduler runs as user %s, not root: it can run tasks as its own user only",
			sp.ID, userName(uint32(uid)), userName(uint32(me))))
	}
	u, err := executor.LookupUser(uid)
	if err != nil {
		return nil, executor.CommandFault(fmt.Errorf("task %s cannot run as its owner: %w", sp.ID, err))
	}
	return u, nil
}

// otherOwner returns the uid of sp's owner, and whether that is another
// user than the one this scheduler runs as.
func otherOwner(sp *task.Spec) (uint32, bool, error) {
	if sp.Owner == "" {
		return 0, false, nil
	}
	uid, err := strconv.ParseUint(sp.Owner, 10, 32)
	if err != nil {
		return 0, false, executor.CommandFault(fmt.Errorf("task %s: owner %q is not a uid", sp.ID, sp.Owner))
	}
	return uint32(uid), uid != uint64(os.Geteuid()), nil
}

// noGroup is the group a log written for an owner who is no longer a
// user is given (the kernel's overflow gid, "nogroup"): their primary
// group is not known any more.
const noGroup = 65534

// userName returns uid's login name with the uid ("alice (1000)"), or
// the uid alone.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (" + id + ")"
	}
	return id
}

// Recover asks each executor, once, about the orphans whose handles it
// made (or, for an orphan without a handle, its task's executor's).
func (r runner) Recover(orphans []engine.Orphan) []executor.Recovery {
	out := make([]executor.Recovery, len(orphans))
	byExec := map[string][]int{}
	var names []string
	for i, o := range orphans {
		name := o.Handle.Executor
		if name == "" {
			name = cmp.Or(specExecutor(o.Req.Spec), r.s.defaultExecutor)
		}
		if _, ok := byExec[name]; !ok {
			names = append(names, name)
		}
		byExec[name] = append(byExec[name], i)
	}
	for _, name := range names {
		idx := byExec[name]
		ex := r.s.executors[name]
		if ex == nil {
			// Its executor is not registered in this scheduler: nothing
			// can find the attempt.
			for _, i := range idx {
				out[i].Result = executor.Result{Reason: executor.Lost, End: time.Now(),
					Err: fmt.Errorf("its executor %q is not registered in this scheduler", name)}
			}
			continue
		}
		batch := make([]executor.Orphan, len(idx))
		for k, i := range idx {
			batch[k] = executor.Orphan{Job: r.job(orphans[i].Req), Handle: orphans[i].Handle, Progress: orphans[i].Progress}
			if name == local.Name {
				r.s.localRunning = append(r.s.localRunning, batch[k].Job.Token)
			}
		}
		for k, rc := range ex.Recover(batch) {
			out[idx[k]] = rc
		}
	}
	return out
}

// Signal sends sig to a running attempt through the executor that made
// its handle, when that executor can (executor.Signaler).
func (r runner) Signal(h executor.Handle, sig syscall.Signal) error {
	sg, ok := r.s.executors[h.Executor].(executor.Signaler)
	if !ok {
		return fmt.Errorf("executor %q cannot signal its attempts", h.Executor)
	}
	return sg.Signal(h, sig)
}

var _ engine.Signaler = runner{}

// Finish judges the result of an attempt recovered after a crash (see
// judge). What its inputs were when it started is lost with the
// scheduler that started it: they are read now. If they cannot be, none
// are saved, and the next run, finding inputs where none were saved,
// runs the task again.
func (r runner) Finish(ctx context.Context, req engine.AttemptRequest, res executor.Result) engine.Outcome {
	out := r.judge(ctx, req, res)
	if out.Verdict == nil {
		out.Inputs, _ = r.inputs(ctx, req.Spec)
	}
	return out
}

// judge judges an attempt's result: its kind's handler, its artifacts,
// and, for a GPU task that failed (on a card here, or wherever its
// executor placed it), whether it ran out of GPU memory.
func (r runner) judge(ctx context.Context, req engine.AttemptRequest, res executor.Result) engine.Outcome {
	h := r.s.handlers[req.Spec.Kind]
	t := publicSpec(req.Spec)
	out := engine.Outcome{Result: res}
	if res.Err != nil {
		out.Verdict = res.Err
		return out
	}
	ar := AttemptResult{Attempt: req.Number, ExitCode: res.ExitCode, LogPath: req.LogPath}
	if res.Signal != 0 {
		ar.Signal = executor.SignalName(res.Signal)
	}
	out.Verdict = h.Judge(t, ar)
	if out.Verdict == nil && len(req.Spec.Artifacts) > 0 {
		out.Artifacts, out.Verdict = artifact.Collect(ctx, req.Spec)
		if c, ok := h.(ArtifactChecker); ok && out.Verdict == nil {
			arts := make([]Artifact, len(out.Artifacts))
			for i, a := range out.Artifacts {
				arts[i] = Artifact(a)
			}
			if err := c.CheckArtifacts(ctx, t, arts); err != nil {
				out.Verdict = fmt.Errorf("artifact check: %w", err)
			}
		}
	}
	if o, ok := h.(AttemptObserver); ok {
		if err := o.AfterAttempt(ctx, t, ar); err != nil {
			if out.Verdict == nil {
				out.Verdict = fmt.Errorf("after attempt: %w", err)
			} else {
				out.Verdict = fmt.Errorf("%w; after attempt: %v", out.Verdict, err)
			}
		}
	}
	if out.Verdict != nil && req.Spec.Resources.GPU() {
		out.OOM, out.OOMTriedMiB = gpu.DetectOOM(r.logTail(req, 64<<10))
	}
	return out
}

// token names an attempt of this run directory in its processes'
// environment, so that a scheduler resuming after a crash finds them all.
func (s *Scheduler) token(taskID string, attempt int) string {
	return s.runTag + "." + taskID + "." + strconv.Itoa(attempt)
}

// runTag is a short digest of an absolute run directory's path.
func runTag(absRunDir string) string {
	sum := sha256.Sum256([]byte(absRunDir))
	return fmt.Sprintf("%x", sum[:6])
}

// wantsEvent: a completion produces an outbox event when the kind has a
// completion handler with something to do.
func (s *Scheduler) wantsEvent(sp *task.Spec) bool {
	switch h := s.handlers[sp.Kind].(type) {
	case CommandHandler:
		return len(sp.OnComplete) > 0
	case CompletionHandler:
		return h != nil
	}
	return false
}

// deliver hands an outbox event to what delivers it: a completion event
// to its kind's completion handler, the others as notify.go says.
func (s *Scheduler) deliver(ctx context.Context, d engine.Delivery) error {
	switch d.Kind {
	case store.EventFailure:
		return s.deliverFailure(ctx, d)
	case store.EventRunEnd:
		return s.deliverRunEnd(ctx, d)
	case store.EventWebhook:
		return s.postWebhook(ctx, d)
	}
	ch, ok := s.handlers[d.Spec.Kind].(CompletionHandler)
	if !ok {
		return fmt.Errorf("no completion handler is registered for kind %q", d.Spec.Kind)
	}
	return ch.OnComplete(ctx, CompletionEvent{
		ID: d.EventID, TaskID: d.TaskID, Attempt: d.Attempt, Spec: publicSpec(d.Spec), Tries: d.Tries,
		LogPath: s.eventLog(d),
		RunDir:  s.runDir,
		Env:     map[string]string{"GPUSCHED_RUN_DIR": s.runDir},
	})
}

// onFailure tells the kind's failure handler, best effort.
func (s *Scheduler) onFailure(sp *task.Spec, rec task.Record) {
	fh, ok := s.handlers[sp.Kind].(FailureHandler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fh.OnFailure(ctx, publicSpec(sp), publicRecord(rec)); err != nil {
		if a := rec.LastAttempt(); a != nil && a.LogPath != "" {
			as, aerr := runAs(sp)
			if aerr != nil {
				return // not written with rights the task's owner lacks
			}
			if f, ferr := local.OpenLogAs(s.runDir, a.LogPath, as); ferr == nil {
				fmt.Fprintf(f, "gpusched: failure handler: %v\n", err)
				f.Close()
			}
		}
	}
}

// logTail returns up to n bytes from the end of req's log. The log of
// an attempt that ran as another user is in a folder of that user's, who
// could plant a link or a FIFO there: it is read without following a
// link, and only if it is a regular file of theirs (local.ReadLog).
func (r runner) logTail(req engine.AttemptRequest, n int64) []byte {
	// The owner's uid alone is needed: no lookup in the user database.
	uid, other, err := otherOwner(req.Spec)
	if err != nil {
		return nil
	}
	var f *os.File
	if other {
		f, err = local.ReadLog(r.s.runDir, req.LogPath, int(uid))
	} else {
		f, err = os.Open(req.LogPath)
	}
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return b
}

// failBeforeStart ends an attempt that failed before its command ran,
// saying why in its log (never written through a link planted in the run
// directory; as user as, when the attempt was to run as another user),
// once gate has returned nil: an attempt whose start was not committed
// leaves no line.
func (r runner) failBeforeStart(req engine.AttemptRequest, as *executor.User, err error, gate func() error) engine.Outcome {
	if gerr := gate(); gerr != nil {
		return engine.Outcome{Result: executor.Result{Err: gerr}, Verdict: gerr}
	}
	if f, ferr := local.OpenLogAs(r.s.runDir, req.LogPath, as); ferr == nil {
		fmt.Fprintf(f, "gpusched: %v\n", err)
		f.Close()
	}
	return engine.Outcome{Result: executor.Result{Err: err}, Verdict: err}
}
