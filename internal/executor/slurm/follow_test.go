package slurm

import (
	"context"
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
