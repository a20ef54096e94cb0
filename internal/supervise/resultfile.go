package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
)

// ResultPath is where the supervisor records how the attempt logging to
// logPath ended: the log's path with ".result" in place of ".log".
func ResultPath(logPath string) string {
	return strings.TrimSuffix(logPath, ".log") + ".result"
}

// maxResultSize bounds what ReadResult reads: a result is a few hundred
// bytes, a larger file is not one.
const maxResultSize = 1 << 20

// ReadResult returns how job ended as its result file records it. ok is
// false when there is none for this attempt (no file, or one another
// attempt with the same log path left: its id is not job.Token); err says
// why a file that is there cannot be read. Like the log, the file is read
// without following a symbolic link below job.LogRoot.
func ReadResult(job executor.Job) (r executor.Result, ok bool, err error) {
	return readResult(job.LogRoot, job.LogPath, job.Token)
}

// readResult reads the result of attempt id logging to logPath.
func readResult(root, logPath, id string) (r executor.Result, ok bool, err error) {
	if logPath == "" || id == "" {
		return r, false, nil
	}
	path := ResultPath(logPath)
	dir, base := filepath.Split(filepath.Clean(path))
	dfd, err := openDir(root, filepath.Clean(dir), false)
	if errors.Is(err, unix.ENOENT) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	switch {
	case err == unix.ENOENT:
		return r, false, nil
	case err == unix.ELOOP:
		return r, false, fmt.Errorf("result file %s is a symbolic link; gpusched follows none in its run directory", path)
	case err != nil:
		return r, false, fmt.Errorf("open result %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return r, false, fmt.Errorf("result file %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxResultSize))
	if err != nil {
		return r, false, fmt.Errorf("read result %s: %w", path, err)
	}
	var rec resultRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return r, false, fmt.Errorf("read result %s: %w", path, err)
	}
	if rec.Version != resultVersion {
		return r, false, fmt.Errorf("read result %s: unknown version %d", path, rec.Version)
	}
	if rec.ID != id {
		return r, false, nil
	}
	return rec.result(), true, nil
}

// tmpSeq makes the names of temporary result files unique in this process.
var tmpSeq atomic.Uint64

// writeResult records rec as the result file of the log at logPath: written whole under a
// temporary name in the same folder, then renamed over the result's name,
// so a reader sees the whole record or none. Neither the folders below
// root nor the temporary file are reached through a symbolic link
// (the rename replaces a link planted at the result's name, never writes
// through it).
//
// It does not fsync. The record matters when the scheduler dies and the
// machine does not: then the page cache holds it for whoever reads it
// next. When the machine crashes, the attempt dies with it and its outcome
// is unknown anyway; a record lost with the cache then tells nothing the
// crash did not, and an fsync per attempt would cost more than the rest of
// the supervisor's work together.
func writeResult(root, logPath string, rec *resultRecord) error {
	path := ResultPath(logPath)
	dir, base := filepath.Split(filepath.Clean(path))
	dfd, err := openDir(root, filepath.Clean(dir), true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("write result %s: %w", path, err)
	}
	b = append(b, '\n')
	var tmp string
	var fd int
	for try := 0; ; try++ {
		tmp = fmt.Sprintf(".%s.%d-%d.tmp", base, os.Getpid(), tmpSeq.Add(1))
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != unix.EEXIST || try == 8 { // left by a supervisor that had our PID
			break
		}
	}
	if err != nil {
		return fmt.Errorf("write result %s: %w", path, err)
	}
	_, err = unix.Write(fd, b) // a regular file takes a small write whole
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write result %s: %w", path, err)
	}
	return nil
}

// openDir opens the folder dir, below root, without following a symbolic
// link below root, as local.OpenLog does for the log's folder; create
// makes missing folders. With root "", dir is opened as it is (made first
// when create).
func openDir(root, dir string, create bool) (int, error) {
	var parts []string
	if root == "" {
		root = dir
		if create {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return -1, fmt.Errorf("create result folder: %w", err)
			}
		}
	} else {
		rel, err := filepath.Rel(root, dir)
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			return -1, fmt.Errorf("result folder %s is not inside %s", dir, root)
		}
		if rel != "." {
			parts = strings.Split(rel, string(filepath.Separator))
		}
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Open(root, flags, 0)
	if err != nil {
		return -1, fmt.Errorf("open result folder %s: %w", root, err)
	}
	at := root
	for _, p := range parts {
		at = filepath.Join(at, p)
		next, err := unix.Openat(fd, p, flags|unix.O_NOFOLLOW, 0)
		if err == unix.ENOENT && create {
			if err := unix.Mkdirat(fd, p, 0o755); err != nil && err != unix.EEXIST {
				unix.Close(fd)
				return -1, fmt.Errorf("create result folder %s: %w", at, err)
			}
			next, err = unix.Openat(fd, p, flags|unix.O_NOFOLLOW, 0)
		}
		unix.Close(fd)
		switch {
		case err == unix.ELOOP:
			return -1, fmt.Errorf("result folder %s is a symbolic link; gpusched follows none in its run directory", at)
		case err == unix.ENOTDIR:
			return -1, fmt.Errorf("result folder %s is not a folder", at)
		case err != nil:
			return -1, fmt.Errorf("open result folder %s: %w", at, err)
		}
		fd = next
	}
	return fd, nil
}
