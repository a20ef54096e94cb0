package local

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
)

// OpenLogAs is OpenLog with u's file-system identity (setfsuid and
// setfsgid, which hold for one thread): the folders it creates and the
// file are u's, and u's rights, not the scheduler's, decide what may be
// opened or created. A scheduler running as root opens its users' logs
// this way, never following, with root's rights, a path a user controls.
// With u nil it is OpenLog.
//
// The work is done on a thread of its own, locked to the goroutine; if the
// identity cannot be put back, the thread is not given back to the Go
// runtime and ends with the goroutine.
func OpenLogAs(root, path string, u *executor.User) (*os.File, error) {
	if u == nil {
		return OpenLog(root, path)
	}
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		oldGID, _ := unix.SetfsgidRetGid(int(u.GID))
		oldUID, _ := unix.SetfsuidRetUid(int(u.UID))
		var r result
		if fsuid() != int(u.UID) || fsgid() != int(u.GID) {
			r.err = fmt.Errorf("open log %s as user %s: cannot take the user's file-system identity", path, u.Name)
		} else {
			r.f, r.err = openLog(root, path, false)
		}
		unix.SetfsuidRetUid(oldUID)
		unix.SetfsgidRetGid(oldGID)
		restored = fsuid() == oldUID && fsgid() == oldGID
		done <- r
	}()
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("as user %s: %w", u.Name, r.err)
	}
	return r.f, nil
}

// fsuid and fsgid read the thread's file-system identity: setfsuid and
// setfsgid with an invalid id change nothing and return the current one.
func fsuid() int { id, _ := unix.SetfsuidRetUid(-1); return id }
func fsgid() int { id, _ := unix.SetfsgidRetGid(-1); return id }
