// Package pidlock is the lock file that gpusched's processes hold while
// they own something (a run directory, a supervisor's run directory, a
// daemon's state directory or socket): an flock the kernel releases when
// the process dies, so a killed process leaves no stale lock, with the
// holder's PID written in it so that the next one can say who holds it.
package pidlock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// HeldError: another process holds the lock.
type HeldError struct {
	Path string
	PID  int // the holder's, as it wrote it; 0 if unknown
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lock %s is held by pid %d", e.Path, e.PID)
}

// Take opens the lock file at path (created with perm), takes it without
// waiting and writes this process's PID in it. The file is never opened
// through a symbolic link nor used when it is not a regular file of one
// name (a hard link): the PID is written into it, and must never go into
// a file someone planted there. A lock another process holds is a
// *HeldError.
func Take(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("lock file %s is a symbolic link; gpusched never follows one there: remove it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := check(f, path, perm); err != nil {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return nil, &HeldError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write lock %s: %w", path, err)
	}
	return f, nil
}

// check refuses a lock file that is not a plain file of its own, and
// narrows the mode of one made wider by an older gpusched to perm: anyone
// who can open a lock file can flock it, and so keep its owner from
// starting.
func check(f *os.File, path string, perm os.FileMode) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open lock file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("lock file %s is not a regular file (%s); remove it", path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("lock file %s has %d names (hard links); gpusched writes into it, so it must have one: remove it", path, st.Nlink)
	}
	if fi.Mode().Perm()&^perm != 0 {
		if err := f.Chmod(fi.Mode().Perm() & perm); err != nil {
			return fmt.Errorf("narrow lock file %s to mode %v: %w", path, perm, err)
		}
	}
	return nil
}
