package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile, in the state directory, is held (flock) by the daemon that
// uses it, and holds its PID.
const LockFile = "daemon.lock"

// LockedError: another daemon holds the state directory (or the socket).
type LockedError struct {
	What string // "state directory /x" or "socket /y"
	PID  int    // the holder's, 0 if unknown
}

func (e *LockedError) Error() string {
	holder := "another gpusched daemon"
	if e.PID > 0 {
		holder = fmt.Sprintf("a gpusched daemon (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is in use by %s; stop it with `gpusched daemon stop` or choose another", e.What, holder)
}

// lockPID takes the lock file at path for this process and writes its PID
// there; a lock held by another process is a *LockedError naming it.
func lockPID(path, what string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return nil, &LockedError{What: what, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("write lock %s: %w", path, err)
		}
	}
	return f, nil
}

// lockStateDir takes the state directory for this daemon.
func lockStateDir(dir string) (*os.File, error) {
	return lockPID(filepath.Join(dir, LockFile), "state directory "+dir)
}
