package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// activated returns the unix listener systemd passed (socket activation:
// LISTEN_PID is this process and LISTEN_FDS at least 1, the socket being
// descriptor 3), or nil when none was passed. The variables are unset so
// that tasks do not inherit them.
func activated() (*net.UnixListener, error) {
	pid, _ := strconv.Atoi(os.Getenv("LISTEN_PID"))
	n, _ := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if pid != os.Getpid() || n < 1 {
		return nil, nil
	}
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
	syscall.CloseOnExec(3)
	f := os.NewFile(3, "socket-activation")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("socket activation: descriptor 3: %w", err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("socket activation: descriptor 3 is a %s socket; gpusched listens on unix sockets only", ln.Addr().Network())
	}
	ul.SetUnlinkOnClose(false) // systemd's socket, not ours to remove
	return ul, nil
}

// socket is the daemon's listening socket and the lock that says it is
// ours.
type socket struct {
	ln   *net.UnixListener
	path string
	lock *os.File // nil for an activated socket
}

// listenSocket listens on path, after making sure no live daemon does: a
// lock file beside it (path + ".lock") is held while a daemon listens; a
// socket file without a live listener behind it is stale and removed;
// one that answers is never taken over. mode and gid (-1: leave it) are
// set on the socket file.
func listenSocket(path string, mode fs.FileMode, gid int) (*socket, error) {
	lock, err := lockPID(path+".lock", "socket "+path)
	if err != nil {
		return nil, err
	}
	if err := removeStale(path); err != nil {
		lock.Close()
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			lock.Close()
			return nil, fmt.Errorf("socket %s: %w", path, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		lock.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return &socket{ln: ln, path: path, lock: lock}, nil
}

// removeStale removes the socket at path if nothing answers on it. Called
// with the socket's lock held, so no daemon of ours is starting there.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("socket %s: %w", path, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%s exists and is not a socket; remove it or choose another --socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("something answers on %s already (a daemon that holds no lock: another version?); stop it or choose another --socket", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("check socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// close stops listening and removes the socket file (not an activated
// one), then lets go of the lock.
func (s *socket) close() {
	s.ln.Close()
	if s.lock != nil {
		os.Remove(s.path)
		s.lock.Close()
	}
}
