package executortest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
)

// runFaults: jobs that cannot start say whose fault it is, in one line
// naming the path.
func runFaults(t *testing.T, h Harness) {
	job := h.job
	// cannotStart runs j, which must not start, and checks the class of
	// the error and the reason, and that it names want.
	cannotStart := func(t *testing.T, j executor.Job, class error, want string) executor.Result {
		t.Helper()
		r := h.New(t).Execute(context.Background(), j, executor.Hooks{Running: func(executor.Running) { t.Error("Running called for a job that cannot start") }})
		if r.Started || r.Err == nil {
			t.Fatalf("result = %+v, want not started, with an error", r)
		}
		if want := map[error]executor.EndReason{executor.ErrCommand: executor.Unrunnable, executor.ErrEnvironment: executor.Infrastructure}[class]; r.Reason != want {
			t.Errorf("reason %q, want %q for %v", r.Reason, want, class)
		}
		if !errors.Is(r.Err, class) {
			t.Errorf("error %q is not %v", r.Err, class)
		}
		for _, other := range []error{executor.ErrCommand, executor.ErrEnvironment} {
			if other != class && errors.Is(r.Err, other) {
				t.Errorf("error %q is also %v", r.Err, other)
			}
		}
		if msg := r.Err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming %s", msg, want)
		}
		return r
	}

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{"gpusched-no-such-command-xyz"}
		cannotStart(t, j, executor.ErrCommand, "gpusched-no-such-command-xyz")
		if log := readFile(t, j.LogPath); !strings.Contains(log, "gpusched-no-such-command-xyz") {
			t.Errorf("log = %q, want the start error in it", log)
		}
	})
	t.Run("ProgramPathMissing", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{filepath.Join(t.TempDir(), "no-such-program")}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("NotExecutable", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{writeFile(t, "#!/bin/sh\nexit 0\n", 0o644)}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("ExecFormat", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{writeFile(t, "\x7fELF not really\x00\x01\x02", 0o755)}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("ProgramIsFolder", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = []string{t.TempDir()}
		cannotStart(t, j, executor.ErrCommand, j.Args[0])
	})
	t.Run("DirMissing", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Dir = filepath.Join(j.Dir, "missing")
		cannotStart(t, j, executor.ErrCommand, j.Dir)
	})
	t.Run("DirIsFile", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Dir = writeFile(t, "", 0o644)
		cannotStart(t, j, executor.ErrCommand, j.Dir)
	})
	t.Run("EmptyCommand", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		j.Args = nil
		cannotStart(t, j, executor.ErrCommand, "empty command")
	})
	t.Run("LogFolderIsFile", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		mustMkdir(t, filepath.Join(j.LogRoot, "logs"))
		writeFileAt(t, filepath.Join(j.LogRoot, "logs", "t"), "")
		cannotStart(t, j, executor.ErrEnvironment, filepath.Join(j.LogRoot, "logs", "t"))
	})
	t.Run("LogFolderIsFileNoRoot", func(t *testing.T) {
		t.Parallel()
		j := job(t)
		blocked := writeFileAt(t, filepath.Join(j.LogRoot, "blocked"), "")
		j.LogRoot = ""
		j.LogPath = filepath.Join(blocked, "t", "attempt-1.log")
		cannotStart(t, j, executor.ErrEnvironment, blocked)
	})
}

// runLogs: the log is appended to, and never written through a planted
// link, hard link or FIFO.
func runLogs(t *testing.T, h Harness) {
	job := h.job
	// refused runs j, whose log is booby-trapped, and checks that it did
	// not start, with an environment fault naming want.
	refused := func(t *testing.T, j executor.Job, want string) {
		t.Helper()
		done := make(chan executor.Result, 1)
		ex := h.New(t)
		go func() { done <- ex.Execute(context.Background(), j, executor.Hooks{}) }()
		r := await(t, done, "it started")
		if r.Started || !errors.Is(r.Err, executor.ErrEnvironment) || r.Reason != executor.Infrastructure {
			t.Fatalf("result = %+v, want not started, an environment fault (infrastructure)", r)
		}
		if msg := r.Err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming %s", msg, want)
		}
	}
	const precious = "precious content\n"

	t.Run("FolderSymlink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		outside := t.TempDir()
		target := writeFileAt(t, filepath.Join(outside, "attempt-1.log"), precious)
		mustMkdir(t, filepath.Join(j.LogRoot, "logs"))
		mustSymlink(t, outside, filepath.Dir(j.LogPath))
		refused(t, j, filepath.Dir(j.LogPath))
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted folder link = %q, want it unchanged", got)
		}
	})
	t.Run("LogsFolderSymlink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		outside := t.TempDir()
		mustMkdir(t, filepath.Join(outside, "t"))
		target := writeFileAt(t, filepath.Join(outside, "t", "attempt-1.log"), precious)
		mustSymlink(t, outside, filepath.Join(j.LogRoot, "logs"))
		refused(t, j, filepath.Join(j.LogRoot, "logs"))
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted logs link = %q, want it unchanged", got)
		}
	})
	t.Run("FileSymlink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		target := writeFile(t, precious, 0o644)
		mustMkdir(t, filepath.Dir(j.LogPath))
		mustSymlink(t, target, j.LogPath)
		refused(t, j, j.LogPath)
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted log link = %q, want it unchanged", got)
		}
	})
	t.Run("FileSymlinkNoRoot", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		j.LogRoot = ""
		target := writeFile(t, precious, 0o644)
		mustMkdir(t, filepath.Dir(j.LogPath))
		mustSymlink(t, target, j.LogPath)
		refused(t, j, j.LogPath)
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted log link = %q, want it unchanged", got)
		}
	})
	t.Run("HardLink", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		target := writeFile(t, precious, 0o644)
		mustMkdir(t, filepath.Dir(j.LogPath))
		if err := os.Link(target, j.LogPath); err != nil {
			t.Skipf("cannot make a hard link here: %v", err)
		}
		refused(t, j, j.LogPath)
		if got := readFile(t, target); got != precious {
			t.Errorf("file behind the planted hard link = %q, want it unchanged", got)
		}
	})
	t.Run("FIFO", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "written")
		mustMkdir(t, filepath.Dir(j.LogPath))
		if err := syscall.Mkfifo(j.LogPath, 0o644); err != nil {
			t.Skipf("cannot make a FIFO here: %v", err)
		}
		refused(t, j, j.LogPath)
	})
	t.Run("Appends", func(t *testing.T) {
		t.Parallel()
		j := job(t, "-print", "second")
		mustMkdir(t, filepath.Dir(j.LogPath))
		writeFileAt(t, j.LogPath, "first\n")
		if r := h.New(t).Execute(context.Background(), j, executor.Hooks{}); r.Reason != executor.Exited || r.Err != nil || r.ExitCode != 0 {
			t.Fatalf("result = %+v", r)
		}
		if got := readFile(t, j.LogPath); got != "first\nsecond\n" {
			t.Errorf("log = %q, want what was there, then the job's output", got)
		}
	})
}
