package gpusched_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched"
)

// A lock file planted as a symbolic link, a hard link, or something other
// than a file is refused before gpusched writes its PID into it: the file
// it points at is left as it was.
func TestPlantedLockFileIsNeverWrittenThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		plant func(t *testing.T, lock, victim string)
		want  string
	}{
		{"symlink", func(t *testing.T, lock, victim string) {
			if err := os.Symlink(victim, lock); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"hard link", func(t *testing.T, lock, victim string) {
			if err := os.Link(victim, lock); err != nil {
				t.Fatal(err)
			}
		}, "has 2 names"},
		{"fifo", func(t *testing.T, lock, _ string) {
			if err := syscall.Mkfifo(lock, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "precious.txt")
			if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			runDir := filepath.Join(dir, "run")
			if err := os.Mkdir(runDir, 0o755); err != nil {
				t.Fatal(err)
			}
			lock := filepath.Join(runDir, gpusched.LockFile)
			tt.plant(t, lock, victim)
			s, err := gpusched.New(runDir, gpusched.Scheduling{})
			if err == nil {
				s.Close()
				t.Fatal("New accepted a planted lock file")
			}
			if !strings.Contains(err.Error(), lock) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to name %s and say %q", err, lock, tt.want)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
				t.Errorf("the planted link's target now holds %q", b)
			}
			if _, err := os.Stat(filepath.Join(runDir, gpusched.StateFile)); err == nil {
				t.Error("a state database was created although the directory was refused")
			}
		})
	}
}
