package cli

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/daemon"
)

func newDaemonCmd() *cobra.Command {
	var cfg daemon.Config
	var jobs int
	var ioTimeout time.Duration
	var resources []string
	c := &cobra.Command{
		Use:   "daemon [--socket PATH] [--state-dir DIR] [--system] [-j N] [--cpus N] [--memory-mib-host MIB] [--resource NAME=N]...",
		Short: "Run the daemon that queues everyone's tasks on this machine",
		Long: `Run a gpusched daemon in the foreground: one scheduler, one GPU ledger
and one state database for every task submitted to it (gpusched submit,
queue, cancel, wait, logs, gpus). See docs/daemon.md.

By default it is your own: its socket is $XDG_RUNTIME_DIR/gpusched/gpusched.sock
(or /tmp/gpusched-UID/gpusched.sock without XDG_RUNTIME_DIR; the folder is
mode 0700), its state $XDG_STATE_HOME/gpusched (~/.local/state/gpusched),
and it serves nobody but you. --system runs the machine's daemon, as root:
socket /run/gpusched/gpusched.sock (mode 0660, group gpusched when it
exists), state /var/lib/gpusched. A socket passed by systemd (socket
activation) is used instead of --socket.

Among ready tasks of equal priority, the user who has used the machine
least lately goes first (usage halves every --fair-share-half-life);
--user-max-tasks and --user-max-gpu-mib cap what one user holds at once.
See "Fair share" in docs/daemon.md.

Every user's tasks are admitted against the machine's cores and host
memory, as gpusched run admits a workflow's: --cpus N (default: the cores
this process may use, or -j if more) and --memory-mib-host MIB (default:
the cgroup's memory limit or the machine's memory, less a tenth) are what
the running tasks' cpus and memory_mib_host may add up to. --resource
NAME=N (repeatable) declares a custom resource with N units, which tasks
take with resources: {NAME: 1}; the daemon declares them, and a task that
takes one it does not declare is refused. See "Resources" in
docs/daemon.md.

One daemon per state directory: a second refuses at once, naming the
first's PID. A socket left by a daemon that died is removed; one that
answers is never taken over. The metrics (Prometheus text format) are at
GET /v1/metrics on the socket; --metrics-listen 127.0.0.1:PORT serves them
at /metrics on TCP too, for a scraper that cannot read a unix socket, and
nothing else. Without it nothing listens on TCP.

SIGINT, SIGTERM and SIGHUP stop the daemon but not its running tasks:
they run on under their supervisor and the next daemon on the state
directory adopts them. gpusched daemon stop --kill-tasks stops them too.
Pending tasks stay queued either way.`,
		Args: exactArgs(0, "no arguments (or the subcommand stop)"),
		RunE: func(c *cobra.Command, _ []string) error {
			if jobs < 0 {
				return inputf("-j/--jobs must be at least 1, got %d", jobs)
			}
			switch sc := cfg.Scheduling; {
			case sc.UserMaxRunning < 0:
				return inputf("--user-max-tasks must not be negative (0: no cap), got %d", sc.UserMaxRunning)
			case sc.UserMaxGPUMiB < 0:
				return inputf("--user-max-gpu-mib must not be negative (0: no cap), got %d", sc.UserMaxGPUMiB)
			case sc.FairShareHalfLife < 0:
				return inputf("--fair-share-half-life must not be negative, got %v", sc.FairShareHalfLife)
			}
			if c.Flags().Changed("cpus") && cfg.Scheduling.CPUs < 1 {
				return inputf("--cpus must be at least 1, got %d", cfg.Scheduling.CPUs)
			}
			if c.Flags().Changed("memory-mib-host") && cfg.Scheduling.MemoryMiBHost < 1 {
				return inputf("--memory-mib-host must be at least 1, got %d", cfg.Scheduling.MemoryMiBHost)
			}
			var err error
			if cfg.Scheduling.Resources, err = resourceFlags("--resource", resources); err != nil {
				return err
			}
			cfg.Scheduling.MaxParallelTasks = jobs
			cfg.Build = Version
			cfg.Log = c.ErrOrStderr()
			cfg.Timeouts = daemon.Timeouts{ReadHeader: ioTimeout, Read: ioTimeout}
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			err = daemon.Run(ctx, cfg)
			if errors.Is(err, daemon.ErrStopped) {
				// The running tasks are their supervisor's now: exit
				// without closing the scheduler, which would stop them.
				return nil
			}
			var se *gpusched.SchedulingError
			if errors.As(err, &se) {
				if se.Field == "resources" { // the daemon's are --resource flags
					return inputf("--resource: %s", se.Reason)
				}
				return invalid(err)
			}
			return err
		},
	}
	c.Flags().StringVar(&cfg.Socket, "socket", "", "listen on this unix socket")
	c.Flags().StringVar(&cfg.StateDir, "state-dir", "", "keep state, runs and logs in this folder")
	c.Flags().BoolVar(&cfg.System, "system", false, "run the machine's daemon (as root)")
	c.Flags().StringVar(&cfg.MetricsListen, "metrics-listen", "", "also serve the metrics at /metrics on this TCP address (host:port); off by default")
	c.Flags().IntVarP(&jobs, "jobs", "j", 0, "tasks running at once (default: the number of CPUs)")
	c.Flags().IntVar(&cfg.Scheduling.UserMaxRunning, "user-max-tasks", 0, "tasks one user may have running at once (default: no cap)")
	c.Flags().Int64Var(&cfg.Scheduling.UserMaxGPUMiB, "user-max-gpu-mib", 0, "GPU memory, MiB, one user's running tasks may be charged (default: no cap)")
	c.Flags().DurationVar(&cfg.Scheduling.FairShareHalfLife, "fair-share-half-life", 0, "how long it takes a user's usage to halve (default 1h)")
	c.Flags().IntVar(&cfg.Scheduling.CPUs, "cpus", 0, "the cores running tasks may take together (default: the cores this process may use, or -j if more)")
	c.Flags().Int64Var(&cfg.Scheduling.MemoryMiBHost, "memory-mib-host", 0, "what the running tasks' host memory budgets may add up to, in MiB (default: the cgroup limit or the machine's memory, less a tenth)")
	c.Flags().StringArrayVar(&resources, "resource", nil, "declare a custom resource NAME=N with N units, which tasks take with resources: {NAME: 1} (repeatable)")
	c.Flags().DurationVar(&ioTimeout, "io-timeout", 0, "time a client has to send a request (default 5s for its headers, 30s in all)")
	_ = c.Flags().MarkHidden("io-timeout")
	c.AddCommand(newDaemonStopCmd())
	return c
}

