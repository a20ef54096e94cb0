package cli

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpusched/gpusched/internal/workflow"
)

// How a command's WORKFLOW argument becomes a workflow. It is a file, or
// "-" for standard input. A workflow that does not come from a file in a
// folder of its own ("-", a pipe, /dev/stdin, a process substitution
// /dev/fd/N: anything that is not a regular file, or is under /dev or
// /proc) has the current folder in place of the file's folder: its tasks'
// relative dirs are relative to the current folder, and so is its default
// run directory (rundir.go).

const (
	stdinArg  = "-"       // the WORKFLOW argument that means standard input
	stdinName = "<stdin>" // how messages name standard input: "<stdin>:4: ..."
)

// loadWorkflow reads, parses and validates the workflow that arg names
// ("-": standard input). Its errors are *workflow.Error values naming the
// workflow (and the line), invalid input for exitCode, including a file
// that cannot be read.
func loadWorkflow(arg string) (*workflow.Workflow, error) {
	return loadWorkflowWith(arg, workflow.Options{})
}

// loadWorkflowWith is loadWorkflow with options (the --executor flag's).
func loadWorkflowWith(arg string, opts workflow.Options) (*workflow.Workflow, error) {
	return readWorkflowWith(arg, os.Stdin, opts)
}

func readWorkflow(arg string, stdin io.Reader) (*workflow.Workflow, error) {
	return readWorkflowWith(arg, stdin, workflow.Options{})
}

func readWorkflowWith(arg string, stdin io.Reader, opts workflow.Options) (*workflow.Workflow, error) {
	data, err := readWorkflowData(arg, stdin)
	if err != nil {
		return nil, err
	}
	return parseWorkflowData(arg, data, opts)
}

// readWorkflowData reads the bytes of the workflow that arg names.
func readWorkflowData(arg string, stdin io.Reader) ([]byte, error) {
	if arg == stdinArg {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, unreadable(stdinName, err)
		}
		return data, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, unreadable(arg, err)
	}
	return data, nil
}

// parseWorkflowData parses and validates data, read from the workflow
// that arg names.
func parseWorkflowData(arg string, data []byte, opts workflow.Options) (*workflow.Workflow, error) {
	if arg == stdinArg {
		// A name without a folder: its folder is the current one.
		return workflow.ParseWith(stdinName, data, opts)
	}
	if hasFolder(arg) {
		return workflow.ParseWith(arg, data, opts)
	}
	// Parsed under a stand-in name without a folder, so that the current
	// folder is the tasks' base; messages then name it as given.
	w, err := workflow.ParseWith(stdinName, data, opts)
	if err != nil {
		return nil, renameWorkflowErrors(err, stdinName, arg)
	}
	w.Path = arg
	return w, nil
}

// unreadable is the error for a workflow that cannot be read.
func unreadable(name string, err error) error {
	var pe *fs.PathError
	reason := err
	if errors.As(err, &pe) {
		reason = pe.Err // the path is said once, in front
	}
	return &workflow.Error{Path: name, Msg: "cannot read the workflow: " + reason.Error(), Err: err}
}

// hasFolder reports whether the workflow at path is a regular file in a
// folder of its own, one that its tasks' relative dirs can be relative to:
// not standard input, a pipe or a device, and not reached through /dev or
// /proc (/dev/stdin is a regular file when the shell redirects a file to
// it, and /dev is no place for its tasks or its run directory).
func hasFolder(path string) bool {
	if path == stdinArg {
		return false
	}
	if abs, err := filepath.Abs(path); err == nil {
		for _, special := range []string{"/dev", "/proc"} {
			if abs == special || strings.HasPrefix(abs, special+"/") {
				return false
			}
		}
	}
	info, err := os.Stat(path)
	// A path that does not exist (status of a deleted workflow file) still
	// names the folder its run directory was made in.
	return err != nil || info.Mode().IsRegular()
}

// renameWorkflowErrors makes every *workflow.Error in err's tree that names
// from name to instead.
func renameWorkflowErrors(err error, from, to string) error {
	var walk func(e error)
	walk = func(e error) {
		switch x := e.(type) {
		case *workflow.Error:
			if x.Path == from {
				x.Path = to
			}
			if x.Err != nil {
				walk(x.Err)
			}
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			if inner := x.Unwrap(); inner != nil {
				walk(inner)
			}
		}
	}
	walk(err)
	return err
}
