package cli

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
)

// newTestInterrupts is an interrupts that catches no real signal: the test
// calls handle itself.
func newTestInterrupts() (in *interrupts, said *[]string, exited *[]int) {
	said, exited = &[]string{}, &[]int{}
	ctx, cancel := context.WithCancel(context.Background())
	in = &interrupts{ctx: ctx, cancel: cancel, done: make(chan struct{}),
		say:  func(msg string) { *said = append(*said, msg) },
		exit: func(code int) { *exited = append(*exited, code) }}
	return in, said, exited
}

// While the run goes: the first signal cancels its context, the second
// kills the tasks at once, the third does nothing; each said once.
func TestInterruptsWhileRunning(t *testing.T) {
	t.Parallel()
	in, said, exited := newTestInterrupts()
	kills := 0
	var shown []string
	if !in.begin(time.Hour, func() { kills++ }, func(msg string) { shown = append(shown, msg) }) {
		t.Fatal("begin refused without a signal")
	}
	in.handle(os.Interrupt)
	if in.ctx.Err() == nil || kills != 0 || !in.interrupted() {
		t.Fatalf("after one signal: ctx %v, %d kills", in.ctx.Err(), kills)
	}
	in.handle(syscall.SIGHUP)
	in.handle(syscall.SIGTERM)
	if kills != 1 || len(*exited) != 0 {
		t.Errorf("after three signals: %d kills (want 1), exits %v (want none)", kills, *exited)
	}
	want := []string{
		"gpusched: interrupt: stopping running tasks (SIGTERM, then SIGKILL after 1h0m0s; Ctrl-C again kills them at once)",
		"gpusched: hangup again: killing running tasks now (SIGKILL)",
	}
	if !slices.Equal(shown, want) || len(*said) != 0 {
		t.Errorf("said on the display %q (want %q), before it %q", shown, want, *said)
	}
	if err := in.result(nil); exitCode(err) != ExitFailed || message(err) != "" {
		t.Errorf("result after a signal: %v (exit %d)", err, exitCode(err))
	}
}

// While the workflow loads: the first signal says nothing will start and
// begin then refuses; the second exits at once.
func TestInterruptsWhileLoading(t *testing.T) {
	t.Parallel()
	in, said, exited := newTestInterrupts()
	in.handle(syscall.SIGTERM)
	if in.ctx.Err() == nil {
		t.Error("the first signal did not cancel the context")
	}
	if in.begin(time.Second, func() { t.Error("stopNow called") }, func(string) {}) {
		t.Error("begin accepted after a signal")
	}
	in.handle(syscall.SIGTERM)
	want := []string{
		"gpusched: terminated: no task will start; stopping once the workflow is loaded (again to exit at once)",
		"gpusched: terminated again: exiting now; no task had started",
	}
	if !slices.Equal(*said, want) || !slices.Equal(*exited, []int{ExitFailed}) {
		t.Errorf("said %q, exited %v; want %q, [1]", *said, *exited, want)
	}
}

// Once the run is handed to a front's scheduler, the front's own
// handling does nothing: the scheduler gets the signals and says what
// they do.
func TestInterruptsHandedOver(t *testing.T) {
	t.Parallel()
	in, said, exited := newTestInterrupts()
	in.handOver()
	in.handle(os.Interrupt)
	in.handle(syscall.SIGTERM)
	if in.ctx.Err() != nil || in.interrupted() || len(*said) != 0 || len(*exited) != 0 {
		t.Errorf("after handOver and two signals: ctx %v, interrupted %v, said %q, exits %v; want nothing",
			in.ctx.Err(), in.interrupted(), *said, *exited)
	}
}
