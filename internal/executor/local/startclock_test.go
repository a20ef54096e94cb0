package local

import (
	"os"
	"testing"

	"github.com/gpusched/gpusched/internal/procfs"
)

func TestBracketTick(t *testing.T) {
	for _, c := range []struct {
		before, after int64
		want          uint64
		ok            bool
	}{
		{before: 5*tickNS + 1, after: 5*tickNS + 900_000, want: 5, ok: true},
		{before: 5 * tickNS, after: 6*tickNS - 1, want: 5, ok: true},
		{before: 6*tickNS - 1, after: 6 * tickNS},   // straddles a tick: unknown
		{before: 0, after: 100},                     // the first reading failed
		{before: 7 * tickNS, after: 0},              // the second one failed
		{before: 7*tickNS + 5, after: 7*tickNS + 4}, // a clock that went back
	} {
		got, ok := bracketTick(c.before, c.after)
		if got != c.want || ok != c.ok {
			t.Errorf("bracketTick(%d, %d) = %d, %v; want %d, %v", c.before, c.after, got, ok, c.want, c.ok)
		}
	}
}

// startTrue starts /bin/true and returns its PID; it stays an unreaped
// zombie, whose /proc/PID/stat still reads, until reap.
func startTrue(t *testing.T) (*os.Process, startBracket) {
	t.Helper()
	b := bracketStart()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Skipf("cannot start /bin/true: %v", err)
	}
	return p, b
}

// TestBracketMatchesProc: the tick told by the boot clock around a real
// process's creation is the start time /proc gives it, for every process
// where the bracket tells one, and it tells one for most.
func TestBracketMatchesProc(t *testing.T) {
	told := 0
	const n = 200
	for range n {
		p, b := startTrue(t)
		tick, ok := bracketTick(int64(b), bootNS())
		st, read := procfs.Read(p.Pid)
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if !read {
			t.Fatalf("cannot read /proc/%d/stat of an unreaped child", p.Pid)
		}
		if ok {
			told++
			if tick != st.StartTicks {
				t.Fatalf("process %d: bracket says tick %d, /proc says %d", p.Pid, tick, st.StartTicks)
			}
		}
	}
	if told == 0 {
		t.Errorf("the bracket told no start time in %d starts", n)
	}
	t.Logf("the bracket told %d of %d start times", told, n)
}

// TestBracketTurnsOffOnMismatch: a boot clock that does not agree with
// /proc (here one shifted by a tick) is caught by the first check, and
// from then on /proc is read: never a wrong start time.
func TestBracketTurnsOffOnMismatch(t *testing.T) {
	saved := bootClock
	t.Cleanup(func() {
		bootClock = saved
		clockWrong.Store(false)
		clockChecked.Store(0)
	})
	clockWrong.Store(false)
	clockChecked.Store(0)
	bootClock = func() int64 { return bootNS() + tickNS }
	for i := range 50 {
		p, b := startTrue(t)
		got := b.ticks(p.Pid)
		st, _ := procfs.Read(p.Pid)
		p.Wait()
		if got != st.StartTicks {
			t.Fatalf("start %d: ticks = %d, /proc says %d", i, got, st.StartTicks)
		}
	}
	if !clockWrong.Load() {
		t.Error("a boot clock a tick off was never caught")
	}
}

// TestBracketTrustedAfterChecks: with a boot clock that agrees, the
// checks pass and the start times stay /proc's.
func TestBracketTrustedAfterChecks(t *testing.T) {
	t.Cleanup(func() { clockWrong.Store(false); clockChecked.Store(0) })
	clockWrong.Store(false)
	clockChecked.Store(0)
	for i := 0; i < 1000 && clockChecked.Load() < clockChecks+2; i++ {
		p, b := startTrue(t)
		got := b.ticks(p.Pid)
		st, _ := procfs.Read(p.Pid)
		p.Wait()
		if got != st.StartTicks {
			t.Fatalf("start %d: ticks = %d, /proc says %d", i, got, st.StartTicks)
		}
	}
	if clockWrong.Load() {
		t.Error("the boot clock was found wrong")
	}
	if clockChecked.Load() < clockChecks {
		t.Errorf("only %d checks passed in 1000 starts", clockChecked.Load())
	}
}