func newDaemonStopCmd() *cobra.Command {
	var socket string
	var kill bool
	c := &cobra.Command{
		Use:   "stop [--socket PATH] [--kill-tasks]",
		Short: "Stop the daemon",
		Long: `Stop the daemon (found as gpusched submit finds it) and wait until it has
gone. Its running tasks keep running, supervised, and the next daemon on
its state directory adopts them; with --kill-tasks they are stopped first
(SIGTERM, then SIGKILL after the kill grace) and recorded cancelled.
Pending tasks stay queued either way, for the next daemon.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			cl, err := dialAny(ctx, socket)
			if err != nil {
				return err
			}
			defer cl.Close()
			pid, err := cl.Shutdown(ctx, kill)
			if err != nil {
				return fmt.Errorf("stop the daemon on %s: %w", cl.Socket(), err)
			}
			if err := waitGone(ctx, pid); err != nil {
				return err
			}
			how := "its running tasks go on and the next daemon adopts them"
			if kill {
				how = "its running tasks were stopped"
			}
			fmt.Fprintf(c.ErrOrStderr(), "gpusched: daemon (pid %d) on %s stopped; %s\n", pid, cl.Socket(), how)
			return nil
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	c.Flags().BoolVar(&kill, "kill-tasks", false, "stop the running tasks too")
	return c
}

// resourceFlags reads repeated NAME=N flags (flag names the flag) into
// counts by name; nil when none is given. The names are checked where
// the settings are (Scheduling.Validate).
func resourceFlags(flag string, vals []string) (map[string]int, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := make(map[string]int, len(vals))
	for _, v := range vals {
		name, num, ok := strings.Cut(v, "=")
		n, err := strconv.Atoi(strings.TrimSpace(num))
		name = strings.TrimSpace(name)
		switch {
		case !ok || name == "" || err != nil:
			return nil, inputf("%s %q: give NAME=N, a name and a whole number (licenses=2)", flag, v)
		case n < 1:
			return nil, inputf("%s %s: give at least 1 unit, got %d", flag, name, n)
		}
		if _, dup := out[name]; dup {
			return nil, inputf("%s %s is given twice: give it once", flag, name)
		}
		out[name] = n
	}
	return out, nil
}

// dialAny connects to a daemon without checking its API version: stopping
// works whatever version it speaks.
func dialAny(ctx context.Context, socket string) (*client.Client, error) {
	c, err := client.Dial(ctx, socket)
	var ve *client.VersionError
	if errors.As(err, &ve) {
		return client.DialUnchecked(ve.Socket), nil
	}
	return c, daemonErrorOrNil(err)
}

// waitGone waits until the daemon's process, pid, has exited.
func waitGone(ctx context.Context, pid int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon (pid %d) is still running after 2 minutes", pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
