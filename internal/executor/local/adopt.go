package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// ErrNotChild: Adopt was given a process that is not an unreaped child of
// this process, or not the one its start time names.
var ErrNotChild = errors.New("not a child of this process")

// Adopt follows to its end an attempt that another process started with
// Execute and that is now this process's child: its parent died and the
// kernel gave its processes to this one, a child subreaper
// (PR_SET_CHILD_SUBREAPER). p is its leader, as its handle names it;
// since is when it started running, from which its job.Timeout counts.
// From here on it is as if Execute had started it: stopped when ctx ends
// or job.KillNow closes, killed with whatever it left behind once the
// leader exits, the leader reaped. A leader that already exited (a zombie)
// ends at once with its exit status. When p is not a child of this
// process, it returns at once with Reason Lost and ErrNotChild.
func (e *Executor) Adopt(ctx context.Context, job executor.Job, p executor.Process, since time.Time) executor.Result {
	res := executor.Result{Start: since, Started: true}
	st, ok := procfs.Read(p.PID)
	if !ok || st.PPID != os.Getpid() || p.StartTicks != 0 && st.StartTicks != p.StartTicks {
		res.End, res.Reason, res.Err = time.Now(), executor.Lost, ErrNotChild
		return res
	}
	// Its turn is now: leaders started before it (by this process, maybe
	// before since) are read as any other process.
	tr := &tracker{self: os.Getpid(), leader: p.PID, token: job.Token, began: since, turn: ours.take()}
	if e.Cgroups {
		tr.cg = openCgroup(job.Token)
	}
	reap := func() (syscall.WaitStatus, error) {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(p.PID, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			return syscall.WaitStatus(ws), err
		}
	}
	return e.follow(ctx, job, p.PID, tr, res, reap)
}

// openCgroup returns the cgroup that Execute made for the attempt with
// token, when it is still there; else nil.
func openCgroup(token string) *cgroup {
	base := cgroupBase()
	if base == "" || token == "" {
		return nil
	}
	name := cgroupName(token)
	path := filepath.Join(base, name)
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return &cgroup{path: path, name: filepath.Join(cgroups.own, name), fd: fd}
}
