package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/internal/supervise"
	"github.com/gpusched/gpusched/internal/workflow"
)

// Version is the gpusched version, set at build time with
// -ldflags "-X github.com/gpusched/gpusched/internal/cli.Version=...".
var Version = "dev"

// Main runs the gpusched command with args (without the program name) and
// returns the exit code (see exitCode). Errors are printed to stderr on one
// line, or one line per problem of an invalid workflow file.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if message(err) != "" {
		for _, line := range errorLines(err) {
			fmt.Fprintln(stderr, "gpusched: "+line)
		}
	}
	code := exitCode(err)
	if sch := supervise.ThisScheduler(); sch != nil {
		sch.Done(code) // to the front, which exits with it
	}
	return code
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
	root.AddCommand(newReportCmd(), newSlurmCmd(), newSuggestCmd())
	root.AddCommand(newDaemonCmd(), newSubmitCmd(), newQueueCmd(), newCancelCmd(), newPauseCmd(), newResumeCmd(), newRetryCmd(), newWaitCmd())
	root.CompletionOptions.DisableDefaultCmd = true
	return root
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
