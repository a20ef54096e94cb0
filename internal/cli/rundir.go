package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpusched/gpusched"
)

// Which run directory a command works on: --run-dir, else the workflow's
// default one, else (for the read-only commands) the only run under
// ./.gpusched.

const (
	runsFolder    = ".gpusched" // the folder that holds the default run directories
	maxRunsListed = 10          // runs named in the error when there are several
)

// DefaultRunDir is the run directory of a workflow when --run-dir is not
// given: .gpusched/<name> beside the workflow file, where <name> is the
// file's name without its extension. A workflow that does not come from a
// file in a folder of its own ("-" for standard input, a pipe, /dev/stdin,
// a process substitution /dev/fd/N), or whose folder cannot be written to,
// has it under the current folder instead: ./.gpusched/stdin for "-",
// ./.gpusched/fd-63 for /dev/fd/63.
func DefaultRunDir(workflowPath string) string {
	name := runName(workflowPath)
	folder := filepath.Dir(workflowPath)
	if !hasFolder(workflowPath) || !writable(folder) {
		folder = "."
	}
	return filepath.Join(folder, runsFolder, name)
}

// runName is the name of a workflow's default run directory.
func runName(workflowPath string) string {
	if workflowPath == stdinArg {
		return "stdin"
	}
	name := strings.TrimSuffix(filepath.Base(workflowPath), filepath.Ext(workflowPath))
	if strings.Trim(name, "0123456789") == "" {
		name = "fd-" + name // /dev/fd/63: a file descriptor
	}
	return name
}

// writable reports whether gpusched may create files in folder. A folder
// that does not exist (yet) counts as writable: making it says why not.
func writable(folder string) bool {
	err := syscall.Access(folder, 2 /* W_OK */)
	return err == nil || errors.Is(err, syscall.ENOENT)
}

// runDirFor resolves --run-dir, else the workflow's default run directory.
// With neither it is an error: see findRunDir for the read-only commands.
func runDirFor(flag, workflowPath string) (string, error) {
	dir := flag
	switch {
	case dir != "":
	case workflowPath != "":
		dir = DefaultRunDir(workflowPath)
	default:
		return "", inputf("which run? give --run-dir DIR, or the workflow file whose default run directory to use")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("run directory %s: %w", dir, err)
	}
	return abs, nil
}

// findRunDir is runDirFor for a command that only reads a run (status,
// logs, report): given neither --run-dir nor a workflow, it takes the one
// run under ./.gpusched, if there is exactly one.
func findRunDir(flag, workflowPath string) (string, error) {
	if flag != "" || workflowPath != "" {
		return runDirFor(flag, workflowPath)
	}
	entries, err := os.ReadDir(runsFolder)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("look for runs in ./%s: %w", runsFolder, err)
	}
	var runs []string
	for _, e := range entries {
		dir := filepath.Join(runsFolder, e.Name())
		if info, err := os.Stat(filepath.Join(dir, gpusched.StateFile)); err == nil && info.Mode().IsRegular() {
			runs = append(runs, dir)
		}
	}
	switch len(runs) {
	case 0:
		return "", inputf("which run? there is none under ./%s; give --run-dir DIR, or the workflow file whose default run directory to use", runsFolder)
	case 1:
		return runDirFor(runs[0], "")
	}
	listed := strings.Join(runs[:min(len(runs), maxRunsListed)], ", ")
	if len(runs) > maxRunsListed {
		listed += ", …"
	}
	return "", inputf("which run? ./%s holds %d: %s; give --run-dir DIR, or the workflow file whose default run directory to use",
		runsFolder, len(runs), listed)
}

// statePath returns the state database of the run in runDir, or an error
// if there is no run there.
func statePath(runDir string) (string, error) {
	p := filepath.Join(runDir, gpusched.StateFile)
	if _, err := os.Stat(p); err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("no run found in %s: %s does not exist", runDir, p)
		}
		return "", fmt.Errorf("no run found in %s: %w", runDir, err)
	}
	return p, nil
}
