package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// Version is the gpusched version, set at build time with
// -ldflags "-X github.com/gpusched/gpusched/internal/cli.Version=...".
var Version = "dev"

// Main runs the gpusched command with args (without the program name) and
// returns the exit code (see exitCode). Errors are printed to stderr on one
// line.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if msg := message(err); msg != "" {
		fmt.Fprintln(stderr, "gpusched: "+msg)
	}
	return exitCode(err)
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
cancelled, the run was interrupted, or gpusched could not do its job; 2 the
workflow or the command line is invalid, and nothing ran.`,
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// With no command, the help; anything else is an unknown command.
		Args:                       unknownCommand,
		RunE:                       func(c *cobra.Command, _ []string) error { return c.Help() },
		SuggestionsMinimumDistance: 2,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return inputf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())
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
			return inputf("%s takes %s (got %d arguments); see %s --help", c.CommandPath(), what, len(args), c.CommandPath())
		}
		return nil
	}
}

// optionalWorkflow accepts at most one argument, the workflow file whose
// default run directory a read-only command looks at.
func optionalWorkflow(c *cobra.Command, args []string) error {
	if len(args) > 1 {
		return inputf("%s takes at most one workflow file (got %d arguments)", c.CommandPath(), len(args))
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

// loadWorkflow loads and validates a workflow. Its errors are invalid
// input: *workflow.Error values, or a file that cannot be read.
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
		return "", inputf("which run? give --run-dir DIR, or the workflow file whose default run directory to use")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("run directory %s: %w", dir, err)
	}
	return abs, nil
}

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

// unknownCommand refuses the words given to gpusched that name no command.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if near := c.SuggestionsFor(args[0]); len(near) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", near[0])
	}
	return inputf("%s; see gpusched --help", msg)
}
