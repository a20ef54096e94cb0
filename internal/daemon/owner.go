package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched"
)

// Running tasks as their owner.
//
// Every task the daemon queues carries its submitter's uid as its Owner
// (gpusched.TaskSpec.Owner); the scheduler runs an attempt of another
// user's task as that user, which it can do as root only. A daemon
// running as root makes each such run's log folder, logs/RUN, the owner's
// (mode 0700) before its tasks are queued: the attempts' logs are then
// created in it with the owner's file-system identity, and the daemon
// never creates or follows anything there with root's rights.

// ownerOf is the Owner of the tasks peer p submits: p's uid, except
// through the test seam runAsAnyone, whose other users' tasks run as the
// daemon's own user.
func (d *Daemon) ownerOf(p peer) string {
	if d.runAsAnyone && p.uid != d.uid {
		return ""
	}
	return strconv.Itoa(p.uid)
}

// runsAsOthers reports whether run r's tasks run as a user other than
// the daemon's, so that its logs go in a folder of that user's.
func (d *Daemon) runsAsOthers(r *run) bool {
	return d.uid == 0 && r.uid != d.uid && !d.runAsAnyone
}

// ownLogDir makes logs/RUN of run r, in the state directory, a folder of
// r's owner (uid, and gid when known, else -1), mode 0700: created if
// missing, given to the owner if root's, refused if it is a link, not a
// folder, or another user's. Every step is relative to the folder above,
// never through a link.
func (d *Daemon) ownLogDir(r *run, gid int) error {
	logs := filepath.Join(d.cfg.StateDir, gpusched.LogsDir)
	if err := os.Mkdir(logs, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create log folder %s: %w", logs, err)
	}
	fd, err := unix.Open(logs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open log folder %s: %w", logs, err)
	}
	defer unix.Close(fd)
	name := strconv.FormatInt(r.id, 10)
	at := filepath.Join(logs, name)
	if err := unix.Mkdirat(fd, name, 0o700); err != nil && err != unix.EEXIST {
		return fmt.Errorf("create log folder %s: %w", at, err)
	}
	rfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ELOOP || err == unix.ENOTDIR:
		return fmt.Errorf("log folder %s is not a folder (a link or a file)", at)
	case err != nil:
		return fmt.Errorf("open log folder %s: %w", at, err)
	}
	defer unix.Close(rfd)
	var st unix.Stat_t
	if err := unix.Fstat(rfd, &st); err != nil {
		return fmt.Errorf("log folder %s: %w", at, err)
	}
	switch int(st.Uid) {
	case r.uid:
	case d.uid:
		if gid < 0 {
			gid = primaryGroup(r.uid)
		}
		if err := unix.Fchown(rfd, r.uid, gid); err != nil {
			return fmt.Errorf("give log folder %s to %s: %w", at, r.user, err)
		}
	default:
		return fmt.Errorf("log folder %s belongs to uid %d, not to the run's owner %s", at, st.Uid, r.user)
	}
	if st.Mode&0o777 != 0o700 {
		if err := unix.Fchmod(rfd, 0o700); err != nil {
			return fmt.Errorf("log folder %s: %w", at, err)
		}
	}
	return nil
}

// primaryGroup returns uid's primary gid, or -1 (left as it is) when
// the user is not known.
func primaryGroup(uid int) int {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return -1
	}
	g, err := strconv.Atoi(u.Gid)
	if err != nil {
		return -1
	}
	return g
}

// openLog opens an attempt's log for reading, at path below the state
// directory, never through a symbolic link (a run's log folder is its
// owner's, who could plant one): each folder is opened relative to the
// one above it. The file must be a regular file with one link, owned by
// the run's owner or the daemon's user.
func (d *Daemon) openLog(path string, r *run) (*os.File, error) {
	root := d.cfg.StateDir
	rel, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, errorf(http.StatusInternalServerError, "log %s is not in the state directory %s", path, root)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "open state directory: %v", err)
	}
	dir, base := filepath.Split(rel)
	for _, part := range splitPath(filepath.Clean(dir)) {
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, logOpenError(path, err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	if err != nil {
		return nil, logOpenError(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		unix.Close(f)
		return nil, logOpenError(path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG, st.Nlink != 1:
		unix.Close(f)
		return nil, errorf(http.StatusInternalServerError, "log %s is not a regular file of its own", path)
	case int(st.Uid) != r.uid && int(st.Uid) != d.uid:
		unix.Close(f)
		return nil, errorf(http.StatusInternalServerError, "log %s belongs to uid %d, neither the task's owner nor the daemon's", path, st.Uid)
	}
	return os.NewFile(uintptr(f), path), nil
}

// logOpenError is a log that cannot be opened: not there yet
// (os.ErrNotExist), or a 500.
func logOpenError(path string, err error) error {
	switch {
	case err == unix.ENOENT:
		return fmt.Errorf("open log %s: %w", path, os.ErrNotExist)
	case err == unix.ELOOP, err == unix.ENOTDIR:
		return errorf(http.StatusInternalServerError, "log %s: a link or a file stands in its path; the daemon follows none", path)
	}
	return errorf(http.StatusInternalServerError, "open log %s: %v", path, err)
}

// splitPath splits a relative, clean path into its parts ("." has none).
func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	dir, base := filepath.Split(p)
	return append(splitPath(filepath.Clean(dir)), base)
}

// ownLogDirsOf gives the runs of tasks ids that run as another user their
// log folders (ownLogDir), once per run; on failure it returns the task
// whose run it was.
func (d *Daemon) ownLogDirsOf(ids []string) (string, error) {
	done := map[*run]bool{}
	for _, id := range ids {
		rn, _, ok := d.runOf(id)
		if !ok || done[rn] || !d.runsAsOthers(rn) {
			continue
		}
		done[rn] = true
		if err := d.ownLogDir(rn, -1); err != nil {
			return id, err
		}
	}
	return "", nil
}
