package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/hugeheap"
)

func newValidateCmd() *cobra.Command {
	var executor string
	var host hostFlags
	c := &cobra.Command{
		Use:   "validate WORKFLOW [--executor NAME] [--cpus N] [--memory-mib-host MIB]",
		Short: "Check a workflow file without running anything",
		Long: `Check WORKFLOW as "gpusched run" would: syntax, unknown keys, field values,
duplicate ids, unknown dependencies and cycles; that no task asks for more
cores, host memory or custom resources than there are (this machine's,
or --cpus, --memory-mib-host and the workflow's scheduling settings, as
"gpusched run" takes them); and, when it has GPU tasks, that nvidia-smi is
there and that no memory request is larger than every card. Every problem found is reported, one line each with its file and line,
in file order (at most 20, then how many more). Nothing runs and nothing is
written. Exit code 0 if it is valid, 2 if not.

--executor NAME judges the tasks as "gpusched run --executor NAME" would
run them: the tasks that name no executor on NAME.`,
		Args: exactArgs(1, "one workflow file"),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := executorOptions(c, executor)
			if err != nil {
				return err
			}
			if err := host.check(c); err != nil {
				return err
			}
			prepareHeap(hugeheap.FileSize(args[0]), "")
			w, err := loadWorkflowWith(args[0], opts)
			if err != nil {
				return err
			}
			host.apply(c, &w.Scheduling)
			if err := gpusched.CheckHost(w.Scheduling, w.Tasks); err != nil {
				return invalid(w.Locate(err))
			}
			if err := gpusched.CheckGPUs(c.Context(), w.Scheduling, w.Tasks); err != nil {
				return invalid(w.Locate(err))
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %d tasks, valid\n", args[0], len(w.Tasks))
			return nil
		},
	}
	addExecutorFlag(c, &executor)
	host.add(c)
	return c
}
