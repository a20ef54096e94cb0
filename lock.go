package gpusched

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/pidlock"
)

// lockDir takes the run directory's lock (pidlock: an flock released by
// the kernel when the process dies, never taken through a planted link).
func lockDir(dir string) (*os.File, error) {
	f, err := pidlock.Take(filepath.Join(dir, LockFile), 0o600)
	if held, ok := errors.AsType[*pidlock.HeldError](err); ok {
		return nil, &LockedError{Dir: dir, PID: held.PID}
	}
	return f, err
}

// unlockDir gives back a lock lockDir took. It unlocks explicitly: a
// child being forked by another goroutine holds a copy of the descriptor
// until it execs, and closing ours alone would leave the lock held by that
// copy for a moment.
func unlockDir(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// lockDirWaiting is lockDir, trying again for up to wait while the
// process that holds the lock is leaving (see lockPatience), unless done
// is closed first (then it gives the *LockedError it had at once).
func lockDirWaiting(dir string, wait time.Duration, leaving func(pid int) bool, done <-chan struct{}) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := lockDir(dir)
		var held *LockedError
		if err == nil || !errors.As(err, &held) || !time.Now().Before(deadline) || !leaving(held.PID) {
			return f, err
		}
		select {
		case <-done:
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
