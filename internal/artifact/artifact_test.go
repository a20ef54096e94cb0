package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// within runs f and fails the test, instead of hanging, if it has not
// returned after a generous deadline.
func within[T any](t *testing.T, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("the artifact check did not return: it blocks on the file")
		panic("unreachable")
	}
}

func spec(dir string, hash bool, artifacts ...string) *task.Spec {
	return &task.Spec{ID: "t", Dir: dir, Artifacts: artifacts, HashArtifacts: hash}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A named pipe or a device as an artifact fails at once with an error
// naming it and what it is, whether or not the task hashes its artifacts:
// it is never opened, so nothing waits for a writer.
func TestCollectRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "out", "x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		artifact string
		want     string
	}{
		{"out/x", "artifact out/x: not a regular file (a named pipe)"},
		{"/dev/null", "artifact /dev/null: not a regular file (a character device)"},
	}
	for _, tt := range tests {
		for _, hash := range []bool{false, true} {
			sp := spec(dir, hash, tt.artifact)
			type result struct {
				arts []task.Artifact
				err  error
			}
			r := within(t, func() result {
				arts, err := Collect(context.Background(), sp)
				return result{arts, err}
			})
			if r.err == nil {
				t.Errorf("Collect(%s, hash %v) accepted it: %+v", tt.artifact, hash, r.arts)
				continue
			}
			if r.err.Error() != tt.want || !errors.Is(r.err, ErrNotRegular) {
				t.Errorf("Collect(%s, hash %v) = %q, want %q wrapping ErrNotRegular", tt.artifact, hash, r.err, tt.want)
			}
			// On resume, such a file is a reason to run again, never a hang.
			v := within(t, func() verdict {
				why, err := Intact(context.Background(), sp, []task.Artifact{{Path: tt.artifact}})
				return verdict{why, err}
			})
			if v.err != nil || v.why != tt.want {
				t.Errorf("Intact(%s, hash %v) = %q, %v; want %q", tt.artifact, hash, v.why, v.err, tt.want)
			}
		}
	}
}

// verdict is what Intact returns.
type verdict struct {
	why string
	err error
}

func TestCollectMissingFile(t *testing.T) {
	dir := t.TempDir()
	for _, hash := range []bool{false, true} {
		_, err := Collect(context.Background(), spec(dir, hash, "out/model.pt"))
		if err == nil || err.Error() != "artifact missing: out/model.pt" {
			t.Errorf("Collect (hash %v) = %v, want artifact missing: out/model.pt", hash, err)
		}
	}
	// A link to nothing is missing too.
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(context.Background(), spec(dir, true, "dangling")); err == nil || err.Error() != "artifact missing: dangling" {
		t.Errorf("Collect(dangling link) = %v, want artifact missing: dangling", err)
	}
}

// A link to a regular file is that file: size and content are the
// target's. A folder counts by its presence.
func TestCollectFollowsLinksToRegularFiles(t *testing.T) {
	dir := t.TempDir()
	const content = "weights\n"
	write(t, filepath.Join(dir, "store", "model.pt"), content)
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "store", "model.pt"), filepath.Join(dir, "out", "model.pt")); err != nil {
		t.Fatal(err)
	}
	arts, err := Collect(context.Background(), spec(dir, true, "out/model.pt", "store"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if len(arts) != 2 || arts[0].Size != int64(len(content)) || arts[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("artifacts = %+v, want the target's size %d and hash", arts, len(content))
	}
	if arts[1].Path != "store" || arts[1].SHA256 != "" {
		t.Errorf("folder artifact = %+v", arts[1])
	}
	why, err := Intact(context.Background(), spec(dir, true, "out/model.pt", "store"), arts)
	if err != nil || why != "" {
		t.Errorf("Intact right after Collect = %q, %v; want intact", why, err)
	}
}

// The hash of a file of several chunks is the file's SHA-256.
func TestStatHashesWholeFile(t *testing.T) {
	dir := t.TempDir()
	content := strings.Repeat("0123456789abcdef", 3*chunk/16+5) // three chunks and a bit
	write(t, filepath.Join(dir, "big"), content)
	a, err := Stat(context.Background(), spec(dir, true), "big")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if a.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("hash = %s, want %x", a.SHA256, sum)
	}
}

// stopAfter is a context cancelled, with cause, by the n-th look at it:
// hashing that looks between chunks stops there.
type stopAfter struct {
	context.Context
	cancel context.CancelCauseFunc
	cause  error
	n      int64
	looks  atomic.Int64
}

func (c *stopAfter) Err() error {
	if c.looks.Add(1) == c.n {
		c.cancel(c.cause)
	}
	return c.Context.Err()
}

// Hashing a large file stops when its context is done, between two
// chunks, with an error that wraps the context's cause.
func TestHashStopsWhenContextDone(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	const size = 256 * chunk // sparse: no disk space used
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cause := errors.New("run interrupted")
	ctx := &stopAfter{Context: parent, cancel: cancel, cause: cause, n: 3}
	sp := spec(dir, true, "big")

	_, err = Collect(ctx, sp)
	if !errors.Is(err, cause) {
		t.Fatalf("Collect = %v, want an error wrapping the context's cause", err)
	}
	// The 3rd look cancels; context.Cause may look once more.
	if got := ctx.looks.Load(); got > 4 {
		t.Errorf("the hash looked at the context %d times; want it to stop at the 3rd of %d chunks", got, size/chunk)
	}

	_, err = Intact(ctx, sp, []task.Artifact{{Path: "big", Size: size}})
	if !errors.Is(err, cause) {
		t.Errorf("Intact with a done context = %v, want an error wrapping the context's cause", err)
	}
}

func TestIntactReasons(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a"), "one")
	sp := spec(dir, false, "a")
	arts, err := Collect(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a"), "three")
	if why, err := Intact(context.Background(), sp, arts); err != nil || why != "artifact changed: a (size 3 -> 5)" {
		t.Errorf("Intact after a change = %q, %v", why, err)
	}
	os.Remove(filepath.Join(dir, "a"))
	if why, err := Intact(context.Background(), sp, arts); err != nil || why != "artifact missing: a" {
		t.Errorf("Intact after removal = %q, %v", why, err)
	}
}
