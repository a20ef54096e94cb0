package executortest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// runBasics: exit codes and signals as end reasons, the environment and
// working directory exactly as given, output in the log.
func runBasics(t *testing.T, h Harness) {
	for _, code := range []int{0, 3, 255} {
		t.Run(fmt.Sprint("Exit", code), func(t *testing.T) {
			t.Parallel()
			j := h.job(t, "-print", "to stdout", "-stderr", "to stderr", "-exit", fmt.Sprint(code))
			j.Timeout = time.Hour // set, but far off: it must not end the job
			r := h.New(t).Execute(context.Background(), j, executor.Hooks{})
			wantReason(t, r, executor.Exited)
			if !r.Started || r.Err != nil || r.Signal != 0 || r.ExitCode != code {
				t.Errorf("result = %+v, want started, exit code %d", r, code)
			}
			if r.Start.IsZero() || r.End.Before(r.Start) {
				t.Errorf("start %v, end %v: want a start, and the end after it", r.Start, r.End)
			}
			if !r.Reason.Charged() {
				t.Errorf("reason %q is not charged to the task", r.Reason)
			}
			log := readFile(t, j.LogPath)
			if !strings.Contains(log, "to stdout\n") || !strings.Contains(log, "to stderr\n") {
				t.Errorf("log = %q, want both stdout and stderr", log)
			}
		})
	}

	// A job that kills itself with a signal ends Signalled: the signal
	// did not come from the executor.
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGKILL, syscall.SIGTERM} {
		t.Run("Signalled-"+executor.SignalName(sig), func(t *testing.T) {
			t.Parallel()
			j := h.job(t)
			name := strings.TrimPrefix(executor.SignalName(sig), "SIG")
			j.Args = []string{"/bin/sh", "-c", "ulimit -c 0; kill -s " + name + " $$; exit 99"}
			r := h.New(t).Execute(context.Background(), j, executor.Hooks{})
			wantReason(t, r, executor.Signalled)
			if !r.Started || r.Err != nil || r.Signal != sig {
				t.Errorf("result = %+v, want started and killed by %v", r, sig)
			}
		})
	}

	t.Run("EnvAndDir", func(t *testing.T) {
		t.Parallel()
		j := h.job(t, "-env", "GPUSCHED_TEST_VAR", "-env", "HOME", "-env", "GPUSCHED_TEST_EMPTY", "-touch", "made-here")
		j.Env = append(j.Env, "GPUSCHED_TEST_VAR=hello world", "GPUSCHED_TEST_EMPTY=")
		r := h.New(t).Execute(context.Background(), j, executor.Hooks{})
		wantReason(t, r, executor.Exited)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		log := readFile(t, j.LogPath)
		for _, want := range []string{"GPUSCHED_TEST_VAR=hello world\n", "GPUSCHED_TEST_EMPTY=\n"} {
			if !strings.Contains(log, want) {
				t.Errorf("log = %q, want %q", log, want)
			}
		}
		if !strings.Contains(log, "HOME=<unset>\n") {
			t.Errorf("log = %q: the environment must be exactly the job's, HOME was not in it", log)
		}
		if _, err := os.Stat(filepath.Join(j.Dir, "made-here")); err != nil {
			t.Errorf("file not created in the job's dir: %v", err)
		}
	})

	t.Run("TokenInEnvironment", func(t *testing.T) {
		t.Parallel()
		j := h.job(t, "-env", executor.TokenVar)
		j.Env = append(j.Env, executor.TokenVar+"=not-this-one")
		r := h.New(t).Execute(context.Background(), j, executor.Hooks{})
		wantReason(t, r, executor.Exited)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		if log, want := readFile(t, j.LogPath), executor.TokenVar+"="+j.Token+"\n"; log != want {
			t.Errorf("log = %q, want %q: Job.Token replaces the variable", log, want)
		}
	})

	// One executor runs several jobs at once, each to its own end.
	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		ex := h.New(t)
		var as []*attempt
		for i := range 4 {
			as = append(as, start(t, ex, context.Background(), h.job(t, "-print", fmt.Sprint("job ", i), "-exit", fmt.Sprint(10+i))))
		}
		for i, a := range as {
			r := a.result(t, "it started")
			if r.Reason != executor.Exited || r.ExitCode != 10+i {
				t.Errorf("job %d: result = %+v, want exited with %d", i, r, 10+i)
			}
			if log := readFile(t, a.job.LogPath); log != fmt.Sprintf("job %d\n", i) {
				t.Errorf("job %d: log = %q, want its own output alone", i, log)
			}
		}
	})
}

