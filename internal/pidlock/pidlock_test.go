package pidlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestTakeWritesPIDAndRefusesASecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	f, err := Take(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock holds %q, want this process's pid %d", got, os.Getpid())
	}
	// flock locks belong to the open file description: a second open in
	// this process is refused as another holder's would be.
	_, err = Take(path, 0o600)
	held, ok := errors.AsType[*HeldError](err)
	if !ok {
		t.Fatalf("second Take: %v, want a *HeldError", err)
	}
	if held.PID != os.Getpid() {
		t.Fatalf("HeldError names pid %d, want %d", held.PID, os.Getpid())
	}
}

// A lock file left readable by others (older versions made them 0644)
// is narrowed: whoever can open it can flock it and keep its owner out.
func TestTakeNarrowsAWiderMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	f, err := Take(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode %v after Take, want 0600", fi.Mode().Perm())
	}
}

func TestTakeRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym")
	if err := os.Symlink(target, sym); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(sym, 0o600); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Take through a symbolic link: %v, want a refusal naming it", err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(target, hard); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(hard, 0o600); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("Take of a hard-linked file: %v, want a refusal naming it", err)
	}
}
