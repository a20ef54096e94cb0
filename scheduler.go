package gpusched

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/artifact"
	"github.com/gpusched/gpusched/internal/dag"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Files and folders of a run directory.
const (
	StateFile = "state.db" // the SQLite state database
	LockFile  = "lock"     // held (flock) by the scheduler using the directory
	LogsDir   = "logs"     // logs/<task>/attempt-<n>.log
)

// Scheduler runs tasks in a run directory. Create one with New and Close it
// when done. Its methods are safe for concurrent use.
type Scheduler struct {
	runDir   string
	runTag   string // a short digest of runDir, prefix of attempt tokens
	settings Scheduling
	handlers map[string]Handler // fixed at New
	exec     executor.Executor
	probe    gpu.Probe
	smi      bool // probe is the real nvidia-smi
	// cardsRead is set once a submit has read the cards: later submits need
	// not run nvidia-smi again to check requests against the cards' sizes.
	cardsRead atomic.Bool
	engine    *engine.Engine
	lock      *os.File
}

// Option configures a Scheduler.
type Option func(*options)

type options struct {
	handlers map[string]Handler
	observer func(Event)
	exec     executor.Executor
	probe    gpu.Probe // nil: nvidia-smi
}

// WithHandler registers h for tasks of the given kind, replacing any
// built-in handler of that name.
func WithHandler(kind string, h Handler) Option {
	return func(o *options) { o.handlers[kind] = h }
}

// WithObserver has f called with every committed transition (an attempt
// started, a task completed, failed, was blocked...). f runs on the
// scheduler's loop: it must return quickly and must not call the Scheduler.
func WithObserver(f func(Event)) Option {
	return func(o *options) { o.observer = f }
}

