package cli

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// A run loads with the collector off up to a memory limit, and gets both
// settings back after; $GOGC or $GOMEMLIMIT leave them as they are.
func TestCollectNoneWhileLoading(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) }()
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(env, "200")
		restore := collectNone()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("with %s: GC percent %d, want 100 as it was", env, got)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("with %s: memory limit %d, want none as before", env, got)
		}
		restore()
		os.Unsetenv(env) // t.Setenv puts it back
	}
	restore := collectNone()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("loading: GC percent %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got <= 0 || got == math.MaxInt64 {
		t.Errorf("loading: memory limit %d, want one", got)
	}
	restore()
	restore() // a second call does nothing
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after: GC percent %d, want 100 back", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after: memory limit %d, want none back", got)
	}
}
