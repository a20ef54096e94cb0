package supervise_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/supervise"
)

// TestCompactionKeepsWhatIsNotCommitted: the results file is compacted
// when a client forgets the ends it has committed, and a supervisor
// killed (SIGKILL) at any step of the compaction loses no end that was
// not forgotten: an attempt that ended while no client watched is still
// found by Recover, and whatever else was not forgotten is still read.
// Ends forgotten are gone once the compacted file took the name.
func TestCompactionKeepsWhatIsNotCommitted(t *testing.T) {
	for _, crash := range []string{"", "written", "renamed"} {
		t.Run("crash="+crash, func(t *testing.T) {
			dir := runDir(t)
			// Read by the supervisor as it starts (export_test.go): every
			// forget compacts, and it dies at the step named.
			if err := os.WriteFile(filepath.Join(dir, supervise.CompactControl), []byte(crash), 0o600); err != nil {
				t.Fatal(err)
			}

			// An attempt that ends while no client watches: only the
			// results file knows its end, and nobody forgets it.
			gofile := filepath.Join(t.TempDir(), "go")
			unwatched := executortest.NewJob(t, sleeper, "-wait", gofile, "-exit", "5")
			a := newExecutor(t, dir)
			run, done := started(t, a, context.Background(), unwatched)
			a.Close()
			result(t, done)
			if err := os.WriteFile(gofile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the unwatched end to be recorded", func() bool {
				_, ok, _ := supervise.ReadResult(dir, executor.Orphan{Job: unwatched})
				return ok
			})

			// Two attempts whose ends the client commits and forgets, and
			// one whose end it has not committed yet.
			b := newExecutor(t, dir)
			var forgotten []executor.Job
			for range 2 {
				j := executortest.NewJob(t, sleeper, "-exit", "0")
				var pid int
				r := b.Execute(context.Background(), j, executor.Hooks{Running: func(r executor.Running) { pid = r.PID }})
				if r.Reason != executor.Exited || r.ExitCode != 0 {
					t.Fatalf("attempt = %+v, want exited 0", r)
				}
				b.Forget(j.Token, pid)
				forgotten = append(forgotten, j)
			}
			pending := executortest.NewJob(t, sleeper, "-exit", "3")
			if r := b.Execute(context.Background(), pending, executor.Hooks{}); r.ExitCode != 3 {
				t.Fatalf("attempt = %+v, want exited 3", r)
			}
			supervise.FlushForgets(b)

			var after executor.Job
			if crash == "" {
				// On the same connection, after the forget: it ends once
				// the compaction is done, and its end goes to the file
				// that now has the name.
				after = executortest.NewJob(t, sleeper, "-exit", "4")
				if r := b.Execute(context.Background(), after, executor.Hooks{}); r.ExitCode != 4 {
					t.Fatalf("attempt = %+v, want exited 4", r)
				}
				b.Close()
			}
			waitLockFree(t, dir) // killed at the step, or gone idle
			b.Close()

			rec := newExecutor(t, dir).Recover([]executor.Orphan{{Job: unwatched, Handle: run.Handle}})[0]
			if rec.Wait != nil || rec.Result.Reason != executor.Exited || rec.Result.ExitCode != 5 {
				t.Errorf("Recover of the unwatched attempt = %+v (waits: %v), want exited 5 from its record", rec.Result, rec.Wait != nil)
			}
			if r, ok, err := supervise.ReadResult(dir, executor.Orphan{Job: pending}); !ok || err != nil || r.ExitCode != 3 {
				t.Errorf("ReadResult of the attempt not forgotten = %+v, %v, %v; want exited 3", r, ok, err)
			}
			if after.Token != "" {
				if r, ok, err := supervise.ReadResult(dir, executor.Orphan{Job: after}); !ok || err != nil || r.ExitCode != 4 {
					t.Errorf("ReadResult of the attempt after the compaction = %+v, %v, %v; want exited 4", r, ok, err)
				}
			}
			b2, err := os.ReadFile(supervise.ResultsPath(dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range forgotten {
				has := strings.Contains(string(b2), `"id":"`+j.Token+`"`)
				if want := crash == "written"; has != want {
					t.Errorf("results file holds forgotten %s: %v, want %v (crash at %q)\n%s", j.Token, has, want, crash, b2)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "supervisor.results.compact")); crash != "written" && err == nil {
				t.Error("supervisor.results.compact left behind")
			}
		})
	}
}

// TestSweep: a client's sweep, naming the attempts its state shows
// running, drops the records of all others written before it (ends
// committed by a scheduler that never forgot them), keeps those it names
// and those written after; with no supervisor running it waits for the
// next connection, ahead of the first start.
func TestSweep(t *testing.T) {
	dir := runDir(t)
	if err := os.WriteFile(filepath.Join(dir, supervise.CompactControl), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	has := func(j executor.Job) bool {
		b, _ := os.ReadFile(supervise.ResultsPath(dir))
		return strings.Contains(string(b), `"id":"`+j.Token+`"`)
	}
	// Ends a scheduler committed and never forgot.
	a := newExecutor(t, dir)
	var committed []executor.Job
	for range 2 {
		j := executortest.NewJob(t, sleeper, "-exit", "0")
		if r := a.Execute(context.Background(), j, executor.Hooks{}); r.Reason != executor.Exited {
			t.Fatalf("attempt = %+v", r)
		}
		committed = append(committed, j)
	}
	// One it left running, whose end comes later, and one that ended while
	// nobody watched, both running as far as its state knows.
	gofile := filepath.Join(t.TempDir(), "go")
	running := executortest.NewJob(t, sleeper, "-wait", gofile, "-exit", "5")
	run, done := started(t, a, context.Background(), running)
	ended := executortest.NewJob(t, sleeper, "-exit", "6")
	endedRun, endedDone := started(t, a, context.Background(), ended)
	result(t, endedDone)
	a.Close()
	result(t, done)

	b := newExecutor(t, dir)
	b.Sweep([]string{running.Token, ended.Token})
	waitFor(t, "the sweep to compact the results", func() bool { return !has(committed[0]) && !has(committed[1]) })
	recs := b.Recover([]executor.Orphan{{Job: running, Handle: run.Handle}, {Job: ended, Handle: endedRun.Handle}})
	// Only now may the running attempt end: had it ended before Recover,
	// Recover would rightly report its end instead of taking it over.
	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; r.Wait == nil {
		t.Errorf("Recover of the running attempt: %+v, want it taken over", r.Result)
	} else if res := r.Wait(context.Background()); res.ExitCode != 5 {
		t.Errorf("the running attempt ended %+v, want exited 5", res)
	}
	if r := recs[1]; r.Wait != nil || r.Result.ExitCode != 6 || r.Result.Reason != executor.Exited {
		t.Errorf("Recover of the attempt swept past: %+v, want exited 6 from its record", r.Result)
	}
	b.Close()
	waitLockFree(t, dir)

	// No supervisor runs: the sweep goes with the next connection, before
	// its first start.
	c := newExecutor(t, dir)
	c.Sweep(nil)
	later := executortest.NewJob(t, sleeper, "-exit", "7")
	if r := c.Execute(context.Background(), later, executor.Hooks{}); r.ExitCode != 7 {
		t.Fatalf("attempt = %+v", r)
	}
	if has(running) || has(ended) {
		t.Error("the records written before a sweep that names nothing are still there")
	}
	if !has(later) {
		t.Error("the record written after the sweep is gone")
	}
}
