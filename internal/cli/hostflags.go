package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
)

// hostFlags are --cpus and --memory-mib-host, of run and validate: the
// machine's cores and host memory that tasks may take, in place of the
// workflow's scheduling.cpus and memory_mib_host.
type hostFlags struct {
	cpus int
	mib  int64
}

func (f *hostFlags) add(c *cobra.Command) {
	c.Flags().IntVar(&f.cpus, "cpus", 0, "the cores running tasks may take together (default: the workflow's scheduling.cpus, else the cores this process may use, or -j if more)")
	c.Flags().Int64Var(&f.mib, "memory-mib-host", 0, "what the tasks' host memory budgets may add up to, in MiB (default: the workflow's scheduling.memory_mib_host, else the cgroup limit or the machine's memory, less a tenth)")
}

// check refuses values that give tasks nothing.
func (f *hostFlags) check(c *cobra.Command) error {
	if c.Flags().Changed("cpus") && f.cpus < 1 {
		return inputf("--cpus must be at least 1, got %d", f.cpus)
	}
	if c.Flags().Changed("memory-mib-host") && f.mib < 1 {
		return inputf("--memory-mib-host must be at least 1, got %d", f.mib)
	}
	return nil
}

// set names the flag given, "" when neither is.
func (f *hostFlags) set(c *cobra.Command) string {
	switch {
	case c.Flags().Changed("cpus"):
		return "--cpus"
	case c.Flags().Changed("memory-mib-host"):
		return "--memory-mib-host"
	}
	return ""
}

// apply puts the flags given into s.
func (f *hostFlags) apply(c *cobra.Command, s *gpusched.Scheduling) {
	if c.Flags().Changed("cpus") {
		s.CPUs = f.cpus
	}
	if c.Flags().Changed("memory-mib-host") {
		s.MemoryMiBHost = f.mib
	}
}
