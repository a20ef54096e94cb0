package cli

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// heldWriter records each Write; its first Write waits until release is
// closed, after saying so on entered.
type heldWriter struct {
	entered, release chan struct{}
	mu               sync.Mutex
	writes           []string
	err              error
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	first := len(w.writes) == 0
	w.writes = append(w.writes, string(p))
	w.mu.Unlock()
	if first {
		close(w.entered)
		<-w.release
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// TestLineQueueOneWritePerBatch: the lines queued while the writer is busy
// go out together in one Write, whole and in order.
func TestLineQueueOneWritePerBatch(t *testing.T) {
	w := &heldWriter{entered: make(chan struct{}), release: make(chan struct{})}
	q := newLineQueue(w)
	q.add("one\n")
	<-w.entered // the writer is inside its first Write
	q.add("two\n")
	q.add("three\n")
	q.add("four\n")
	close(w.release)
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"one\n", "two\nthree\nfour\n"}
	if !slices.Equal(w.writes, want) {
		t.Fatalf("writes %q, want %q", w.writes, want)
	}
}

// TestLineQueueDropsAfterError: after a failed Write nothing more is
// written, what was queued meanwhile included, and close says why.
func TestLineQueueDropsAfterError(t *testing.T) {
	broken := errors.New("pipe closed")
	w := &heldWriter{entered: make(chan struct{}), release: make(chan struct{}), err: broken}
	q := newLineQueue(w)
	q.add("one\n")
	<-w.entered
	q.add("two\n")
	close(w.release)
	if err := q.close(); !errors.Is(err, broken) {
		t.Fatalf("close: %v, want %v", err, broken)
	}
	q.add("three\n")
	if want := []string{"one\n"}; !slices.Equal(w.writes, want) {
		t.Fatalf("writes %q, want %q: the lines queued after the error are dropped", w.writes, want)
	}
}
