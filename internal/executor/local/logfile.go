package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// OpenLog opens the log file at path for appending, creating it and the
// folders between root (the run directory) and it as needed, without
// following a symbolic link anywhere below root: each folder is opened
// relative to the one above it with O_NOFOLLOW, and so is the file, so a
// link planted in the run directory (logs/TASK -> /etc, attempt-1.log ->
// ~/.bashrc) is refused rather than written through, even if it appears
// while we look. The file must be a regular file with no other hard link.
// With root "", the folders are created as they are and only the file is
// protected. Folders are opened O_PATH: passing through one (mode 0711,
// as a system daemon's state directory) is enough.
//
// Every error names the path. Execute uses it for Job.LogPath and
// Job.LogRoot; whatever else writes into a run directory's logs should too.
func OpenLog(root, path string) (*os.File, error) {
	return openLog(root, path, true)
}

// openLog is OpenLog; shared says whether the log root held open for
// every attempt (see held) may be used: not under another user's
// file-system identity (OpenLogAs), whose rights must decide the whole
// path, as when it is opened anew.
func openLog(root, path string, shared bool) (*os.File, error) {
	if f, ok := createLog(root, path, shared); ok {
		return f, nil
	}
	dir, base := filepath.Split(filepath.Clean(path))
	dir = filepath.Clean(dir)
	var parts []string
	if root == "" {
		root = dir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create log folder: %w", err)
		}
	} else {
		rel, err := filepath.Rel(root, dir)
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			return nil, fmt.Errorf("log %s is not inside %s", path, root)
		}
		if rel != "." {
			parts = strings.Split(rel, string(filepath.Separator))
		}
	}
	fd, err := openLogFolder(root, parts, true)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO planted as the log must not hang the open.
	f, err := unix.Openat(fd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	unix.Close(fd)
	switch {
	case err == unix.ELOOP:
		return nil, fmt.Errorf("log file %s is a symbolic link; gpusched follows none in its run directory", path)
	case err == unix.ENXIO:
		return nil, fmt.Errorf("log file %s is not a regular file", path)
	case err != nil:
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		unix.Close(f)
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(f)
		return nil, fmt.Errorf("log file %s is not a regular file", path)
	}
	if st.Nlink > 1 {
		unix.Close(f)
		return nil, fmt.Errorf("log file %s has %d hard links; gpusched writes only to its own files", path, st.Nlink)
	}
	if _, err := unix.FcntlInt(uintptr(f), unix.F_SETFL, unix.O_APPEND); err != nil { // O_NONBLOCK off
		unix.Close(f)
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	return os.NewFile(uintptr(f), path), nil
}

// createLog is OpenLog's short way, for the usual case: a log file that
// does not exist yet, in a folder that does. One openat2 below root
// creates it (O_EXCL), following no symbolic link below root
// (RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH): a file it creates is a regular
// file with one link, so there is nothing more to check. It reports false
// on any failure (the file exists, a folder is missing, a link is in the
// way, no openat2 before Linux 5.6), and OpenLog then takes the long way,
// which creates the folders, appends to a file that exists and says what
// is wrong: the short way never decides an error. It saves some ten
// system calls per attempt (see docs/benchmarks.md).
func createLog(root, path string, shared bool) (*os.File, bool) {
	if root == "" {
		return nil, false
	}
	rel, err := filepath.Rel(root, filepath.Clean(path))
	if err != nil || !filepath.IsLocal(rel) {
		return nil, false
	}
	if !shared {
		dfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, false
		}
		fd, err := createBelow(dfd, rel)
		unix.Close(dfd)
		if err != nil {
			return nil, false
		}
		return os.NewFile(uintptr(fd), path), true
	}
	held.mu.RLock()
	if held.path == root {
		fd, err := createBelow(held.fd, rel)
		held.mu.RUnlock()
		switch err {
		case nil:
			return os.NewFile(uintptr(fd), path), true
		case unix.EEXIST:
			return nil, false
		}
		// The folder held may be gone (removed, replaced): find it
		// again by its path.
	} else {
		held.mu.RUnlock()
	}
	dfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	fd, err := createBelow(dfd, rel)
	held.keep(root, dfd)
	if err != nil {
		return nil, false
	}
	return os.NewFile(uintptr(fd), path), true
}

