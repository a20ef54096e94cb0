package supervise

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor/local"
)

// connectWait bounds how long connecting, with starting a supervisor and
// waiting for it, may take.
const connectWait = 10 * time.Second

// errNoSupervisor: no supervisor answers for the run directory.
var errNoSupervisor = errors.New("no supervisor runs")

// errBusy: a supervisor just started found the lock held by another,
// which is exiting or about to listen.
var errBusy = errors.New("another supervisor holds the lock")

// connect connects to the supervisor of e.RunDir and says hello. When none
// answers, it starts one if spawn allows, else fails with errNoSupervisor.
// A supervisor that hangs up at once is exiting (it lingered idle): then
// one is started after it, or, without spawn, none runs.
func (e *Executor) connect(spawn bool) (*conn, error) {
	dir, err := e.runDir()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(connectWait)
	pause := 5 * time.Millisecond
	for {
		nc, err := dial(dir)
		if err == nil {
			c, herr := handshake(nc, dir)
			if herr == nil {
				return c, nil
			}
			if !errors.Is(herr, errHungUp) {
				return nil, herr
			}
			err = herr
		} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ECONNREFUSED) {
			return nil, err // not for want of a supervisor: starting one would not help
		}
		if !spawn {
			return nil, fmt.Errorf("%w for %s: %v", errNoSupervisor, dir, err)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		switch serr := e.spawn(dir); {
		case errors.Is(serr, errBusy):
			// Another one holds the lock: on its way in (it will listen)
			// or out (it will let go).
			time.Sleep(pause)
			pause = min(2*pause, 200*time.Millisecond)
		case serr != nil:
			return nil, serr
		}
	}
}

// runDir returns e.RunDir made absolute.
func (e *Executor) runDir() (string, error) {
	if e.RunDir == "" {
		return "", errors.New("supervise: Executor.RunDir is not set")
	}
	dir, err := filepath.Abs(e.RunDir)
	if err != nil {
		return "", fmt.Errorf("make run directory absolute: %w", err)
	}
	return dir, nil
}

// errHungUp: the supervisor closed the connection before it said hello.
var errHungUp = errors.New("the supervisor hung up")

// handshake says hello on nc and checks the answer; then the connection's
// reader starts.
func handshake(nc *net.UnixConn, dir string) (*conn, error) {
	fail := func(err error) (*conn, error) { nc.Close(); return nil, err }
	nc.SetDeadline(time.Now().Add(connectWait))
	b, _ := json.Marshal(&message{Type: msgHello, Version: protocolVersion})
	if _, err := nc.Write(append(b, '\n')); err != nil {
		return fail(fmt.Errorf("%w: %v", errHungUp, err))
	}
	sc := bufio.NewScanner(nc)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	if !sc.Scan() {
		return fail(fmt.Errorf("%w: %v", errHungUp, sc.Err()))
	}
	var m message
	if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
		return fail(fmt.Errorf("read the supervisor's hello: %w", err))
	}
	if m.Type != msgHello || m.Version != protocolVersion {
		return fail(fmt.Errorf("the supervisor answered %s %q (version %d), not hello with version %d: a gpusched of another version started it; stop it (SIGTERM to PID in supervisor.lock) once its attempts are over",
			m.Type, m.Error, m.Version, protocolVersion))
	}
	nc.SetDeadline(time.Time{})
	c := &conn{nc: nc, dir: dir, dead: make(chan struct{}), waiters: map[string]*waiter{}}
	go c.read(sc)
	return c, nil
}

// spawn starts a supervisor for dir and waits until it listens. It says
// so on a pipe it inherits: "ready", or "busy" when another holds the
// lock (errBusy).
func (e *Executor) spawn(dir string) error {
	bin := e.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("start supervisor: find this program: %w", err)
		}
	}
	logf, err := local.OpenLog(dir, filepath.Join(dir, logName))
	if err != nil {
		return fmt.Errorf("start supervisor: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("start supervisor: %w", err)
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start supervisor: %w", err)
	}
	defer pr.Close()
	cmd := &exec.Cmd{
		Path: bin,
		Args: []string{bin},
		Env:  []string{EnvVar + "=" + dir, readyVar + "=3", "PATH=" + os.Getenv("PATH")},
		Dir:  "/",
		// Its own session: a terminal's Ctrl-C or hang-up does not reach it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		Stdin:       devnull,
		Stdout:      devnull,
		Stderr:      logf,
		ExtraFiles:  []*os.File{pw},
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return fmt.Errorf("start supervisor %s: %w", bin, err)
	}
	go cmd.Wait() // reaped when it exits, so it never lingers as a zombie
	pr.SetReadDeadline(time.Now().Add(connectWait))
	word, _ := bufio.NewReader(pr).ReadString('\n')
	switch strings.TrimSpace(word) {
	case "ready":
		return nil
	case "busy":
		return errBusy
	}
	return fmt.Errorf("start supervisor %s: it did not get ready (see %s)", bin, filepath.Join(dir, logName))
}
