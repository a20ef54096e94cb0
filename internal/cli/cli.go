package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// Exit codes.
const (
	ExitOK      = 0 // every task completed (or the command did what it was asked)
	ExitFailed  = 1 // a task failed, was blocked or cancelled; or an operational error
	ExitInvalid = 2 // the workflow or the command line is invalid; nothing ran
)

// Version is the gpusched version, set at build time with
// -ldflags "-X github.com/gpusched/gpusched/internal/cli.Version=...".
var Version = "dev"

// exitError carries the exit code an error maps to.
type exitError struct {
	code int
	err  error // nil: exit quietly with code (the output already said why)
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func invalid(err error) error { return &exitError{ExitInvalid, err} }
func failed(err error) error  { return &exitError{ExitFailed, err} }

// exitCode maps an error to the process's exit code. This is the only place
// that does: commands return classified errors, and anything unclassified
// comes from parsing the command line itself, so it is invalid input.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		return ExitInvalid
	}
}

// Main runs the gpusched command with args (without the program name) and
// returns the exit code. Errors are printed to stderr on one line, or one
// line per problem of an invalid workflow file.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) || ee.err != nil {
			for _, line := range errorLines(err) {
				fmt.Fprintln(stderr, "gpusched: "+line)
			}
		}
	}
	return exitCode(err)
}

// errorLines returns the lines to print for err: one, or one per problem
// of an invalid workflow.
func errorLines(err error) []string {
	var list *workflow.ErrorList
	if !errors.As(err, &list) {
		return []string{oneLine(err.Error())}
	}
	lines := strings.Split(list.Error(), "\n")
	for i, l := range lines {
		lines[i] = oneLine(l)
	}
	return lines
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpusched",
		Short: "Run many CPU and NVIDIA-GPU jobs on one machine as a dependency graph",
		Long: `gpusched runs the tasks of a workflow file as subprocesses, as many at once
as the machine allows, in dependency order, with durable state: stop it at
any moment, run it again, and completed work is kept.

Exit codes: 0 every task completed; 1 a task failed, was blocked or was
cancelled (or gpusched could not do its job); 2 the workflow or the command
line is invalid, and nothing ran.`,
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return invalid(fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath()))
	})
	root.AddCommand(newRunCmd(), newValidateCmd(), newStatusCmd(), newLogsCmd(), newGPUsCmd(), newPlanCmd())
	root.AddCommand(newReportCmd())
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// DefaultRunDir is the run directory of a workflow when --run-dir is not
// given: .gpusched/<name> beside the workflow file, where <name> is the
// file's name without its extension.
func DefaultRunDir(workflowPath string) string {
	name := strings.TrimSuffix(filepath.Base(workflowPath), filepath.Ext(workflowPath))
	return filepath.Join(filepath.Dir(workflowPath), ".gpusched", name)
}

// exactArgs is cobra.ExactArgs with a message that says what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return invalid(fmt.Errorf("%s takes %s (got %d arguments); see %s --help", c.CommandPath(), what, len(args), c.CommandPath()))
		}
		return nil
	}
}

// optionalWorkflow accepts at most one argument, the workflow file whose
// default run directory a read-only command looks at.
func optionalWorkflow(c *cobra.Command, args []string) error {
	if len(args) > 1 {
		return invalid(fmt.Errorf("%s takes at most one workflow file (got %d arguments)", c.CommandPath(), len(args)))
	}
	return nil
}

// firstArg returns args[0], or "" when there is none.
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// loadWorkflow loads and validates a workflow; errors are invalid input.
func loadWorkflow(path string) (*workflow.Workflow, error) {
	w, err := workflow.Load(path)
	if err != nil {
		return nil, invalid(err)
	}
	return w, nil
}

// runDirFor resolves --run-dir, else the workflow's default run directory.
func runDirFor(flag, workflowPath string) (string, error) {
	dir := flag
	switch {
	case dir != "":
	case workflowPath != "":
		dir = DefaultRunDir(workflowPath)
	default:
		return "", invalid(errors.New("which run? give --run-dir DIR, or the workflow file whose default run directory to use"))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", invalid(fmt.Errorf("run directory %s: %w", dir, err))
	}
	return abs, nil
}

func statePath(runDir string) (string, error) {
	p := filepath.Join(runDir, gpusched.StateFile)
	if _, err := os.Stat(p); err != nil {
		if os.IsNotExist(err) {
			return "", failed(fmt.Errorf("no run found in %s: %s does not exist", runDir, p))
		}
		return "", failed(err)
	}
	return p, nil
}
