package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/gpusched/gpusched/internal/filekind"
)

// ErrUnsafeFile is returned when a file of the state database in the run
// directory (state.db, state.db-wal, state.db-shm) is a symbolic link or not
// a regular file. gpusched never follows links nor opens special files in
// its run directory, so that a planted link cannot make it write elsewhere.
var ErrUnsafeFile = errors.New("not a regular file")

// ErrGone is returned by Apply when the state database is no longer the
// file that was opened: it was deleted, or replaced by another file, while
// the run went on. Nothing more can be saved.
var ErrGone = errors.New("the run cannot save its state")

// UnsafeFileError names a state database file that is a link or a special
// file. It matches ErrUnsafeFile.
type UnsafeFileError struct {
	Path string // the file
	Kind string // what it is: "a symbolic link", "a named pipe", "a folder"...
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("state database file %s is %s, not a regular file; gpusched does not follow links or open special files in its run directory: remove it", e.Path, e.Kind)
}

// Is reports whether target is ErrUnsafeFile.
func (e *UnsafeFileError) Is(target error) bool { return target == ErrUnsafeFile }

// checkFiles refuses, before anything is opened, a database file or one of
// its companions that is a symbolic link or not a regular file. Missing
// files are fine: SQLite creates them.
func checkFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open state db: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return &UnsafeFileError{Path: p, Kind: filekind.Of(fi.Mode())}
		}
	}
	return nil
}

// fileID identifies a file beyond its name: a path deleted and created
// again, or renamed over, gets another one.
type fileID struct{ dev, ino uint64 }

// identify returns the identity of the file at path, without following a
// link (a link put in its place is another file).
func identify(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return fileID{}, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil // Dev is not uint64 on every platform
}

// checkSame fails with ErrGone when the file at the database's path is no
// longer the one opened: one lstat, cheap enough before every commit.
func (s *SQLite) checkSame() error {
	id, err := identify(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("state database %s was deleted while the run went on: %w", s.path, ErrGone)
	case err != nil:
		return fmt.Errorf("check state db %s: %w", s.path, err)
	case id != s.id:
		return fmt.Errorf("state database %s was replaced by another file while the run went on: %w", s.path, ErrGone)
	}
	return nil
}
