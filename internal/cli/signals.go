package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// What SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed, an SSH
// session dropped) do to "gpusched run". They are caught from before the
// workflow is loaded to the end, so gpusched never dies of one and leaves
// its tasks running unsupervised:
//
//	while loading   1st: no task will start; the run stops once the tasks
//	                     are saved, and exits 1.
//	                2nd: exit 1 at once (nothing runs; the state database
//	                     is consistent at any moment).
//	while running   1st: ctx is cancelled: the running tasks are stopped
//	                     gracefully (SIGTERM, SIGKILL after the kill grace)
//	                     and recorded cancelled.
//	                2nd: the running tasks are killed at once (SIGKILL).
//	either          3rd and later: nothing more.
//
// A run that got one of them exits 1, whatever became of its tasks.

// stopSignals are the signals that stop a run.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// interrupts catches the stop signals of one run.
type interrupts struct {
	ctx    context.Context // cancelled by the first signal
	cancel context.CancelFunc
	exit   func(code int)

	sigs chan os.Signal
	done chan struct{} // closed by release: the goroutine returns

	mu      sync.Mutex    // guards the fields below
	handed  bool          // handOver was called: the signals are another process's to act on
	got     int           // signals received
	running bool          // begin was called: tasks may be running
	grace   time.Duration // the kill grace, for the message
	say     func(msg string)
	stopNow func()
}

// catchInterrupts starts catching the stop signals; say prints a line for
// a person (stderr until the run begins). release stops it.
func catchInterrupts(parent context.Context, say func(msg string)) *interrupts {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{ctx: ctx, cancel: cancel, exit: os.Exit, say: say,
		sigs: make(chan os.Signal, 4), done: make(chan struct{})}
	signal.Notify(in.sigs, stopSignals...)
	go in.loop()
	return in
}

func (in *interrupts) loop() {
	for {
		select {
		case sig := <-in.sigs:
			in.handle(sig)
		case <-in.done:
			return
		}
	}
}

func (in *interrupts) handle(sig os.Signal) {
	in.mu.Lock()
	if in.handed {
		in.mu.Unlock()
		return
	}
	in.got++
	n, running, grace, say, stopNow := in.got, in.running, in.grace, in.say, in.stopNow
	in.mu.Unlock()
	switch {
	case n == 1 && running:
		again := "a second signal kills them at once"
		if sig == os.Interrupt {
			again = "Ctrl-C again kills them at once"
		}
		say(fmt.Sprintf("gpusched: %s: stopping running tasks (SIGTERM, then SIGKILL after %s; %s)", sig, grace, again))
		in.cancel()
	case n == 1:
		say(fmt.Sprintf("gpusched: %s: no task will start; stopping once the workflow is loaded (again to exit at once)", sig))
		in.cancel()
	case n == 2 && running:
		say(fmt.Sprintf("gpusched: %s again: killing running tasks now (SIGKILL)", sig))
		stopNow()
	case n == 2:
		say(fmt.Sprintf("gpusched: %s again: exiting now; no task had started", sig))
		in.exit(ExitFailed)
	}
}

// begin is called just before the run starts its tasks. It reports false
// if a signal came while the workflow was loading: then nothing must start.
// From now on say goes to the run's display, and a second signal calls
// stopNow.
func (in *interrupts) begin(grace time.Duration, stopNow func(), say func(msg string)) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.got > 0 {
		return false
	}
	in.running, in.grace, in.stopNow, in.say = true, grace, stopNow, say
	return true
}

// handOver stops acting on signals: a front's scheduler gets them now
// (front.go), and says what they do.
func (in *interrupts) handOver() {
	in.mu.Lock()
	in.handed = true
	in.mu.Unlock()
}

// interrupted reports whether a stop signal came.
func (in *interrupts) interrupted() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.got > 0
}

// result is the run's error as the exit code sees it: after a signal, an
// *interruptedError (exit 1) holding err, if any.
func (in *interrupts) result(err error) error {
	if in.interrupted() {
		return &interruptedError{err}
	}
	return err
}

// release stops acting on signals. They are still caught, and dropped: a
// SIGHUP while gpusched exits must not change its exit code.
func (in *interrupts) release() {
	close(in.done)
	in.cancel()
}

// stderrSay prints msg on its own line to w, ignoring errors (after a
// hang-up the terminal is gone: writes fail, and the run goes on).
func stderrSay(w io.Writer) func(string) {
	return func(msg string) { fmt.Fprintln(w, msg) }
}
