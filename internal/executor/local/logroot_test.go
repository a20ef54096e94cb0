package local

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLogRootReplaced: the run directory held open for the logs is
// removed and made again at the same path: the next log goes into the
// new one, found by its path, never into the removed one.
func TestLogRootReplaced(t *testing.T) {
	root := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(filepath.Join(root, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	open := func(name string) {
		t.Helper()
		f, err := OpenLog(root, filepath.Join(root, "logs", name))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(name)
		f.Close()
	}
	open("a.log")
	if held.path != root {
		t.Fatalf("the root held is %q, want %q", held.path, root)
	}
	// Moved away and replaced: the next log must be in the new folder.
	if err := os.Rename(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(root + ".old") // removed: creating below it fails
	open("b.log")
	if b, err := os.ReadFile(filepath.Join(root, "logs", "b.log")); err != nil || string(b) != "b.log" {
		t.Errorf("b.log in the new run directory: %q, %v", b, err)
	}
	// The folder held is the new one now.
	var heldSt, newSt unix.Stat_t
	if err := unix.Fstat(held.fd, &heldSt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(root, &newSt); err != nil {
		t.Fatal(err)
	}
	if heldSt.Ino != newSt.Ino || heldSt.Dev != newSt.Dev {
		t.Error("the root held is still the removed folder")
	}
	open("c.log")
	if b, err := os.ReadFile(filepath.Join(root, "logs", "c.log")); err != nil || string(b) != "c.log" {
		t.Errorf("c.log in the new run directory: %q, %v", b, err)
	}
}

// TestLogRootAnother: logs below another root are created there, and an
// existing log is appended to, whatever root is held.
func TestLogRootAnother(t *testing.T) {
	r1, r2 := t.TempDir(), t.TempDir()
	for _, r := range []string{r1, r2, r1} {
		p := filepath.Join(r, "logs", "x.log")
		f, err := OpenLog(r, p)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("x")
		f.Close()
	}
	if b, _ := os.ReadFile(filepath.Join(r1, "logs", "x.log")); string(b) != "xx" {
		t.Errorf("log below the first root holds %q, want xx (appended)", b)
	}
	if b, _ := os.ReadFile(filepath.Join(r2, "logs", "x.log")); string(b) != "x" {
		t.Errorf("log below the second root holds %q, want x", b)
	}
}
