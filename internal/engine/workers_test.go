package engine

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestWorkersReuseIdle: an attempt's goroutine that ended runs the next
// attempt instead of a new goroutine; idle ones are bounded, and exit when
// the loop ends (else the bubble would never end).
func TestWorkersReuseIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closed := make(chan struct{})
		w := newWorkers(closed)
		release := make(chan struct{})
		var ran atomic.Int32
		job := func() { <-release; ran.Add(1) }

		w.run(job)
		synctest.Wait()
		if got := w.idle.Load(); got != 0 {
			t.Fatalf("idle while its job runs: %d, want 0", got)
		}
		release <- struct{}{}
		synctest.Wait()
		if got := w.idle.Load(); got != 1 {
			t.Fatalf("idle after its job: %d, want 1", got)
		}
		w.run(job) // to the idle worker
		synctest.Wait()
		if got := w.idle.Load(); got != 0 {
			t.Fatalf("idle with the second job running: %d, want 0 (a new goroutine ran it)", got)
		}
		release <- struct{}{}
		synctest.Wait()

		for range maxIdleWorkers + 8 {
			w.run(job)
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		if got, want := ran.Load(), int32(2+maxIdleWorkers+8); got != want {
			t.Fatalf("jobs run: %d, want %d", got, want)
		}
		if got := w.idle.Load(); got != maxIdleWorkers {
			t.Fatalf("idle after a burst: %d, want %d", got, maxIdleWorkers)
		}
		close(closed)
		synctest.Wait()
		if got := w.idle.Load(); got != 0 {
			t.Fatalf("idle after the loop ended: %d, want 0", got)
		}
	})
}
