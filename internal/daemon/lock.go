package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpusched/gpusched/internal/pidlock"
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

// lockPID takes the lock file at path for this process (pidlock); a lock
// held by another process is a *LockedError naming it.
func lockPID(path, what string) (*os.File, error) {
	f, err := pidlock.Take(path, 0o600)
	if held, ok := errors.AsType[*pidlock.HeldError](err); ok {
		return nil, &LockedError{What: what, PID: held.PID}
	}
	return f, err
}

// lockStateDir takes the state directory for this daemon.
func lockStateDir(dir string) (*os.File, error) {
	return lockPID(filepath.Join(dir, LockFile), "state directory "+dir)
}
