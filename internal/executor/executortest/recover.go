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

// crashed starts j on a first executor, waits until it runs and restarts
// that executor (Harness.Restart). It returns the orphan as the restarted
// scheduler knows it (the last handle the hooks told), the attempt of the
// first executor, and the restarted scheduler's executor.
func (h Harness) crashed(t *testing.T, j executor.Job) (executor.Orphan, *attempt, executor.Executor) {
	t.Helper()
	old := h.New(t)
	a := start(t, old, context.Background(), j)
	a.running(t)
	h.restart(t, old)
	return executor.Orphan{Job: j, Handle: a.log.last()}, a, h.New(t)
}

// recoverOne recovers o alone with ex.
func recoverOne(t *testing.T, ex executor.Executor, o executor.Orphan) executor.Recovery {
	t.Helper()
	recs := ex.Recover([]executor.Orphan{o})
	if len(recs) != 1 {
		t.Fatalf("Recover of one orphan returned %d recoveries", len(recs))
	}
	return recs[0]
}

// wait calls rec.Wait under ctx, failing the test if it does not return
// within a minute after what.
func wait(t *testing.T, rec executor.Recovery, ctx context.Context, what string) executor.Result {
	t.Helper()
	done := make(chan executor.Result, 1)
	go func() { done <- rec.Wait(ctx) }()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("Wait did not return a minute after %s", what)
		return executor.Result{}
	}
}

// wantLost fails the test unless rec reports its attempt Lost, with an
// error that says so, and no Wait.
func wantLost(t *testing.T, rec executor.Recovery) {
	t.Helper()
	if rec.Wait != nil {
		t.Fatalf("recovery has a Wait (running %+v), want the attempt reported lost", rec.Running)
	}
	wantReason(t, rec.Result, executor.Lost)
	if rec.Result.Err == nil {
		t.Error("a lost attempt's result has no error to say why")
	}
	if rec.Result.Reason.Charged() {
		t.Error("a lost attempt is charged to the task")
	}
}

// wantAdopted fails the test unless rec reattaches to an attempt of ex's.
func wantAdopted(t *testing.T, ex executor.Executor, rec executor.Recovery) {
	t.Helper()
	if rec.Wait == nil {
		t.Fatalf("recovery has no Wait (result %+v), want the running attempt adopted", rec.Result)
	}
	if h := rec.Running.Handle; h.IsZero() || h.Executor != ex.Name() {
		t.Errorf("recovery's running handle = %+v, want one of executor %q", h, ex.Name())
	}
}

