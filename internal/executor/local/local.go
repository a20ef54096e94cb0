package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// Executor runs jobs as local process groups. The zero value is ready.
type Executor struct{}

var _ executor.Executor = (*Executor)(nil)

// Execute runs job; see executor.Executor.
func (*Executor) Execute(ctx context.Context, job executor.Job, started func(executor.Process)) executor.Result {
	res := executor.Result{Start: time.Now()}
	fail := func(err error) executor.Result {
		res.End, res.Err = time.Now(), err
		return res
	}
	if len(job.Args) == 0 {
		return fail(errors.New("empty command"))
	}
	if err := os.MkdirAll(filepath.Dir(job.LogPath), 0o755); err != nil {
		return fail(fmt.Errorf("create log folder: %w", err))
	}
	logf, err := os.OpenFile(job.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(fmt.Errorf("open log: %w", err))
	}
	defer logf.Close()

	if job.Dir != "" {
		if fi, err := os.Stat(job.Dir); err != nil || !fi.IsDir() {
			var pe *fs.PathError
			switch {
			case err == nil:
				err = errors.New("not a directory")
			case errors.As(err, &pe):
				err = pe.Err
			}
			err = fmt.Errorf("working directory %s: %w", job.Dir, err)
			fmt.Fprintf(logf, "gpusched: %v\n", err)
			return fail(err)
		}
	}
	path, err := lookPath(job.Args[0], job.Env, job.Dir)
	if err != nil {
		fmt.Fprintf(logf, "gpusched: %v\n", err)
		return fail(err)
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        job.Args,
		Env:         job.Env,
		Dir:         job.Dir,
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		err = fmt.Errorf("start %s: %w", job.Args[0], unwrapPathError(err))
		fmt.Fprintf(logf, "gpusched: %v\n", err)
		return fail(err)
	}
	res.Started = true
	pid := cmd.Process.Pid
	if started != nil {
		started(executor.Process{PID: pid, PGID: pid, StartTicks: StartTicks(pid)})
	}

	// The leader is waited for without being reaped (WNOWAIT): while it is
	// an unreaped zombie its PID, and so the group id, cannot be reused, so
	// signalling the group can never hit a stranger.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()

	select {
	case <-exited:
	case <-ctx.Done():
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		grace := time.NewTimer(job.KillGrace)
		select {
		case <-exited:
		case <-grace.C:
		case <-job.KillNow:
		}
		grace.Stop()
	}
	// The leader has exited (or the grace is over): nothing else of the
	// group may live on.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	waitErr := cmd.Wait()
	res.End = time.Now()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		res.Err = fmt.Errorf("wait: %w", waitErr)
	case ws.Signaled():
		res.Signal = ws.Signal()
	default:
		res.ExitCode = ws.ExitStatus()
	}
	return res
}

// lookPath finds name the way a shell would with the job's own PATH: a name
// with a slash is taken as is (relative to dir), a bare name is searched.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, d := range filepath.SplitList(pathVar) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		full := p
		if !filepath.IsAbs(full) && dir != "" {
			full = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(full); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if !filepath.IsAbs(p) {
				// exec resolves relative paths against the child's dir.
				return "./" + p, nil
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("start %s: executable file not found in PATH", name)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// StartTicks returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/PID/stat), or 0 if it cannot be read. Together
// with the PID it names a process uniquely across PID reuse.
func StartTicks(pid int) uint64 {
	st, _ := procfs.Read(pid)
	return st.StartTicks
}
