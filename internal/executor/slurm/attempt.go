package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// AttemptCommand is the first argument that makes a program built with
// MaybeAttempt act as the helper of a batch job (see MaybeAttempt).
const AttemptCommand = "__gpusched-slurm-attempt"

// helperReady: MaybeAttempt was called and returned, so this program can
// serve as the helper of the batch jobs it submits.
var helperReady atomic.Bool

// attemptSpec is what the wrapper script hands the helper on its standard
// input: the task's command, folder and environment, and where to write
// how it ended. JSON, so that no shell ever reads the task's strings.
type attemptSpec struct {
	Args      []string      `json:"args"`
	Env       []string      `json:"env"`
	Dir       string        `json:"dir,omitempty"`
	LogPath   string        `json:"log"`
	LogRoot   string        `json:"log_root,omitempty"`
	Result    string        `json:"result"`
	Timeout   time.Duration `json:"timeout,omitempty"`
	KillGrace time.Duration `json:"kill_grace,omitempty"`
	Token     string        `json:"token,omitempty"`
}

// slurmVars are the variables Slurm sets for a job that the task keeps
// besides its own environment: which job it is and which GPUs it got.
var slurmVars = []string{"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}

// fromSlurm reports whether the variable kv (KEY=VALUE) is one Slurm set
// for the job that the task keeps.
func fromSlurm(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SLURMD_") {
		return true
	}
	for _, v := range slurmVars {
		if k == v {
			return true
		}
	}
	return false
}

// MaybeAttempt makes this program the helper of a batch job when it was
// started as one (os.Args[1] is AttemptCommand): it then runs the
// attempt, writes the result file and exits, never returning. Otherwise
// it returns at once. Started with ProbeCommand, it answers a probe job
// of Check and exits. Call it first thing in main (gpusched.SupervisorMain
// does).
func MaybeAttempt() {
	if len(os.Args) >= 2 && os.Args[1] == ProbeCommand {
		os.Exit(runProbe(os.Args[2:], os.Stdout)) // a probe job of Check
	}
	if len(os.Args) < 2 || os.Args[1] != AttemptCommand {
		helperReady.Store(true)
		return
	}
	os.Exit(runAttempt(os.Stdin, os.Stderr, os.Environ()))
}

// runAttempt is the helper: it reads the attempt from in, runs its
// command as the local executor does (its own process group, its folder,
// exactly its environment plus Slurm's job variables), forwards SIGTERM
// (then SIGKILL after the kill grace) and SIGUSR1 (SIGKILL now) to it,
// stops it at its timeout, and writes how it ended to the result file. It
// returns the exit code the job should end with: the command's own, 128+N
// for a signal N, 1 when it could not run.
func runAttempt(in io.Reader, errOut io.Writer, environ []string) int {
	var sp attemptSpec
	if err := json.NewDecoder(in).Decode(&sp); err != nil || sp.Result == "" {
		fmt.Fprintf(errOut, "gpusched slurm helper: read the attempt: %v\n", err)
		return 1
	}
	// The task's environment, less what Slurm sets for the job (the GPUs
	// it gave, which job this is), then Slurm's.
	var env []string
	for _, kv := range sp.Env {
		if !fromSlurm(kv) {
			env = append(env, kv)
		}
	}
	for _, kv := range environ {
		if fromSlurm(kv) {
			env = append(env, kv)
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGINT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killNow := make(chan struct{})
	var outside atomic.Bool // the helper was told to stop
	go func() {
		killed := false
		for s := range sigs {
			outside.Store(true)
			switch s {
			case syscall.SIGUSR1:
				if !killed {
					killed = true
					close(killNow)
				}
				cancel()
			default:
				cancel()
			}
		}
	}()
	r := (&local.Executor{}).Execute(ctx, executor.Job{
		Args: sp.Args, Env: env, Dir: sp.Dir, LogPath: sp.LogPath, LogRoot: sp.LogRoot,
		Timeout: sp.Timeout, KillGrace: sp.KillGrace, KillNow: killNow, Token: sp.Token,
	}, executor.Hooks{Running: func(run executor.Running) {
		// The command runs: note when, for the scheduler's Running hook
		// and the attempt's clock. A failure here leaves Slurm's state to
		// tell that it runs.
		if err := writeFileAtomic(startedFile(sp.Result), []byte(run.Since.Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
			fmt.Fprintf(errOut, "gpusched slurm helper: %v\n", err)
		}
	}})
	if r.Reason == executor.Signalled && (r.Signal == syscall.SIGTERM || r.Signal == syscall.SIGKILL) {
		// scancel signals every process of the job, the command's too: it
		// may die of that SIGTERM before the helper's own copy is read.
		// A signal sent to the helper is delivered within moments; wait
		// for it a little, so that a job stopped from outside is told as
		// such and not as a command that died of a signal on its own.
		for i := 0; i < 50 && !outside.Load(); i++ {
			time.Sleep(2 * time.Millisecond)
		}
		if outside.Load() {
			r.Reason = executor.Cancelled
		}
	}
	if err := writeOutcome(sp.Result, outcomeOf(r)); err != nil {
		fmt.Fprintf(errOut, "gpusched slurm helper: %v\n", err)
		return 1
	}
	switch {
	case r.Signal != 0:
		return 128 + int(r.Signal)
	case !r.Started:
		return 1
	}
	return r.ExitCode
}
