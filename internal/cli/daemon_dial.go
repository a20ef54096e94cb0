package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/daemon"
)

// How the commands that talk to a daemon reach it: --socket, else
// $GPUSCHED_SOCKET, else the per-user socket, else the system one
// (client.Dial). submit alone starts a per-user daemon when none answers.

// dialDaemon connects to the daemon, saying clearly when none answers or
// it speaks another version.
func dialDaemon(ctx context.Context, socket string) (*client.Client, error) {
	c, err := client.Dial(ctx, socket)
	if err != nil {
		return nil, daemonError(err)
	}
	return c, nil
}

// daemonError words a client's error for the command line.
func daemonError(err error) error {
	var ve *client.VersionError
	switch {
	case errors.As(err, &ve):
		return fmt.Errorf("%w (this is gpusched %s)", err, Version)
	case errors.Is(err, client.ErrNoDaemon):
		return fmt.Errorf("%w; start one with `gpusched daemon` (gpusched submit starts one by itself)", err)
	}
	return err
}

// dialOrStart connects to the daemon, starting a per-user one in the
// background when none answers and neither --socket, $GPUSCHED_SOCKET nor
// a system daemon's socket names another; it says so on stderr.
func dialOrStart(ctx context.Context, socket string, stderr io.Writer) (*client.Client, error) {
	c, err := client.Dial(ctx, socket)
	if err == nil || !errors.Is(err, client.ErrNoDaemon) || socket != "" || os.Getenv(client.SocketEnv) != "" {
		return c, daemonErrorOrNil(err)
	}
	if _, serr := os.Stat(client.SystemSocket); serr == nil {
		return nil, daemonError(err) // a system daemon's socket is there: don't hide it behind one of ours
	}
	pid, logPath, err := startDaemon()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "gpusched: started a daemon for %s (pid %d, socket %s, log %s)\n", currentUser(), pid, client.UserSocket(), logPath)
	deadline := time.Now().Add(15 * time.Second)
	wait := 5 * time.Millisecond
	for {
		c, err := client.Dial(ctx, client.UserSocket())
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, client.ErrNoDaemon) || time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon started (pid %d) does not answer: %w; see %s", pid, daemonError(err), logPath)
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Millisecond)
	}
}

func daemonErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return daemonError(err)
}

// startDaemon starts "gpusched daemon" in a session of its own, its output
// appended to daemon.log in its state directory, and returns its PID.
func startDaemon() (int, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, "", fmt.Errorf("start a daemon: %w", err)
	}
	stateDir, err := daemon.DefaultStateDir()
	if err != nil {
		return 0, "", fmt.Errorf("start a daemon: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return 0, "", fmt.Errorf("start a daemon: %w", err)
	}
	logPath := filepath.Join(stateDir, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, "", fmt.Errorf("start a daemon: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "daemon")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("start a daemon: %w", err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reaped if it exits while this process lives
	return pid, logPath, nil
}

// currentUser names the user running this command.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// isDaemonID reports whether s has the form of a daemon's id: a run
// ("12") or a task of one ("13/train").
func isDaemonID(s string) bool {
	run, task, hasTask := strings.Cut(s, "/")
	if run == "" || strings.Trim(run, "0123456789") != "" {
		return false
	}
	return !hasTask || (task != "" && !strings.Contains(task, "/"))
}

// refusal marks a daemon's refusal of what the command line asked (a bad
// id, an invalid task: 400, 404, 413) as invalid input.
func refusal(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Status {
		case 400, 404, 413:
			return invalid(err)
		}
	}
	return err
}
