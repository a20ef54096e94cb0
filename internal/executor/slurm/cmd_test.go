package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPathCommandsTimeout: a Slurm program killed at its timeout (the
// client retries a controller that does not answer for many seconds)
// is taken for an unreachable controller, not for a refusal.
func TestPathCommandsTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "squeue"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := PathCommands{Dir: dir, Timeout: 100 * time.Millisecond}.Run(context.Background(), "squeue")
	if err = classify(err); !errors.Is(err, ErrUnreachable) {
		t.Errorf("error %v, want it marked unreachable", err)
	}
	// A program that fails on its own, in time, is not.
	if err := os.WriteFile(filepath.Join(dir, "scancel"), []byte("#!/bin/sh\necho 'scancel: error: Invalid job id specified' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = PathCommands{Dir: dir, Timeout: time.Minute}.Run(context.Background(), "scancel")
	if err = classify(err); err == nil || errors.Is(err, ErrUnreachable) {
		t.Errorf("error %v, want a plain failure", err)
	}
}
