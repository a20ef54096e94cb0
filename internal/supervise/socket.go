package supervise

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gpusched/gpusched/internal/pidlock"
	"golang.org/x/sys/unix"
)

// The supervisor's files in the run directory.
const (
	sockName = "supervisor.sock" // the unix socket it listens on
	lockName = "supervisor.lock" // flocked for its whole life; holds its PID
	logName  = "supervisor.log"  // its diagnostics, appended to
)

// maxSunPath is the longest path a unix socket address holds: sun_path is
// 108 bytes, with the terminating NUL.
const maxSunPath = 107

// withSocketPath calls f with a path that names dir's socket and fits in a
// socket address: the path itself when short enough, else one through an
// O_PATH descriptor of dir ("/proc/self/fd/N/supervisor.sock"), open
// while f runs.
func withSocketPath(dir string, f func(path string) error) error {
	p := filepath.Join(dir, sockName)
	if len(p) <= maxSunPath {
		return f(p)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open run directory %s: %w", dir, err)
	}
	defer unix.Close(fd)
	return f("/proc/self/fd/" + strconv.Itoa(fd) + "/" + sockName)
}

// listen listens on dir's socket, with mode 0600. The caller holds the
// lock: a socket file left there by a supervisor that died is removed.
func listen(dir string) (*net.UnixListener, error) {
	var ln *net.UnixListener
	err := withSocketPath(dir, func(p string) error {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale socket: %w", err)
		}
		// No task runs yet, so the umask can change for a moment: the
		// socket is never open to others, not even before a chmod.
		old := unix.Umask(0o177)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		unix.Umask(old)
		if err != nil {
			return err
		}
		l.SetUnlinkOnClose(false) // removeSocket does, by the path that fits
		ln = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", filepath.Join(dir, sockName), err)
	}
	return ln, nil
}

// removeSocket removes dir's socket file.
func removeSocket(dir string) error {
	return withSocketPath(dir, func(p string) error {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}

// dial connects to dir's socket and checks that the supervisor there runs
// as our user.
func dial(dir string) (*net.UnixConn, error) {
	var c *net.UnixConn
	err := withSocketPath(dir, func(p string) error {
		var err error
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to the supervisor of %s: %w", dir, err)
	}
	if _, err := checkPeer(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to the supervisor of %s: %w", dir, err)
	}
	return c, nil
}

// checkPeer makes sure the process at the other end of c runs as our
// user, and returns its PID.
func checkPeer(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if gerr != nil {
		return 0, fmt.Errorf("read peer credentials: %w", gerr)
	}
	if uid := os.Getuid(); int(cred.Uid) != uid {
		return 0, fmt.Errorf("peer (PID %d) runs as uid %d, not %d", cred.Pid, cred.Uid, uid)
	}
	return int(cred.Pid), nil
}

// lockRunDir takes the supervisor lock of dir without waiting and writes
// our PID in it (pidlock). held is true when another process holds it.
func lockRunDir(dir string) (f *os.File, held bool, err error) {
	f, err = pidlock.Take(filepath.Join(dir, lockName), 0o600)
	if _, ok := errors.AsType[*pidlock.HeldError](err); ok {
		return nil, true, nil
	}
	return f, false, err
}
