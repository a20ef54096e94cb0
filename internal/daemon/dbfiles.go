package daemon

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched"
)

// The daemon's databases hold every user's commands and environments:
// they are the daemon's user's alone (mode 0600), even in a system state
// directory every user may pass through (0711). SQLite creates a
// database 0644 less the umask, and its companions (-wal, -shm,
// -journal) with the mode of the database they belong to; so the daemon
// creates each database itself, empty and 0600, before SQLite opens it,
// and takes group and other rights off those an earlier version left.
// (A gpusched run's state.db is in its user's own run directory, and
// stays as SQLite makes it.)

// databaseFiles are the daemon's databases in the state directory.
var databaseFiles = []string{gpusched.StateFile, RunsFile}

// databaseCompanions are what SQLite adds to a database's name for the
// files beside it.
var databaseCompanions = []string{"", "-wal", "-shm", "-journal"}

// privateDatabases makes the daemon's databases in stateDir, and their
// companions there, 0600: a missing database is created empty, a
// missing companion left to SQLite, which gives it the database's mode.
// It follows no link and opens nothing but regular files (what is
// neither is left for the store to refuse).
func privateDatabases(stateDir string) error {
	for _, db := range databaseFiles {
		for _, suffix := range databaseCompanions {
			path := filepath.Join(stateDir, db+suffix)
			flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
			if suffix == "" {
				flags = unix.O_RDWR | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
			}
			fd, err := unix.Open(path, flags, 0o600)
			switch {
			case err == unix.ENOENT && suffix != "":
				continue
			case err == unix.ELOOP, err == unix.ENXIO, err == unix.EISDIR:
				continue
			case err != nil:
				return fmt.Errorf("make database %s private: %w", path, err)
			}
			var st unix.Stat_t
			err = unix.Fstat(fd, &st)
			if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o077 != 0 {
				err = unix.Fchmod(fd, st.Mode&0o700)
			}
			unix.Close(fd)
			if err != nil {
				return fmt.Errorf("make database %s private: %w", path, err)
			}
		}
	}
	return nil
}