// New opens (creating it if needed) the run directory runDir and returns a
// scheduler for it. It fails with a *LockedError if another scheduler uses
// the directory, and with a clear error if its state database is not one
// gpusched can use; nothing is overwritten then.
func New(runDir string, s Scheduling, opts ...Option) (*Scheduler, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	o := options{handlers: map[string]Handler{task.DefaultKind: CommandHandler{}}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.exec == nil {
		o.exec = &local.Executor{}
	}
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return nil, fmt.Errorf("run directory %s: %w", runDir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	lock, err := lockDir(abs)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenSQLite(filepath.Join(abs, StateFile), abs)
	if err != nil {
		lock.Close()
		return nil, err
	}
	sc := &Scheduler{runDir: abs, settings: s.withDefaults(), handlers: o.handlers, exec: o.exec, lock: lock, probe: o.probe}
	sum := sha256.Sum256([]byte(abs))
	sc.runTag = fmt.Sprintf("%x", sum[:6])
	if sc.probe == nil {
		sc.probe, sc.smi = &nvidiasmi.Probe{Timeout: sc.settings.NvidiaSMITimeout}, true
	}
	sc.engine, err = engine.Open(engine.Config{
		MaxParallel:    sc.settings.MaxParallelTasks,
		DefaultTimeout: sc.settings.DefaultTimeout,
		DefaultRetries: sc.settings.DefaultRetries,
		LogDir:         filepath.Join(abs, LogsDir),
		Store:          st,
		Runner:         runner{sc},
		Observer:       o.observer,
		Reap:           local.KillStale,
		Token:          sc.token,
		WantsEvent:     sc.wantsEvent,
		Deliver:        sc.deliver,
		OnFailure:      sc.onFailure,
		GPU: engine.GPUConfig{
			Probe:          sc.probe,
			Settings:       sc.settings.gpuSettings(),
			PollInterval:   sc.settings.GPUPollInterval,
			ReserveAfter:   sc.settings.GPUReserveAfter,
			UnknownTimeout: sc.settings.GPUUnknownTimeout,
		},
	})
	if err != nil {
		st.Close()
		lock.Close()
		return nil, err
	}
	return sc, nil
}

// lockDir takes the run directory's lock, an flock released by the kernel
// when the process dies, so a killed scheduler leaves no stale lock.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// RunDir returns the run directory's absolute path.
func (s *Scheduler) RunDir() string { return s.runDir }

// Settings returns the scheduling settings in effect, defaults filled in.
func (s *Scheduler) Settings() Scheduling { return s.settings }

// Submit adds one task; see SubmitMany.
func (s *Scheduler) Submit(t TaskSpec) error { return s.SubmitMany([]TaskSpec{t}) }

// SubmitMany adds a batch of tasks, all or none. It rejects, with a
// *TaskError or *CycleError: an invalid field, an unknown kind or a payload
// its handler refuses, a duplicate id (within the batch or against tasks
// already submitted), a dependency on a task never submitted, and a cycle.
// Tasks may depend on tasks of earlier batches, even finished ones. It works
// before and during Run, from any goroutine.
//
// A task completed in an earlier run on the same run directory stays
// complete when submitted again, provided the tasks it depends on do too;
// anything else runs again, its attempt numbers continuing.
func (s *Scheduler) SubmitMany(tasks []TaskSpec) error {
	specs, blobs, err := prepare(tasks, s.handlers)
	if err != nil {
		return err
	}
	reading, err := s.readGPUs(specs)
	if err != nil {
		return err
	}
	sub := engine.Submission{Specs: specs, JSON: blobs, Reading: reading,
		Fingerprint: make([]string, len(specs)), Resume: make([]engine.Resume, len(specs))}
	for i, sp := range specs {
		sub.Fingerprint[i] = sp.Fingerprint()
		if r, ok := s.engine.Earlier(sp.ID); ok {
			sub.Resume[i] = resumeVerdict(sp, sub.Fingerprint[i], r)
		}
	}
	return s.engine.Submit(sub)
}

// resumeVerdict says whether task sp, completed in an earlier run as row
// r, is still valid: the same definition, and its artifacts as they were.
// It reads the artifacts (and hashes them when the task asks), so it runs
// in the caller's goroutine, not the scheduler's loop.
func resumeVerdict(sp *task.Spec, fingerprint string, r *store.Row) engine.Resume {
	if r.State != task.Complete {
		return engine.Resume{}
	}
	if r.Fingerprint != "" && r.Fingerprint != fingerprint {
		why := "definition changed"
		var old task.Spec
		if err := json.Unmarshal(r.Spec, &old); err == nil {
			old.Normalize()
			if changed := sp.Changed(&old); len(changed) > 0 {
				why += ": " + strings.Join(changed, ", ")
			}
		}
		return engine.Resume{Why: why}
	}
	if why := artifact.Intact(sp, r.Artifacts); why != "" {
		return engine.Resume{Why: why}
	}
	return engine.Resume{Intact: true}
}

// readGPUs reads the GPUs when a batch has GPU tasks and no earlier batch
// has read them, so that the engine can refuse requests no card can hold.
// A machine without nvidia-smi refuses GPU tasks at once; an nvidia-smi
// that fails leaves the state unknown, and the tasks wait (status says
// why). A batch without GPU tasks never runs nvidia-smi.
func (s *Scheduler) readGPUs(specs []*task.Spec) (*engine.Reading, error) {
	i := slices.IndexFunc(specs, func(sp *task.Spec) bool { return sp.Resources.GPU() })
	if i < 0 {
		return nil, nil
	}
	if s.smi {
		if _, err := nvidiasmi.Bin(); err != nil {
			return nil, noSMI(specs[i].ID)
		}
	}
	if s.cardsRead.Load() {
		return nil, nil // the engine knows the cards; their sizes do not change
	}
	snap, err := s.probe.Snapshot(context.Background())
	if err == nil {
		s.cardsRead.Store(true)
	}
	return &engine.Reading{Snap: snap, Err: err}, nil
}

// ValidateTasks runs every check SubmitMany would on a fresh scheduler with
// the built-in handlers, without a run directory: nothing is written and
// nothing runs.
func ValidateTasks(tasks []TaskSpec) error {
	specs, _, err := prepare(tasks, map[string]Handler{task.DefaultKind: CommandHandler{}})
	if err != nil {
		return err
	}
	return dag.CheckBatch(specs, map[string]struct{}{})
}

// prepare copies, normalizes and validates each spec on its own, and
// encodes it for the state database.
func prepare(tasks []TaskSpec, handlers map[string]Handler) ([]*task.Spec, [][]byte, error) {
	specs := make([]*task.Spec, len(tasks))
	blobs := make([][]byte, len(tasks))
	for i := range tasks {
		sp := tasks[i] // a copy: the caller may reuse its slice
		sp.Dependencies = slices.Clone(sp.Dependencies)
		sp.Env = maps.Clone(sp.Env)
		sp.Normalize()
		if err := sp.Validate(); err != nil {
			return nil, nil, err
		}
		h, ok := handlers[sp.Kind]
		if !ok {
			return nil, nil, &TaskError{TaskID: sp.ID, Field: "kind", Reason: fmt.Sprintf("no handler is registered for kind %q", sp.Kind), Kind: ErrUnknownKind}
		}
		if v, ok := h.(PayloadValidator); ok {
			if err := v.ValidatePayload(&sp); err != nil {
				return nil, nil, err
			}
		}
		b, err := json.Marshal(&sp)
		if err != nil {
			return nil, nil, &TaskError{TaskID: sp.ID, Field: "payload", Reason: "cannot be saved as JSON: " + err.Error(), Kind: ErrInvalidTask}
		}
		specs[i], blobs[i] = &sp, b
	}
	return specs, blobs, nil
}

// Run runs tasks until nothing more can run and returns every submitted
// task's record, in submission order. Run returns a nil error when it ran to
// the end, whatever the tasks' fates; check each Record's State. If ctx is
// done first, running attempts are stopped as at a timeout and recorded
// cancelled, tasks not yet started stay pending, and Run returns ctx's
// error.
func (s *Scheduler) Run(ctx context.Context) ([]Record, error) {
	return s.engine.Run(ctx)
}

// Cancel cancels task id: a pending task never starts; a running one is
// stopped (SIGTERM to its process group, SIGKILL after KillGrace). It ends
// cancelled, and its dependents blocked. Cancelling a finished task does
// nothing. An unknown id is an ErrUnknownTask error.
func (s *Scheduler) Cancel(id string) error { return s.engine.Cancel(id) }

// StopNow stops every running attempt at once with SIGKILL, skipping
// KillGrace, and ends the Run in progress as a cancelled context would
// (tasks not started stay pending). It is for a second Ctrl-C: the first
// cancels Run's context, which stops attempts gracefully.
func (s *Scheduler) StopNow() { s.engine.StopNow() }

// Records returns every submitted task's record, in submission order.
func (s *Scheduler) Records() []Record { return s.engine.Records() }

// Close stops running attempts, waits for them, closes the state database
// and releases the run directory.
func (s *Scheduler) Close() error {
	err := s.engine.Close()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	// Unlock explicitly: a child being forked by another goroutine holds a
	// copy of the descriptor until it execs, and closing ours alone would
	// leave the lock held by that copy for a moment.
	_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
	s.lock.Close()
	return err
}

// runner carries out attempts for the engine: handler, executor, verdict.
type runner struct{ s *Scheduler }

func (r runner) Run(ctx context.Context, req engine.AttemptRequest, started func(executor.Process)) engine.Outcome {
	h := r.s.handlers[req.Spec.Kind]
	if p, ok := h.(Preparer); ok {
		if err := p.Prepare(ctx, req.Spec, req.Number); err != nil {
			return failBeforeStart(req, fmt.Errorf("prepare: %w", err))
		}
	}
	cmd, err := h.Command(ctx, req.Spec, req.Number)
	if err != nil {
		return failBeforeStart(req, fmt.Errorf("prepare command: %w", err))
	}
	dir := cmd.Dir
	if dir == "" {
		dir = req.Spec.Dir
	}
	job := executor.Job{
		TaskID:    req.Spec.ID,
		Attempt:   req.Number,
		Args:      cmd.Args,
		Env:       r.env(req, cmd.Env),
		Dir:       dir,
		LogPath:   req.LogPath,
		LogRoot:   r.s.runDir,
		KillGrace: r.s.settings.KillGrace,
		KillNow:   req.KillNow,
		Token:     r.s.token(req.Spec.ID, req.Number),
	}
	res := r.s.exec.Execute(ctx, job, started)
	out := engine.Outcome{Result: res}
	if res.Err != nil {
		out.Verdict = res.Err
		return out
	}
	ar := AttemptResult{Attempt: req.Number, ExitCode: res.ExitCode, LogPath: req.LogPath}
	if res.Signal != 0 {
		ar.Signal = executor.SignalName(res.Signal)
	}
	out.Verdict = h.Judge(req.Spec, ar)
	if out.Verdict == nil && len(req.Spec.Artifacts) > 0 {
		out.Artifacts, out.Verdict = artifact.Collect(req.Spec)
		if c, ok := h.(ArtifactChecker); ok && out.Verdict == nil {
			if err := c.CheckArtifacts(ctx, req.Spec, out.Artifacts); err != nil {
				out.Verdict = fmt.Errorf("artifact check: %w", err)
			}
		}
	}
	if o, ok := h.(AttemptObserver); ok {
		if err := o.AfterAttempt(ctx, req.Spec, ar); err != nil {
			if out.Verdict == nil {
				out.Verdict = fmt.Errorf("after attempt: %w", err)
			} else {
				out.Verdict = fmt.Errorf("%w; after attempt: %v", out.Verdict, err)
			}
		}
	}
	if out.Verdict != nil && req.GPU != nil {
		out.OOM, out.OOMTriedMiB = gpu.DetectOOM(logTail(req.LogPath, 64<<10))
	}
	return out
}

// token names an attempt of this run directory in its processes'
// environment, so that a scheduler resuming after a crash finds them all.
func (s *Scheduler) token(taskID string, attempt int) string {
	return s.runTag + "." + taskID + "." + strconv.Itoa(attempt)
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

// deliver hands a completion event to its kind's handler.
func (s *Scheduler) deliver(ctx context.Context, d engine.Delivery) error {
	ch, ok := s.handlers[d.Spec.Kind].(CompletionHandler)
	if !ok {
		return fmt.Errorf("no completion handler is registered for kind %q", d.Spec.Kind)
	}
	return ch.OnComplete(ctx, CompletionEvent{
		ID: d.EventID, TaskID: d.TaskID, Attempt: d.Attempt, Spec: d.Spec, Tries: d.Tries,
		LogPath: filepath.Join(s.runDir, LogsDir, d.TaskID, fmt.Sprintf("event-%d.log", d.EventID)),
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
	if err := fh.OnFailure(ctx, sp, rec); err != nil {
		if a := rec.LastAttempt(); a != nil && a.LogPath != "" {
			if f, ferr := os.OpenFile(a.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); ferr == nil {
				fmt.Fprintf(f, "gpusched: failure handler: %v\n", err)
				f.Close()
			}
		}
	}
}

// logTail returns up to n bytes from the end of the file at path.
func logTail(path string, n int64) []byte {
	f, err := os.Open(path)
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

// env is the attempt's environment: the scheduler's own, the command's
// additions, then gpusched's variables, which always win.
func (r runner) env(req engine.AttemptRequest, extra map[string]string) []string {
	vars := []string{
		"GPUSCHED_TASK_ID=" + req.Spec.ID,
		"GPUSCHED_ATTEMPT=" + strconv.Itoa(req.Number),
		"GPUSCHED_RUN_DIR=" + r.s.runDir,
		local.TokenVar + "=" + r.s.token(req.Spec.ID, req.Number),
	}
	if g := req.GPU; g != nil {
		// Exactly the card it was admitted to, numbered as nvidia-smi does.
		vars = append(vars,
			"CUDA_VISIBLE_DEVICES="+strconv.Itoa(g.Index),
			"CUDA_DEVICE_ORDER=PCI_BUS_ID",
			"GPUSCHED_GPU_INDEX="+strconv.Itoa(g.Index),
			"GPUSCHED_GPU_UUID="+g.UUID,
			"GPUSCHED_GPU_MEMORY_MIB="+strconv.FormatInt(g.MemoryMiB, 10),
		)
	} else {
		// No card: a CPU task must not take GPU memory nobody accounts for.
		vars = append(vars, "CUDA_VISIBLE_DEVICES=")
	}
	return environ(vars, extra)
}

// environ is the environment of a process gpusched starts: its own, then
// the variables of each map in turn, then vars (KEY=VALUE), which always
// win; a variable set twice keeps its last value.
func environ(vars []string, extras ...map[string]string) []string {
	env := os.Environ()
	for _, extra := range extras {
		for k, v := range extra {
			env = append(env, k+"="+v)
		}
	}
	return dedupEnv(append(env, vars...))
}

// dedupEnv keeps the last value of each variable, as a shell would.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}

func failBeforeStart(req engine.AttemptRequest, err error) engine.Outcome {
	if mkErr := os.MkdirAll(filepath.Dir(req.LogPath), 0o755); mkErr == nil {
		_ = os.WriteFile(req.LogPath, []byte("gpusched: "+err.Error()+"\n"), 0o644)
	}
	return engine.Outcome{Result: executor.Result{Err: err}, Verdict: err}
}
