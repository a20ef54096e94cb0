package gpusched

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"time"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/executor/slurm"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Files and folders of a run directory.
const (
	StateFile = "state.db" // the SQLite state database
	LockFile  = "lock"     // held (flock) by the scheduler using the directory
	LogsDir   = "logs"     // logs/<task>.attempt-<n>.log (engine.AttemptLog), logs/<task>.event-<id>.log
)

// Scheduler runs tasks in a run directory. Create one with New and Close it
// when done. Its methods are safe for concurrent use.
type Scheduler struct {
	runDir   string
	runTag   string // a short digest of runDir, prefix of attempt tokens
	settings Scheduling
	handlers map[string]Handler // fixed at New
	// executors by name, fixed at New; defaultExecutor runs the tasks
	// that name none.
	executors       map[string]executor.Executor
	defaultExecutor string
	probe           gpu.Probe
	smi             bool // probe is the real nvidia-smi
	engine          *engine.Engine
	lock            *os.File
	qualified       bool   // task ids may be RUN/TASK (WithQualifiedIDs)
	userAgent       string // of webhook requests (WithUserAgent)
	// history finds the earlier attempts of an auto-budget task
	// (WithBudgetHistory); nil: the run directory's rows.
	history func(TaskSpec) []Attempt
	// localRunning holds the tokens of the local attempts the state
	// showed running, gathered while New opens the engine, for the local
	// executor's Sweep (forget.go); nil after.
	localRunning []string
}

// Option configures a Scheduler.
type Option func(*options)

type options struct {
	handlers  map[string]Handler
	observer  func(Event)
	executors map[string]executor.Executor
	probe     gpu.Probe                // nil: nvidia-smi
	qualified bool                     // WithQualifiedIDs
	retire    bool                     // WithRetirement
	userAgent string                   // WithUserAgent
	history   func(TaskSpec) []Attempt // WithBudgetHistory
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
	r, err := reserve(context.Background(), runDir, false)
	if err != nil {
		return nil, err
	}
	return r.New(s, opts...)
}

// Reservation is a run directory taken for a scheduler whose settings are
// not known yet (Reserve): its lock is held, its state database checked
// and its tasks read, and nothing in it changed. Call New or Release.
type Reservation struct {
	dir  string   // absolute
	lock *os.File // nil once New or Release has taken it
	// checked: the state database, file, was checked (store.LoadForOpen)
	// and is opened without checking it again.
	checked bool
	file    os.FileInfo
	// rows are the state database's tasks, read with the check, for the
	// engine New opens on it (nil: not read, or handed over).
	rows []store.Row
}

// Reserve takes the run directory runDir as New does (creating it if
// needed; a *LockedError when another scheduler uses it), checks its
// state database (SQLite's quick_check, which reads every page) and reads
// its tasks, writing nothing in it: the first half of New, the half that
// needs no settings.
// A caller can so read and check its workflow at the same time, on
// another core, then call New with the workflow's settings, or Release
// when the workflow turns out invalid, leaving the run directory's state
// as it was. ctx, when done, cuts short the wait for a lock held by a
// scheduler that is leaving (which New waits for up to a second); it does
// not stop the check.
//
// Errors are New's: a state database that is not gpusched's, too new or
// damaged is refused here with the error New would give.
func Reserve(ctx context.Context, runDir string) (*Reservation, error) {
	return reserve(ctx, runDir, true)
}

