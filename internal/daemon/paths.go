package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gpusched/gpusched/client"
)

// The system daemon's places (gpusched daemon --system).
const (
	SystemStateDir = "/var/lib/gpusched"
	// SystemGroup, when it exists, owns the system socket (mode 0660), so
	// that its members may connect. Without it only root may.
	SystemGroup = "gpusched"
)

// DefaultStateDir is the per-user daemon's state directory:
// $XDG_STATE_HOME/gpusched, else ~/.local/state/gpusched.
func DefaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gpusched"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state directory: %w (set XDG_STATE_HOME or give --state-dir)", err)
	}
	return filepath.Join(home, ".local", "state", "gpusched"), nil
}

// privateDir makes sure dir is a folder of this user's that nobody else
// can enter: created mode 0700 if missing; refused if it is a symbolic
// link, is owned by another user, or lets others in.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create socket folder %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket folder %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir():
		return fmt.Errorf("socket folder %s is not a folder (a link or a file): remove it", dir)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("socket folder %s belongs to uid %d, not to you (uid %d): remove it, or set XDG_RUNTIME_DIR or --socket", dir, st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("socket folder %s lets other users in (mode %o): make it 0700 or remove it", dir, fi.Mode().Perm())
	}
	return nil
}

// systemGroup returns the gid of SystemGroup, and whether it exists.
func systemGroup() (int, bool) {
	g, err := user.LookupGroup(SystemGroup)
	if err != nil {
		return 0, false
	}
	gid, err := strconv.Atoi(g.Gid)
	return gid, err == nil
}

// resolvePaths fills the socket and state directory of cfg's mode that
// were not given, and prepares the default socket's folder.
func resolvePaths(cfg *Config) error {
	if cfg.System {
		if os.Geteuid() != 0 {
			return errors.New("the system daemon (--system) runs as root; without --system, gpusched daemon runs your own")
		}
		if cfg.StateDir == "" {
			cfg.StateDir = SystemStateDir
		}
		if cfg.Socket == "" && cfg.Listener == nil {
			cfg.Socket = client.SystemSocket
			if err := os.MkdirAll(filepath.Dir(cfg.Socket), 0o755); err != nil {
				return fmt.Errorf("create socket folder: %w", err)
			}
		}
	} else {
		if cfg.StateDir == "" {
			d, err := DefaultStateDir()
			if err != nil {
				return err
			}
			cfg.StateDir = d
		}
		if cfg.Socket == "" && cfg.Listener == nil {
			cfg.Socket = client.UserSocket()
			if err := privateDir(client.UserSocketDir()); err != nil {
				return err
			}
		}
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", cfg.StateDir, err)
	}
	cfg.StateDir = abs
	if cfg.Socket != "" {
		if cfg.Socket, err = filepath.Abs(cfg.Socket); err != nil {
			return fmt.Errorf("socket %s: %w", cfg.Socket, err)
		}
	}
	mode := fs.FileMode(0o700)
	if cfg.System {
		mode = 0o711 // users' log folders go below
	}
	if err := os.MkdirAll(cfg.StateDir, mode); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	if cfg.System {
		// Users' attempts open their logs, as themselves, below it: they
		// must pass through (not list it).
		fi, err := os.Stat(cfg.StateDir)
		if err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o011 != 0o011 {
			if err := os.Chmod(cfg.StateDir, perm|0o011); err != nil {
				return fmt.Errorf("state directory: let users pass through: %w", err)
			}
		}
	}
	return nil
}