// runRecover: after the scheduler restarts, Recover adopts what still
// runs and reports what ended (Harness.Adopts), or reports every orphan
// Lost and leaves nothing of it running; an orphan it cannot read is Lost.
func runRecover(t *testing.T, h Harness) {
	adopts := func(t *testing.T) {
		if !h.Adopts {
			t.Skip("this executor's attempts do not outlive a restart")
		}
	}

	t.Run("Running", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		startfile, gate := filepath.Join(dir, "started"), filepath.Join(dir, "go")
		j := h.job(t, "-pidfile", startfile, "-wait", gate, "-exit", "7")
		o, old, ex := h.crashed(t, j)
		since := old.running(t).Since
		pid := waitPIDs(t, startfile, 1)[0]
		rec := recoverOne(t, ex, o)
		if !h.Adopts {
			wantLost(t, rec)
			if !h.Remote {
				waitGone(t, pid)
			}
			return
		}
		wantAdopted(t, ex, rec)
		if d := rec.Running.Since.Sub(since).Abs(); d > time.Second {
			t.Errorf("adopted attempt running since %v, want %v, when it started", rec.Running.Since, since)
		}
		writeFileAt(t, gate, "")
		r := wait(t, rec, context.Background(), "the job was let go on")
		wantReason(t, r, executor.Exited)
		if !r.Started || r.ExitCode != 7 || r.Err != nil {
			t.Errorf("result = %+v, want exited with 7", r)
		}
		if n := countLines(startfile); n != 1 {
			t.Errorf("the job started %d times, want once: a restart must not run it again", n)
		}
	})

	t.Run("EndedAmongUnreadable", func(t *testing.T) {
		t.Parallel()
		// The job ends under the first scheduler, which dies before it
		// saves how: the restarted one must learn it from the executor.
		j := h.job(t, "-exit", "5")
		old := h.New(t)
		l := newHookLog()
		if r := old.Execute(context.Background(), j, l.hooks()); r.Reason != executor.Exited || r.ExitCode != 5 {
			t.Fatalf("result = %+v, want exited with 5", r)
		}
		h.restart(t, old)
		ex := h.New(t)
		if recs := ex.Recover(nil); len(recs) != 0 {
			t.Errorf("Recover(nil) = %+v, want none", recs)
		}
		ended := l.last()
		never := func() executor.Job { return h.job(t, "-exit", "0") }
		orphans := []executor.Orphan{
			{Job: never(), Handle: executor.Handle{Executor: "executortest-no-such-executor", Version: 1, Data: []byte("{}")}},
			{Job: j, Handle: ended},
			{Job: never(), Handle: executor.Handle{Executor: ended.Executor, Version: ended.Version, Data: []byte("{")}},
			{Job: never(), Handle: executor.Handle{Executor: ended.Executor, Version: ended.Version + 1000, Data: ended.Data}},
			{Job: never()}, // no handle was ever saved
		}
		recs := ex.Recover(orphans)
		if len(recs) != len(orphans) {
			t.Fatalf("Recover of %d orphans returned %d recoveries", len(orphans), len(recs))
		}
		for i, rec := range recs {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				if i != 1 || !h.Adopts {
					wantLost(t, rec)
					return
				}
				if rec.Wait != nil {
					t.Fatal("recovery of an ended attempt has a Wait")
				}
				if r := rec.Result; r.Reason != executor.Exited || !r.Started || r.ExitCode != 5 {
					t.Errorf("result = %+v, want exited with 5", r)
				}
			})
		}
	})

	t.Run("NoHandle", func(t *testing.T) {
		t.Parallel()
		// The scheduler died before it saved any handle: the attempt
		// cannot be followed, so it is stopped and reported Lost.
		dir := t.TempDir()
		startfile, gate := filepath.Join(dir, "started"), filepath.Join(dir, "go")
		j := h.job(t, "-pidfile", startfile, "-wait", gate, "-exit", "0")
		o, _, ex := h.crashed(t, j)
		pid := waitPIDs(t, startfile, 1)[0]
		saved := o.Handle
		o.Handle = executor.Handle{}
		if h.Adopts && h.FindsByToken {
			rec := recoverOne(t, ex, o)
			wantAdopted(t, ex, rec)
			writeFileAt(t, gate, "go")
			if r := wait(t, rec, context.Background(), "its gate opened"); r.Reason != executor.Exited || r.ExitCode != 0 {
				t.Errorf("adopted attempt without a handle ended %+v, want exited 0", r)
			}
			return
		}
		wantLost(t, recoverOne(t, ex, o))
		if !h.Remote {
			waitGone(t, pid)
		}
		if h.Adopts {
			// Asked again with the handle it had, the executor must
			// know it no longer runs.
			rec := recoverOne(t, h.New(t), executor.Orphan{Job: j, Handle: saved})
			if rec.Wait != nil {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				wait(t, rec, ctx, "it was cancelled")
				t.Fatal("the attempt Recover reported lost still runs")
			}
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		adopts(t)
		t.Parallel()
		dir := t.TempDir()
		pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
		j := h.job(t, "-on-term", termfile, "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		o, _, ex := h.crashed(t, j)
		pid := waitPIDs(t, pidfile, 1)[0]
		rec := recoverOne(t, ex, o)
		wantAdopted(t, ex, rec)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := wait(t, rec, ctx, "it was cancelled")
		wantReason(t, r, executor.Cancelled)
		if !hasLine(termfile, fmt.Sprint("TERM ", pid)) {
			t.Error("the adopted job did not get SIGTERM")
		}
	})

	t.Run("KillNow", func(t *testing.T) {
		adopts(t)
		t.Parallel()
		j := h.job(t, "-ignore-term", "-sleep", "1h")
		j.KillGrace = time.Hour
		o, _, ex := h.crashed(t, j)
		killNow := make(chan struct{})
		o.Job.KillNow = killNow
		rec := recoverOne(t, ex, o)
		wantAdopted(t, ex, rec)
		close(killNow)
		r := wait(t, rec, context.Background(), "KillNow was closed")
		wantReason(t, r, executor.Cancelled)
		h.wantSignal(t, r, syscall.SIGKILL)
	})

	t.Run("Timeout", func(t *testing.T) {
		adopts(t)
		t.Parallel()
		// The timeout holds while no scheduler watches, and after one
		// adopts the attempt: whichever, it ends TimedOut.
		untilReady(t, 300*time.Millisecond, func(timeout time.Duration, last bool) bool {
			dir := t.TempDir()
			pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
			j := h.job(t, "-on-term", termfile, "-pidfile", pidfile, "-sleep", "1h")
			j.Timeout = timeout
			j.KillGrace = time.Hour
			o, _, ex := h.crashed(t, j)
			rec := recoverOne(t, ex, o)
			r := rec.Result
			if rec.Wait != nil {
				r = wait(t, rec, context.Background(), "its timeout")
			}
			pids := readPIDs(pidfile)
			if len(pids) == 0 && !last {
				return false
			}
			wantReason(t, r, executor.TimedOut)
			if len(pids) != 1 || !hasLine(termfile, fmt.Sprint("TERM ", pids[0])) {
				t.Error("the job did not get SIGTERM at its timeout")
			}
			return true
		})
	})
}
