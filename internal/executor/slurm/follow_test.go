package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
)

// TestCancelBeforeTrackerSawStart: a cancel that comes after the command
// started, but before the tracker's round read the helper's note of it,
// is still the polite one (SIGTERM to the helper, which gives the task
// its kill grace), not Slurm's scancel of the whole job.
func TestCancelBeforeTrackerSawStart(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := testConfig(f)
	cfg.PollMin = 3 * time.Second // no round before the cancel
	dir := t.TempDir()
	pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
	j := executortest.NewJob(t, sleeper, "-on-term", termfile, "-pidfile", pidfile, "-sleep", "1h")
	j.KillGrace = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder()
	done := start(newExecutor(t, cfg), ctx, j, rec)
	waitFor(t, "the command runs", func() bool { return countLines(pidfile) == 1 })
	// The helper notes the start just after the command's own first
	// steps: under load, the pidfile can come first.
	waitFor(t, "the helper's note of the start", func() bool { _, ok := readStarted(filesOf(j).result); return ok })
	cancel()
	r := await(t, done, "cancel")
	if r.Reason != executor.Cancelled || !r.Started {
		t.Errorf("result = %+v, want cancelled after it started", r)
	}
	want := "scancel --batch --signal=TERM " + rec.id(t)
	var scancels []string
	for _, c := range f.calls() {
		if strings.HasPrefix(c, "scancel") {
			scancels = append(scancels, c)
		}
	}
	if len(scancels) == 0 || scancels[0] != want {
		t.Errorf("scancel calls %q, want %q first", scancels, want)
	}
	if b := readFile(t, pidfile); !strings.Contains(readFile(t, termfile), fmt.Sprint("TERM ", strings.TrimSpace(b))) {
		t.Error("the command did not get SIGTERM")
	}
}

// TestSubmittedFailsCancels: a job whose handle could not be saved is
// cancelled before Execute returns, so that a scheduler that closes its
// executor at once (it is shutting down) leaves no job held in Slurm.
func TestSubmittedFailsCancels(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	ex := New(testConfig(f))
	r := ex.Execute(context.Background(), executortest.NewJob(t, sleeper, "-exit", "0"), executor.Hooks{
		Submitted: func(executor.Handle) error { return errors.New("state database is read-only") },
	})
	cancelled := f.count("scancel")
	ex.Close()
	if cancelled != 1 {
		t.Errorf("%d scancel calls when Execute returned, want 1", cancelled)
	}
	if r.Reason != executor.Infrastructure {
		t.Errorf("result = %+v, want infrastructure", r)
	}
	out, err := f.Run(context.Background(), "squeue", "--jobs=1", "--states=all", "--noheader", "--format="+queueFormat)
	if s, perr := parseQueue(out); err != nil || perr != nil || len(s) != 1 || s[0].State != "CANCELLED" {
		t.Errorf("squeue says %q (%v): want the job cancelled", out, err)
	}
}
