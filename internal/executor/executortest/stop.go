package executortest

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// runStop: a job whose context is done gets SIGTERM, then SIGKILL after
// its kill grace, and ends Cancelled; KillNow kills it at once.
func runStop(t *testing.T, h Harness) {
	t.Run("CancelPolite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
		j := h.job(t, "-on-term", termfile, "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour // SIGTERM alone must end it
		j.Timeout = time.Hour   // and the cancel, not the timeout
		ctx, cancel := context.WithCancel(context.Background())
		a := start(t, h.New(t), ctx, j)
		a.running(t)
		pid := waitPIDs(t, pidfile, 1)[0]
		cancel()
		r := a.result(t, "cancel")
		wantReason(t, r, executor.Cancelled)
		if !r.Started || r.Err != nil {
			t.Errorf("result = %+v, want started, no error", r)
		}
		if !hasLine(termfile, fmt.Sprint("TERM ", pid)) {
			t.Error("the job did not get SIGTERM")
		}
		if r.Reason.Charged() {
			t.Error("a cancelled attempt is charged to the task")
		}
	})

	t.Run("CancelIgnoringTerm", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := h.job(t, "-ignore-term", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = 300 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		a := start(t, h.New(t), ctx, j)
		a.running(t)
		waitPIDs(t, pidfile, 1)
		cancelled := time.Now()
		cancel()
		r := a.result(t, "cancel")
		wantReason(t, r, executor.Cancelled)
		h.wantSignal(t, r, syscall.SIGKILL)
		if d := time.Since(cancelled); d < j.KillGrace {
			t.Errorf("job killed %v after the cancel, before its kill grace %v", d, j.KillGrace)
		}
	})

	t.Run("CancelledBeforeExecute", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		j := h.job(t, "-sleep", "1h")
		j.KillGrace = time.Hour
		r := start(t, h.New(t), ctx, j).result(t, "it was called")
		wantReason(t, r, executor.Cancelled)
	})

	t.Run("KillNow", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := h.job(t, "-ignore-term", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		killNow := make(chan struct{})
		j.KillNow = killNow
		a := start(t, h.New(t), context.Background(), j)
		a.running(t)
		waitPIDs(t, pidfile, 1)
		close(killNow)
		r := a.result(t, "KillNow was closed")
		wantReason(t, r, executor.Cancelled)
		h.wantSignal(t, r, syscall.SIGKILL)
	})

	t.Run("KillNowDuringGrace", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
		// The grandchild notes its SIGTERM and exits; the leader ignores
		// it: then the job is in its grace, which only KillNow cuts short.
		j := h.job(t, "-ignore-term", "-grandchild", "-polite", termfile, "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		killNow := make(chan struct{})
		j.KillNow = killNow
		ctx, cancel := context.WithCancel(context.Background())
		a := start(t, h.New(t), ctx, j)
		pids := waitPIDs(t, pidfile, 2)
		cancel()
		waitLine(t, termfile, fmt.Sprint("TERM ", pids[1]))
		close(killNow)
		r := a.result(t, "KillNow was closed")
		wantReason(t, r, executor.Cancelled)
		h.wantSignal(t, r, syscall.SIGKILL)
	})
}

// untilReady calls try with a timeout of base, then 4 and 16 times as
// long, until it returns true. try runs a job with that timeout and
// returns false, without judging, when the job was not ready (had not set
// up its signal handling) before its timeout: a loaded machine may take
// longer than a short timeout to start a process, and the test is about
// what happens after. On the last try (last), it judges whatever came.
func untilReady(t *testing.T, base time.Duration, try func(timeout time.Duration, last bool) bool) {
	t.Helper()
	for timeout := base; !try(timeout, timeout >= 16*base); timeout *= 4 {
		t.Logf("the job was not ready within its timeout %v; again with a longer one", timeout)
	}
}

// runTimeout: at Job.Timeout, counted from when the job runs, it is
// stopped as for a cancel, and ends TimedOut.
func runTimeout(t *testing.T, h Harness) {
	t.Run("Polite", func(t *testing.T) {
		t.Parallel()
		untilReady(t, 300*time.Millisecond, func(timeout time.Duration, last bool) bool {
			dir := t.TempDir()
			pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
			j := h.job(t, "-on-term", termfile, "-pidfile", pidfile, "-sleep", "1h")
			j.Timeout = timeout
			j.KillGrace = time.Hour
			a := start(t, h.New(t), context.Background(), j)
			r := a.result(t, "its timeout")
			pids := readPIDs(pidfile)
			if len(pids) == 0 && !last {
				return false
			}
			run := a.running(t)
			wantReason(t, r, executor.TimedOut)
			if !r.Started || r.Err != nil {
				t.Errorf("result = %+v, want started, no error", r)
			}
			if len(pids) != 1 || !hasLine(termfile, fmt.Sprint("TERM ", pids[0])) {
				t.Error("the job did not get SIGTERM at its timeout")
			}
			// Only time spent running counts: never stopped before its
			// timeout, counted from when it ran.
			if d := r.End.Sub(run.Since); d < j.Timeout {
				t.Errorf("the job ran %v, less than its timeout %v", d, j.Timeout)
			}
			if !r.Reason.Charged() {
				t.Error("a timed-out attempt is not charged to the task")
			}
			return true
		})
	})

	t.Run("IgnoringTerm", func(t *testing.T) {
		t.Parallel()
		untilReady(t, 200*time.Millisecond, func(timeout time.Duration, last bool) bool {
			pidfile := filepath.Join(t.TempDir(), "pids")
			j := h.job(t, "-ignore-term", "-pidfile", pidfile, "-sleep", "1h")
			j.Timeout = timeout
			j.KillGrace = 200 * time.Millisecond
			a := start(t, h.New(t), context.Background(), j)
			r := a.result(t, "its timeout")
			if len(readPIDs(pidfile)) == 0 && !last {
				return false
			}
			run := a.running(t)
			wantReason(t, r, executor.TimedOut)
			h.wantSignal(t, r, syscall.SIGKILL)
			if d := r.End.Sub(run.Since); d < j.Timeout+j.KillGrace {
				t.Errorf("the job ran %v, less than its timeout and kill grace %v", d, j.Timeout+j.KillGrace)
			}
			return true
		})
	})
}