// reserve is Reserve, checking the state database only with check.
func reserve(ctx context.Context, runDir string, check bool) (*Reservation, error) {
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return nil, fmt.Errorf("run directory %s: %w", runDir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	wait, leaving := lockPatience()
	lock, err := lockDirWaiting(abs, wait, leaving, ctx.Done())
	if err != nil {
		return nil, err
	}
	r := &Reservation{dir: abs, lock: lock}
	if !check {
		return r, nil
	}
	path := filepath.Join(abs, StateFile)
	rows, current, err := store.LoadForOpen(path, abs)
	if err != nil {
		r.Release()
		return nil, err
	}
	if current {
		if fi, err := os.Stat(path); err == nil {
			r.checked, r.file, r.rows = true, fi, rows
		}
	}
	return r, nil
}

// Release gives the run directory back, unchanged, without opening a
// scheduler on it. It does nothing after New.
func (r *Reservation) Release() {
	if r.lock == nil {
		return
	}
	unlockDir(r.lock)
	r.lock, r.rows = nil, nil
}

// New returns a scheduler for the reserved run directory, as the
// package's New does, without checking its state database again. The
// scheduler takes the reservation over: when New fails, the run directory
// is released. New may be called once.
func (r *Reservation) New(s Scheduling, opts ...Option) (*Scheduler, error) {
	if r.lock == nil {
		return nil, errors.New("run directory reservation already used")
	}
	lock, rows := r.lock, r.rows
	r.lock, r.rows = nil, nil
	fail := func(err error) (*Scheduler, error) {
		unlockDir(lock)
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return fail(err)
	}
	o := options{handlers: map[string]Handler{task.DefaultKind: CommandHandler{}}, executors: map[string]executor.Executor{}}
	for _, opt := range opts {
		opt(&o)
	}
	abs := r.dir
	if o.executors[local.Name] == nil {
		o.executors[local.Name] = defaultLocal(abs)
	}
	if o.executors[slurm.Name] == nil {
		// Idle until a task names it: it asks nothing of Slurm before.
		o.executors[slurm.Name] = slurm.New(slurm.Config{})
	}
	st, checked, err := r.open()
	if err != nil {
		return fail(err)
	}
	var loaded func() ([]store.Row, error) // the rows read with the check, for the file checked
	if checked {
		loaded = func() ([]store.Row, error) { return rows, nil }
	}
	sc := &Scheduler{runDir: abs, settings: s.withDefaults(), handlers: o.handlers, lock: lock, probe: o.probe,
		executors: o.executors, defaultExecutor: local.Name, qualified: o.qualified, userAgent: cmp.Or(o.userAgent, defaultUserAgent()), history: o.history}
	sc.runTag = runTag(abs)
	if sc.probe == nil {
		sc.probe, sc.smi = &nvidiasmi.Probe{Timeout: sc.settings.NvidiaSMITimeout}, true
	}
	sc.engine, err = engine.Open(engine.Config{
		MaxParallel:    sc.settings.MaxParallelTasks,
		DefaultTimeout: sc.settings.DefaultTimeout,
		DefaultRetries: sc.settings.DefaultRetries,
		// withDefaults made "none" 0; the engine's 0 means its default.
		DefaultRetryDelay: noneIsNegative(sc.settings.DefaultRetryDelay),
		RetryDelayMax:     sc.settings.RetryDelayMax,
		DeliverTimeout:    noneIsNegative(sc.settings.OnCompleteTimeout),
		LogDir:            filepath.Join(abs, LogsDir),
		Store:             st,
		Rows:              loaded,
		Runner:            runner{sc},
		Observer:          sc.observer(o.observer),
		Token:             sc.token,
		WantsEvent:        sc.wantsEvent,
		Deliver:           sc.deliver,
		OnFailure:         sc.onFailure,
		Notices:           sc.notices,
		RunEnded:          sc.runEnded,
		FairShareHalfLife: sc.settings.FairShareHalfLife,
		UserMaxRunning:    sc.settings.UserMaxRunning,
		UserMaxGPUMiB:     sc.settings.UserMaxGPUMiB,
		OwnerName:         ownerName,
		Retire:            o.retire,
		PlacesGPUs:        sc.placesGPUs,
		MaxGPUMiB:         sc.maxGPUMiB,
		Host:              sc.settings.hostConfig(),
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
		return fail(err)
	}
	sc.sweepResults()
	return sc, nil
}

// open opens the run directory's state database for writing; checked
// by Reserve, and still the file it checked, without checking it again
// (checked: the rows Reserve read are its own).
func (r *Reservation) open() (st *store.SQLite, checked bool, err error) {
	path := filepath.Join(r.dir, StateFile)
	if !r.checked {
		st, err = store.OpenSQLite(path, r.dir)
		return st, false, err
	}
	if st, err = store.OpenSQLiteChecked(path, r.dir); err != nil {
		return nil, false, err
	}
	if fi, err := os.Stat(path); err != nil || !os.SameFile(fi, r.file) {
		// Replaced since it was checked (not by a scheduler: the lock
		// was held): opened afresh, and checked.
		st.Close()
		st, err = store.OpenSQLite(path, r.dir)
		return st, false, err
	}
	return st, true, nil
}

// ownerName names a task's owner (a decimal uid; "" for this process's
// user) for a person: the login name the system knows, else "".
func ownerName(uid string) string {
	u, err := user.Current()
	if uid != "" {
		u, err = user.LookupId(uid)
	}
	if err != nil {
		return ""
	}
	return u.Username
}

// noneIsNegative maps a resolved setting's "none" (0) to the engine's
// (negative).
func noneIsNegative(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// RunDir returns the run directory's absolute path.
func (s *Scheduler) RunDir() string { return s.runDir }

// Settings returns the scheduling settings in effect, defaults filled in.
func (s *Scheduler) Settings() Scheduling { return s.settings }

// Run runs tasks until nothing more can run and returns every submitted
// task's record, in submission order. Run returns a nil error when it ran to
// the end, whatever the tasks' fates; check each Record's State. If ctx is
// done first, running attempts are stopped as at a timeout and recorded
// cancelled, tasks not yet started stay pending, and Run returns ctx's
// error.
func (s *Scheduler) Run(ctx context.Context) ([]Record, error) {
	recs, err := s.engine.Run(ctx)
	return publicRecords(recs), err
}

// Cancel cancels task id: a pending task never starts; a running one is
// stopped (SIGTERM to its process group, SIGKILL after KillGrace). It ends
// cancelled, and its dependents blocked. Cancelling a finished task does
// nothing. An unknown id is an ErrUnknownTask error.
func (s *Scheduler) Cancel(id string) error { return publicError(s.engine.Cancel(id)) }

// Pause pauses the tasks ids names: a pending one does not start until
// resumed (its waiting reason is WaitPaused), a running one runs on and
// does not start again until resumed. With stop, the process group of
// each running attempt among them is sent SIGSTOP (Resume sends SIGCONT);
// its timeout, if it has one, keeps counting meanwhile. Paused is saved
// with the task, so a scheduler opened after a crash keeps it paused.
// Finished tasks are left as they are. Pause returns the tasks it paused
// or stopped, once that is committed; an unknown id is an ErrUnknownTask
// error, before anything is paused. An error stopping a process comes
// with the ids, everything else done.
func (s *Scheduler) Pause(ids []string, stop bool) ([]string, error) {
	done, err := s.engine.Pause(ids, stop)
	return done, publicError(err)
}

// Resume resumes the paused tasks ids names: a pending one may start
// again, and a running one's process group is sent SIGCONT (in case Pause
// stopped it). Tasks not paused are left as they are. It returns the
// tasks it resumed, once that is committed; an unknown id is an
// ErrUnknownTask error.
func (s *Scheduler) Resume(ids []string) ([]string, error) {
	done, err := s.engine.Resume(ids)
	return done, publicError(err)
}

// Retry makes each failed, cancelled or blocked task ids names pending
// again, its retries renewed, and with it every task it blocked, directly
// or not. All or nothing: a task pending, running or complete, or one that
// depends on a failed, cancelled or blocked task not retried with it, is
// an ErrNotRetryable *TaskError, an unknown id an ErrUnknownTask one, and
// nothing changes. It returns every task made pending, the named ones
// first, once that is committed.
func (s *Scheduler) Retry(ids []string) ([]string, error) {
	done, err := s.engine.Retry(ids)
	return done, publicError(err)
}

// StopNow stops every running attempt at once with SIGKILL, skipping
// KillGrace, and ends the Run in progress as a cancelled context would
// (tasks not started stay pending). It is for a second Ctrl-C: the first
// cancels Run's context, which stops attempts gracefully.
func (s *Scheduler) StopNow() { s.engine.StopNow() }

// Records returns every submitted task's record, in submission order.
func (s *Scheduler) Records() []Record { return publicRecords(s.engine.Records()) }

// Waiting returns why each task named waits, as the scheduler decided:
// for those that are pending, or running with an attempt that waits in
// the batch system that runs it (WaitQueued); with no ids, for every such
// task. The
// same reasons are saved in the run directory's state database, where
// "gpusched status" reads them; the detail of a GPU reason there follows
// the cards within seconds.
func (s *Scheduler) Waiting(ids ...string) map[string]WaitReason {
	return publicWaits(s.engine.Waiting(ids...))
}

// Close stops running attempts, waits for them, closes the state database
// and releases the run directory.
func (s *Scheduler) Close() error {
	err := s.engine.Close()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	s.closeExecutors()
	unlockDir(s.lock)
	return err
}
