package local

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A process's start time, as /proc/PID/stat gives it (field 22), is the
// boot-time clock read by the kernel while it creates the process (in
// clone), in clock ticks of 1/100 s (USER_HZ; the kernel divides, so a
// tick is floor(ns / 10 ms)). Reading the boot-time clock just before
// the process is created and just after: when both readings fall in the
// same tick, that tick is the process's start time, with no need to open
// /proc/PID/stat (some 17 µs of the scheduler's CPU per attempt, see
// docs/benchmarks.md). A fork takes a fraction of a tick, so a pair falls
// in two ticks rarely; then /proc is read as before.
//
// What this rests on (the tick's length, the clock the kernel reads) is
// checked, not assumed: the first few starts read /proc too and compare;
// a single mismatch, ever, turns the shortcut off for good.

// tickNS is the length of a /proc clock tick (USER_HZ = 100).
const tickNS = 10_000_000

// clockChecks is how many starts compare the bracket's tick with /proc's
// before the bracket is trusted alone.
const clockChecks = 8

var (
	clockChecked atomic.Int32 // starts whose bracket agreed with /proc, up to clockChecks
	clockWrong   atomic.Bool  // a bracket disagreed with /proc: always read /proc
)

// startBracket is the boot-time clock read before a process is created;
// 0 when it could not be read.
type startBracket int64

// bracketStart reads the boot-time clock before a process is created.
func bracketStart() startBracket {
	return startBracket(bootClock())
}

// ticks returns the start time of process pid, created since b was
// taken: from the bracket when it tells, else from /proc/PID/stat (0 if
// that cannot be read).
func (b startBracket) ticks(pid int) uint64 {
	t, ok := bracketTick(int64(b), bootClock())
	if !ok || clockWrong.Load() {
		return StartTicks(pid)
	}
	if clockChecked.Load() >= clockChecks {
		return t
	}
	read := StartTicks(pid)
	switch {
	case read == 0:
		// The process is gone already (reaped: not ours to reap yet, so
		// not that) or /proc is not there: no check either way.
	case read == t:
		clockChecked.Add(1)
	default:
		clockWrong.Store(true)
	}
	return read
}

// bracketTick returns the tick of a process created between boot-clock
// readings before and after, when both fall in one tick.
func bracketTick(before, after int64) (uint64, bool) {
	if before <= 0 || after < before || before/tickNS != after/tickNS {
		return 0, false
	}
	return uint64(after / tickNS), true
}

// bootClock is bootNS; tests replace it.
var bootClock = bootNS

// bootNS reads CLOCK_BOOTTIME in nanoseconds; 0 if it cannot be read.
func bootNS() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