// createBelow creates the file rel below the folder dfd, following no
// symbolic link and not leaving it.
func createBelow(dfd int, rel string) (int, error) {
	return unix.Openat2(dfd, rel, &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_APPEND | unix.O_CLOEXEC,
		Mode:    0o644,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
}

// held is the log root createLog opened last, kept open (O_PATH) for the
// next logs below it: a scheduler writes every attempt's log below its
// run directory, and resolving the run directory's path again for each
// cost as much as creating the file. A folder removed or replaced since
// makes the next create fail (ENOENT), and the root is opened again by
// its path. (A run directory moved away while its scheduler runs would
// take the logs with it, as its open state.db does; the scheduler's
// commits then fail, as the state database is no longer at its path.)
var held heldRoot

type heldRoot struct {
	mu   sync.RWMutex // guards the fields below; held for reading while fd is used
	path string       // "": none
	fd   int
}

// keep makes fd, just opened for root, the one held, closing the one
// held before.
func (h *heldRoot) keep(root string, fd int) {
	h.mu.Lock()
	if h.path != "" {
		unix.Close(h.fd)
	}
	h.path, h.fd = root, fd
	h.mu.Unlock()
}

// openLogFolder opens, O_PATH, the folder root/parts..., each part
// relative to the one above it and never through a symbolic link;
// creating the missing ones (0755) if create.
func openLogFolder(root string, parts []string, create bool) (int, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open log folder %s: %w", root, err)
	}
	at := root
	for _, p := range parts {
		at = filepath.Join(at, p)
		next, err := unix.Openat(fd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT && create {
			if err := unix.Mkdirat(fd, p, 0o755); err != nil && err != unix.EEXIST {
				unix.Close(fd)
				return -1, fmt.Errorf("create log folder %s: %w", at, err)
			}
			next, err = unix.Openat(fd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		unix.Close(fd)
		switch {
		case err == unix.ELOOP:
			return -1, fmt.Errorf("log folder %s is a symbolic link; gpusched follows none in its run directory", at)
		case err == unix.ENOTDIR:
			return -1, fmt.Errorf("log folder %s is not a folder", at)
		case err != nil:
			return -1, fmt.Errorf("open log folder %s: %w", at, err)
		}
		fd = next
	}
	return fd, nil
}

// ReadLog opens the log file at path, below root (the run directory),
// for reading, with OpenLog's rules and creating nothing: no symbolic
// link is followed below root, and the file must be a regular file with
// no other hard link, owned by uid (whose attempt wrote it). Whoever
// reads a log a task's owner may have tampered with, with rights the
// owner lacks (a scheduler running as root), uses it.
func ReadLog(root, path string, uid int) (*os.File, error) {
	rel, err := filepath.Rel(root, filepath.Clean(path))
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("log %s is not inside %s", path, root)
	}
	dir, base := filepath.Split(rel)
	var parts []string
	if dir = filepath.Clean(dir); dir != "." {
		parts = strings.Split(dir, string(filepath.Separator))
	}
	fd, err := openLogFolder(root, parts, false)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO planted as the log must not hang the open.
	f, err := unix.Openat(fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	switch {
	case err == unix.ELOOP:
		return nil, fmt.Errorf("log file %s is a symbolic link; gpusched follows none in its run directory", path)
	case err != nil:
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		unix.Close(f)
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("log file %s is not a regular file", path)
	case st.Nlink > 1:
		err = fmt.Errorf("log file %s has %d hard links; gpusched reads only its own files", path, st.Nlink)
	case int(st.Uid) != uid:
		err = fmt.Errorf("log file %s belongs to uid %d, not to %d, whose attempt wrote it", path, st.Uid, uid)
	}
	if err != nil {
		unix.Close(f)
		return nil, err
	}
	return os.NewFile(uintptr(f), path), nil
}
