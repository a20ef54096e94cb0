package gpusched

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockDir takes the run directory's lock, an flock released by the kernel
// when the process dies, so a killed scheduler leaves no stale lock. The
// lock file is never followed through a symbolic link nor shared with
// another name (a hard link): gpusched writes its PID into it, and must
// never write into a file someone planted there.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("lock file %s is a symbolic link; gpusched never follows one there: remove it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := checkLockFile(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockDirWaiting is lockDir, trying again for up to wait while the
// process that holds the lock is leaving (see lockPatience).
func lockDirWaiting(dir string, wait time.Duration, leaving func(pid int) bool) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := lockDir(dir)
		var held *LockedError
		if err == nil || !errors.As(err, &held) || !time.Now().Before(deadline) || !leaving(held.PID) {
			return f, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLockFile refuses a lock file that is not a plain file of its own.
func checkLockFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("lock file %s is not a regular file (%s); remove it", path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("lock file %s has %d names (hard links); gpusched writes into it, so it must have one: remove it", path, st.Nlink)
	}
	return nil
}
