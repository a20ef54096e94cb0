package gpusched

// The seams a Go program can fill: how attempts are run (an Executor) and
// how the GPUs are read (a GPU probe). Their types are defined inside the
// module and named here.

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/executor/slurm"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/supervise"
	"github.com/gpusched/gpusched/internal/task"
)

type (
	// Executor runs attempts and finds them again after a restart; see
	// WithExecutor. Every executor passes the same conformance suite.
	Executor = executor.Executor
	// ExecJob is one attempt as an Executor runs it.
	ExecJob = executor.Job
	// ExecHooks are told of an attempt's phases: submitted, running.
	ExecHooks = executor.Hooks
	// ExecHandle is an executor's persisted, versioned record of an attempt.
	ExecHandle = executor.Handle
	// ExecRunning describes an attempt whose command runs.
	ExecRunning = executor.Running
	// ExecResult is how an attempt ended.
	ExecResult = executor.Result
	// EndReason says how an attempt ended (exited, timed out, lost...).
	EndReason = executor.EndReason
	// Orphan is an attempt an earlier scheduler left running.
	Orphan = executor.Orphan
	// Recovery is what an Executor found of an Orphan.
	Recovery = executor.Recovery

	// GPUProbe reads the GPUs: the cards and the processes using them. The
	// default runs nvidia-smi; see WithProbe.
	GPUProbe = gpu.Probe
	// GPUSnapshot is one reading of the GPUs.
	GPUSnapshot = gpu.Snapshot
	// GPUCard is one card in a GPUSnapshot.
	GPUCard = gpu.Card
	// GPUProcess is one process using a card in a GPUSnapshot.
	GPUProcess = gpu.Proc
)

// WithExecutor registers ex under ex.Name(), replacing any built-in one of
// that name ("local" included): tasks that name it (or, for "local", that
// name none) run through it, and attempts it left running when an earlier
// scheduler died are recovered through it.
func WithExecutor(ex Executor) Option {
	return func(o *options) { o.executors[ex.Name()] = ex }
}

// WithProbe has the scheduler read the GPUs through p instead of
// nvidia-smi.
func WithProbe(p GPUProbe) Option {
	return func(o *options) { o.probe = p }
}

// defaultLocal is the local executor a scheduler uses unless told
// otherwise. In a scheduler that the run directory's supervisor started
// for a front (the gpusched command's run), attempts run in this process
// and are noted in the supervisor's journal, which adopts them if this
// process dies. Elsewhere, when this program can serve as a supervisor
// (see SupervisorMain), each attempt runs in the supervisor, over its
// socket; else inside this process, unsupervised.
func defaultLocal(runDir string) executor.Executor {
	if sch := supervise.ThisScheduler(); sch != nil && os.Getenv(NoSupervisorVar) == "" {
		if ex := sch.Executor(runDir); ex != nil {
			return ex
		}
	}
	if supervisorReady.Load() && os.Getenv(NoSupervisorVar) == "" {
		if bin, err := os.Executable(); err == nil {
			return &supervise.Executor{RunDir: runDir, Binary: bin}
		}
	}
	return &local.Executor{}
}

// NoSupervisorVar, when set in a scheduler's environment, has its local
// attempts run inside the scheduler's own process, unsupervised: they die
// with it and cannot be adopted. For measuring what supervision costs.
const NoSupervisorVar = "GPUSCHED_NO_SUPERVISOR"

// supervisorReady: SupervisorMain was called, so this program can serve as
// a run directory's supervisor.
var supervisorReady atomic.Bool

// SupervisorMain makes this program able to supervise attempts, so that
// they outlive the scheduler that started them (see docs/adoption.md),
// and to serve as the helper inside the Slurm batch jobs of the slurm
// executor (see docs/slurm.md).
// Call it first thing in main: when the process was started as a run
// directory's supervisor it serves, then exits, and never returns;
// otherwise it returns at once, and schedulers created afterwards run
// their local attempts under a supervisor (this same program, started
// again). Programs that do not call it run attempts inside their own
// process: a scheduler that dies takes them with it.
//
// A process that a supervisor started as the scheduler of a front (see
// docs/adoption.md) is set up here too: it takes its front's umask and
// exits at once when its front dies, leaving its attempts to the
// supervisor.
func SupervisorMain() {
	slurm.MaybeAttempt() // the helper of a Slurm batch job (see docs/slurm.md)
	supervise.MaybeServe()
	supervise.MaybeScheduler()
	supervisorReady.Store(true)
}

// lockPatience is how long New waits for the run directory's lock when
// another scheduler holds it and is leaving (exiting, or a front's
// scheduler whose front died: it exits as soon as it notices): a moment
// in a scheduler started for a front, which may come right after such a
// one (kill -9 of gpusched run, then run again); else not at all.
func lockPatience() (time.Duration, func(pid int) bool) {
	if supervise.ThisScheduler() != nil {
		return time.Second, supervise.Leaving
	}
	return 0, supervise.Leaving
}

// executorFor returns the executor that runs task sp.
func (s *Scheduler) executorFor(sp *task.Spec) (executor.Executor, error) {
	name := specExecutor(sp)
	if name == "" {
		name = s.defaultExecutor
	}
	if ex := s.executors[name]; ex != nil {
		return ex, nil
	}
	return nil, fmt.Errorf("executor %q is not registered in this scheduler", name)
}

// specExecutor is the executor task sp names; "" when none.
func specExecutor(sp *task.Spec) string { return sp.Executor }

// placer returns the executor of sp when it places its attempts itself
// (executor.Placer: Slurm), so that sp's GPU is none of this machine's
// cards.
func (s *Scheduler) placer(sp *task.Spec) executor.Placer {
	ex, err := s.executorFor(sp)
	if err != nil {
		return nil
	}
	if p, ok := ex.(executor.Placer); ok && p.PlacesWork() {
		return p
	}
	return nil
}

// placesGPUs reports whether the executor of sp places its attempts
// itself: a GPU task of it is not admitted by this machine's cards.
func (s *Scheduler) placesGPUs(sp *task.Spec) bool { return s.placer(sp) != nil }

// maxGPUMiB is the most GPU memory the executor of sp, one that places
// its attempts, can give one GPU; 0 when it does not know.
func (s *Scheduler) maxGPUMiB(sp *task.Spec) int64 {
	if p := s.placer(sp); p != nil {
		return p.MaxGPUMiB(sp)
	}
	return 0
}

// placedByBuiltin reports whether the built-in executor named name (the
// one a task names, "" for local) places its attempts itself: slurm.
func placedByBuiltin(name string) bool { return name == slurm.Name }

// checkExecutors refuses tasks that name an executor this scheduler does
// not have.
func (s *Scheduler) checkExecutors(specs []*task.Spec) error {
	for _, sp := range specs {
		if sp.Executor != "" && s.executors[sp.Executor] == nil {
			names := slices.Sorted(maps.Keys(s.executors))
			return &TaskError{TaskID: sp.ID, Field: "executor", Kind: ErrInvalidTask,
				Reason: fmt.Sprintf("unknown executor %q (known: %s)", sp.Executor, strings.Join(names, ", "))}
		}
	}
	return nil
}

// closeExecutors lets go of the executors' connections, never stopping
// an attempt.
func (s *Scheduler) closeExecutors() {
	for _, ex := range s.executors {
		if c, ok := ex.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
}