// runHooks: Running is told once, with a handle of this executor's;
// Submitted, if told at all, comes first, and a failure to persist its
// handle abandons the attempt before it runs.
func runHooks(t *testing.T, h Harness) {
	t.Run("Order", func(t *testing.T) {
		t.Parallel()
		ex := h.New(t)
		if ex.Name() == "" {
			t.Error("Name() is empty")
		}
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := h.job(t, "-pidfile", pidfile, "-exit", "0")
		l := newHookLog()
		r := ex.Execute(context.Background(), j, l.hooks())
		wantReason(t, r, executor.Exited)
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.running) != 1 {
			t.Fatalf("Running called %d times, want once", len(l.running))
		}
		run := l.running[0]
		if run.Handle.IsZero() || run.Handle.Executor != ex.Name() {
			t.Errorf("Running handle = %+v, want one of executor %q", run.Handle, ex.Name())
		}
		if run.Since.IsZero() || !run.Since.Equal(r.Start) {
			t.Errorf("Running.Since = %v, Result.Start = %v: want both the time the command started", run.Since, r.Start)
		}
		switch pids := readPIDs(pidfile); {
		case h.Remote:
		case len(pids) != 1:
			t.Errorf("the job wrote PIDs %v, want its own", pids)
		case run.PID != pids[0]:
			t.Errorf("Running.PID = %d, want the command's %d", run.PID, pids[0])
		}
		switch strings.Join(l.calls, ",") {
		case "running":
		case "submitted,running":
			if sub := l.handles[0]; sub.IsZero() || sub.Executor != ex.Name() {
				t.Errorf("Submitted handle = %+v, want one of executor %q", sub, ex.Name())
			}
			if run.Since.Before(l.submitted) {
				t.Errorf("running since %v, before it was submitted at %v", run.Since, l.submitted)
			}
		default:
			t.Errorf("hooks called %v, want Running once, after Submitted if Submitted at all", l.calls)
		}
	})

	t.Run("GateHolds", func(t *testing.T) {
		t.Parallel()
		ex := h.New(t)
		if _, ok := ex.(executor.Gated); !ok {
			t.Skip("the executor does not honour Job.Gate (the scheduler waits for it instead)")
		}
		touched := filepath.Join(t.TempDir(), "ran")
		j := h.job(t, "-touch", touched, "-exit", "0")
		var calls atomic.Int32
		var early atomic.Bool
		j.Gate = func() error {
			calls.Add(1)
			// Nothing of the attempt runs yet, nor is it written in its log.
			if _, err := os.Stat(touched); err == nil {
				early.Store(true)
			}
			if b, _ := os.ReadFile(j.LogPath); len(b) > 0 {
				early.Store(true)
			}
			return nil
		}
		l := newHookLog()
		r := ex.Execute(context.Background(), j, l.hooks())
		if calls.Load() == 0 {
			t.Error("Gate was never called")
		}
		if early.Load() {
			t.Error("the job ran, or wrote its log, before its Gate returned")
		}
		if r.Reason != executor.Exited || r.ExitCode != 0 || !r.Started {
			t.Errorf("result = %+v, want exited 0", r)
		}
		if _, err := os.Stat(touched); err != nil {
			t.Errorf("the job did not run once its Gate returned nil: %v", err)
		}
	})

	t.Run("GateFails", func(t *testing.T) {
		t.Parallel()
		ex := h.New(t)
		if _, ok := ex.(executor.Gated); !ok {
			t.Skip("the executor does not honour Job.Gate (the scheduler waits for it instead)")
		}
		touched := filepath.Join(t.TempDir(), "ran")
		for _, c := range []struct {
			name string
			args []string
		}{
			{"runnable", []string{"-touch", touched, "-exit", "0"}},
			// A command that cannot start says so in its log, but not
			// for an attempt that must not run.
			{"missing-dir", []string{"-touch", touched}},
		} {
			j := h.job(t, c.args...)
			if c.name == "missing-dir" {
				j.Dir = filepath.Join(t.TempDir(), "gone")
			}
			gateErr := errors.New("save state: disk I/O error")
			j.Gate = func() error { return gateErr }
			l := newHookLog()
			r := ex.Execute(context.Background(), j, l.hooks())
			if r.Started || !errors.Is(r.Err, gateErr) {
				t.Errorf("%s: result = %+v, want not started, an error wrapping the gate's", c.name, r)
			}
			l.mu.Lock()
			if len(l.calls) != 0 {
				t.Errorf("%s: hooks called %v for an attempt whose gate failed", c.name, l.calls)
			}
			l.mu.Unlock()
			if _, err := os.Stat(touched); err == nil {
				t.Errorf("%s: the job ran though its gate failed", c.name)
			}
			if b, _ := os.ReadFile(j.LogPath); len(b) > 0 {
				t.Errorf("%s: the log of an attempt whose gate failed holds %q", c.name, b)
			}
		}
	})

	t.Run("SubmittedFails", func(t *testing.T) {
		t.Parallel()
		touched := filepath.Join(t.TempDir(), "ran")
		j := h.job(t, "-touch", touched, "-exit", "0")
		l := newHookLog()
		l.submitErr = errors.New("state database is read-only")
		r := h.New(t).Execute(context.Background(), j, l.hooks())
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.calls) == 0 || l.calls[0] != "submitted" {
			// Submitted is not called: nothing to refuse, the job runs.
			if r.Reason != executor.Exited || r.ExitCode != 0 {
				t.Errorf("result = %+v, want exited 0", r)
			}
			if _, err := os.Stat(touched); err != nil {
				t.Errorf("the job did not run: %v", err)
			}
			return
		}
		wantReason(t, r, executor.Infrastructure)
		if r.Started || !errors.Is(r.Err, l.submitErr) {
			t.Errorf("result = %+v, want not started, an error wrapping the hook's", r)
		}
		if len(l.running) != 0 {
			t.Error("Running called for an attempt whose Submitted failed")
		}
		if _, err := os.Stat(touched); err == nil {
			t.Error("the job ran though its Submitted hook failed")
		}
	})
}
