package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The front and its scheduler. A command the user starts (the front)
// checks its input, then has the supervisor of the run directory start
// the scheduler as its own child, with the front's argv, environment,
// working directory, umask, stdin, stdout and stderr, plus a status pipe:
//
//	front (the user's "gpusched run")
//	  └ asks over the socket ─→ supervisor (one per run directory, a subreaper)
//	                              └ scheduler (same binary, same argv)
//	                                  └ tasks (its children, forked by it)
//
// The scheduler runs attempts in its own process (Journaled), so no
// message crosses processes per attempt; the supervisor only hears of them
// if the scheduler dies, through the journal it gave it (journal.go).
// The front forwards its signals to the scheduler and exits with the code
// the scheduler writes on the status pipe before it exits. Each death:
//
//   - the front dies (kill -9): the scheduler sees the status pipe lose
//     its reader and exits at once without stopping its tasks, as a
//     scheduler killed outright would; they are reparented to the
//     supervisor, which adopts them from the journal.
//   - the scheduler dies: the front reads the end of the status pipe with
//     no code, says so and exits 1; the supervisor adopts the tasks.
//   - the supervisor dies: the scheduler runs on (its tasks are its own);
//     if it dies too, its tasks are reparented to init, and the next
//     scheduler finds them lost, as before.

// SchedulerSpec is the scheduler a front has its supervisor start.
type SchedulerSpec struct {
	// Binary is the program to run, which must call MaybeServe and
	// MaybeScheduler first thing; empty: this process's executable. It
	// also serves as the supervisor when none runs.
	Binary string
	// Args is its argv, Args[0] included; Env its environment; Dir its
	// working directory (absolute).
	Args []string
	Env  []string
	Dir  string
	// Stdin, Stdout and Stderr are its standard descriptors: the
	// front's, usually, so that its output goes where the front's would.
	Stdin, Stdout, Stderr *os.File
	// Files are more descriptors it inherits, in order: ThisScheduler's
	// Files.
	Files []*os.File
}

// Front is a front's hold on the scheduler that StartScheduler started.
type Front struct {
	// PID is the scheduler's.
	PID int

	status *os.File // the status pipe's reading end
	pidfd  int      // the scheduler, for signals; -1: none (before Linux 5.3)
}

// StartScheduler has the supervisor of runDir, started if none runs,
// start the scheduler that spec describes as its child, with this process
// as its front, and returns once it runs. The scheduler finds itself with
// ThisScheduler. The files in spec stay open here; close them once it
// runs.
func StartScheduler(runDir string, spec SchedulerSpec) (*Front, error) {
	bin := spec.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("start scheduler: find this program: %w", err)
		}
	}
	e := &Executor{RunDir: runDir, Binary: bin}
	defer e.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start scheduler: %w", err)
	}
	defer pw.Close()
	files := append([]*os.File{spec.Stdin, spec.Stdout, spec.Stderr, pw}, spec.Files...)
	fds := make([]int, len(files))
	for i, f := range files {
		if f == nil {
			pr.Close()
			return nil, fmt.Errorf("start scheduler: descriptor %d is missing", i)
		}
		fds[i] = int(f.Fd())
	}
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	id := "scheduler-" + strconv.Itoa(os.Getpid())
	c, ws, err := e.register(true, []string{id}, []string{""})
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start scheduler: %w", err)
	}
	w := ws[0]
	m := &message{Type: msgScheduler, ID: id, Sched: &schedSpec{Path: bin, Args: spec.Args, Env: spec.Env,
		Dir: spec.Dir, Umask: umask, Files: len(spec.Files)}}
	if err := c.sendWith(m, fds); err != nil {
		pr.Close()
		return nil, fmt.Errorf("start scheduler: ask the supervisor: %w", err)
	}
	ev := <-w.events
	c.drop(w)
	switch {
	case ev.end != nil:
		pr.Close()
		return nil, errors.New("start scheduler: the supervisor hung up")
	case ev.msg.Type == msgScheduled && ev.msg.PID > 0:
	default:
		pr.Close()
		return nil, fmt.Errorf("start scheduler: the supervisor answered %s: %s", ev.msg.Type, ev.msg.Error)
	}
	f := &Front{PID: ev.msg.PID, status: pr, pidfd: -1}
	if fd, err := unix.PidfdOpen(f.PID, 0); err == nil {
		f.pidfd = fd
	}
	return f, nil
}

// Wait forwards every signal from sigs to the scheduler and waits for it
// to end. code is the exit code it wrote before it ended; ok is false
// when it ended without writing one (it was killed, or crashed).
func (f *Front) Wait(sigs <-chan os.Signal) (code int, ok bool) {
	defer f.close()
	var status []byte
	done := make(chan struct{})
	go func() {
		status, _ = io.ReadAll(f.status) // to the end: the scheduler's exit
		close(done)
	}()
	for {
		select {
		case sig := <-sigs:
			if s, isSys := sig.(syscall.Signal); isSys {
				f.signal(s)
			}
		case <-done:
			code, err := strconv.Atoi(strings.TrimSpace(string(status)))
			return code, err == nil
		}
	}
}

// signal sends sig to the scheduler.
func (f *Front) signal(sig syscall.Signal) {
	if f.pidfd >= 0 {
		_ = unix.PidfdSendSignal(f.pidfd, sig, nil, 0)
		return
	}
	_ = syscall.Kill(f.PID, sig)
}

func (f *Front) close() {
	f.status.Close()
	if f.pidfd >= 0 {
		unix.Close(f.pidfd)
		f.pidfd = -1
	}
}
