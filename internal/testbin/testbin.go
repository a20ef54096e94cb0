// Package testbin builds the project's binaries for tests that run them as
// real processes: the gpusched command itself and helpers such as sleeper
// and fake-nvidia-smi.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
)

var (
	mu    sync.Mutex        // guards the fields below
	dir   string            // where binaries are built, shared by a test binary
	built map[string]string // package path -> binary
)

// Build compiles the main package pkg (e.g. "./cmd/sleeper", relative to the
// module root) once per test process and returns the binary's path. Call
// Cleanup from TestMain to remove the binaries.
func Build(pkg string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin, nil
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "gpusched-testbin-")
		if err != nil {
			return "", err
		}
		dir, built = d, map[string]string{}
	}
	bin := filepath.Join(dir, path.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, "github.com/gpusched/gpusched/"+path.Clean(pkg))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin, nil
}

// MustBuild is Build for TestMain: it exits the test binary on failure.
func MustBuild(pkg string) string {
	bin, err := Build(pkg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return bin
}

// Cleanup removes the built binaries.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, built = "", nil
	}
}
