package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/task"
	"github.com/gpusched/gpusched/internal/workflow"
)

// submitFlags are submit's options for a command.
type submitFlags struct {
	gpuMiB    int64
	exclusive bool
	gpus      int // --gpus: cards at once
	cpus      int
	hostMiB   int64    // --memory-mib-host
	resources []string // --resource NAME=N
	after     []string
	afterAny  []string // --after-any
	afterFail []string // --after-failure
	priority  int
	timeout   time.Duration
	retries   int
	name      string
	dir       string
	asJSON    bool
	socket    string
}

func newSubmitCmd() *cobra.Command {
	var f submitFlags
	c := &cobra.Command{
		Use:   "submit [--gpu-mib N] [--exclusive] [--gpus N] [--cpus N] [--memory-mib-host MIB] [--resource NAME=N]... [--after ID]... [--after-any ID]... [--after-failure ID]... [--priority P] [--timeout D] [--retries N] [--name NAME] [--dir D] [--json] -- CMD [ARG]... | submit WORKFLOW.yaml",
		Short: "Queue a command, or a workflow, on the daemon",
		Long: `Queue one command on the daemon and return at once, printing its id (a
run of one task, e.g. 12), or with --json {"id", "run", "tasks"}. It runs
without a shell, in the current folder (or --dir) with this environment,
as they are now.

gpusched submit WORKFLOW.yaml (a single argument ending in .yaml or .yml,
before any --) queues a workflow's tasks as one run and prints the run's
id; its tasks are RUN/TASK (13/train). Their relative dirs are relative to
the workflow's folder. The workflow's scheduling settings are the
daemon's to decide and are ignored.

--gpu-mib N asks for a card with N MiB of GPU memory free (a CUDA task),
--exclusive for a card to itself; --gpus N for N such cards at once (with
--gpu-mib or --exclusive). --cpus N and --memory-mib-host MIB are
the cores and host memory it takes of those the daemon gives tasks
(default 1 core, no memory), --resource NAME=N units of a custom resource
the daemon declares (gpusched daemon --resource). --after ID (repeatable) waits for a task
or a whole run to complete first; if it fails, this one is blocked.
--after-any ID waits for it to end, whichever way (Slurm's afterany);
--after-failure ID runs only if it fails, is cancelled or is blocked
(afternotok), and is not needed (blocked, no failure) if it completes.
--priority P: higher starts first. --timeout D bounds each attempt (90s,
2h). --retries N: extra attempts if it fails (default: the daemon's).

With no daemon answering (no --socket, no $GPUSCHED_SOCKET and no system
daemon's socket), submit starts your own in the background first and
says so on stderr; its output goes to daemon.log in its state directory.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return inputf("%s takes a command to run (after --) or a workflow file; see %s --help", c.CommandPath(), c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 && c.ArgsLenAtDash() != 0 && isWorkflowFile(args[0]) {
				return submitWorkflow(c, args[0], f)
			}
			return submitCommand(c, args, f)
		},
	}
	c.Flags().SetInterspersed(false) // flags after the command are the command's
	fl := c.Flags()
	fl.Int64Var(&f.gpuMiB, "gpu-mib", 0, "GPU memory budget in MiB: run on a card with that much free")
	fl.BoolVar(&f.exclusive, "exclusive", false, "run on a card of its own")
	fl.IntVar(&f.gpus, "gpus", 0, "how many cards it takes at once, each as --gpu-mib or --exclusive says (default 1)")
	fl.IntVar(&f.cpus, "cpus", 0, "the cores it takes of those the daemon gives tasks (default 1)")
	fl.Int64Var(&f.hostMiB, "memory-mib-host", 0, "its host memory budget in MiB, of what the daemon gives tasks (default: none)")
	fl.StringArrayVar(&f.resources, "resource", nil, "take N units of a custom resource the daemon declares, NAME=N (repeatable)")
	fl.StringArrayVar(&f.after, "after", nil, "a task or run that must complete first (repeatable)")
	fl.StringArrayVar(&f.afterAny, "after-any", nil, "a task or run that must end first, whichever way (repeatable)")
	fl.StringArrayVar(&f.afterFail, "after-failure", nil, "a task or run whose failure this one handles: it runs only if that fails (repeatable)")
	fl.IntVar(&f.priority, "priority", 0, "higher starts first")
	fl.DurationVar(&f.timeout, "timeout", 0, "time limit of each attempt")
	fl.IntVar(&f.retries, "retries", 0, "extra attempts if it fails (default: the daemon's)")
	fl.StringVar(&f.name, "name", "", "name shown in the queue (default: the program's)")
	fl.StringVar(&f.dir, "dir", "", "working directory (default: the current one)")
	fl.BoolVar(&f.asJSON, "json", false, "print a JSON object")
	fl.StringVar(&f.socket, "socket", "", "the daemon's socket")
	return c
}

// isWorkflowFile reports whether submit's single argument names a workflow.
func isWorkflowFile(arg string) bool {
	ext := strings.ToLower(filepath.Ext(arg))
	return ext == ".yaml" || ext == ".yml"
}

func submitCommand(c *cobra.Command, args []string, f submitFlags) error {
	switch {
	case f.gpuMiB < 0:
		return inputf("--gpu-mib must not be negative, got %d", f.gpuMiB)
	case f.timeout < 0:
		return inputf("--timeout must not be negative, got %s", f.timeout)
	case f.retries < 0:
		return inputf("--retries must not be negative, got %d", f.retries)
	case f.cpus < 0:
		return inputf("--cpus must not be negative, got %d", f.cpus)
	case f.hostMiB < 0:
		return inputf("--memory-mib-host must not be negative, got %d", f.hostMiB)
	case c.Flags().Changed("gpus") && (f.gpus < 1 || f.gpus > task.MaxGPUs):
		return inputf("--gpus must be from 1 to %d cards, got %d", task.MaxGPUs, f.gpus)
	case f.gpus != 0 && f.gpuMiB == 0 && !f.exclusive:
		return inputf("--gpus is for a GPU task: give --gpu-mib N or --exclusive too")
	}
	counters, err := resourceFlags("--resource", f.resources)
	if err != nil {
		return err
	}
	after := slices.Concat(f.after, f.afterAny, f.afterFail)
	var afterOn map[string]string
	for i, id := range after {
		if slices.Contains(after[:i], id) {
			return inputf("%s is given twice to --after, --after-any or --after-failure: give it once", id)
		}
		if i >= len(f.after) {
			if afterOn == nil {
				afterOn = map[string]string{}
			}
			afterOn[id] = gpusched.AfterFailure.String()
			if i < len(f.after)+len(f.afterAny) {
				afterOn[id] = gpusched.AfterAny.String()
			}
		}
	}
	dir, err := submitDir(f.dir)
	if err != nil {
		return err
	}
	cmd := client.Command{Args: args, Name: f.name, Dir: dir, Env: environMap(), GPUMiB: f.gpuMiB, Exclusive: f.exclusive, GPUs: f.gpus,
		CPUs: f.cpus, MemoryMiBHost: f.hostMiB, Resources: counters,
		After: after, AfterOn: afterOn, Priority: f.priority, Timeout: f.timeout}
	if c.Flags().Changed("retries") {
		cmd.Retries = &f.retries
	}
	cl, err := dialOrStart(c.Context(), f.socket, c.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cl.Close()
	s, err := cl.Submit(c.Context(), cmd)
	if err != nil {
		return submitError(args[0], err)
	}
	return printSubmitted(c, s, f.asJSON, s.Tasks[0])
}

// submitError names what could not be submitted.
func submitError(what string, err error) error {
	return refusal(fmt.Errorf("submit %s: %w", what, err))
}

func submitWorkflow(c *cobra.Command, path string, f submitFlags) error {
	for _, name := range []string{"gpu-mib", "exclusive", "gpus", "cpus", "memory-mib-host", "resource", "after", "after-any", "after-failure", "priority", "timeout", "retries", "dir"} {
		if c.Flags().Changed(name) {
			return inputf("--%s is for a command; a workflow's tasks say their own", name)
		}
	}
	// The daemon declares the custom resources, and checks them.
	w, err := loadWorkflowWith(path, workflow.Options{DeclaredElsewhere: true})
	if err != nil {
		return err
	}
	warnDaemonScheduling(c.ErrOrStderr(), path, w.Scheduling)
	tasks, err := daemonTasks(w)
	if err != nil {
		return err
	}
	dir, err := workflowFolder(path)
	if err != nil {
		return err
	}
	name := f.name
	if name == "" {
		name = filepath.Base(path)
	}
	cl, err := dialOrStart(c.Context(), f.socket, c.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cl.Close()
	s, err := cl.SubmitWorkflow(c.Context(), client.Workflow{Name: name, Dir: dir, Env: environMap(), Tasks: tasks})
	if err != nil {
		return submitError(path, err)
	}
	return printSubmitted(c, s, f.asJSON, s.Run)
}

// daemonTasks turns a workflow's tasks into the daemon's. The daemon
// runs commands on this machine: other kinds and executors are refused.
func daemonTasks(w *workflow.Workflow) ([]client.Task, error) {
	out := make([]client.Task, len(w.Tasks))
	for i, t := range w.Tasks {
		if t.Kind != "" && t.Kind != "command" {
			return nil, invalid(w.Locate(&gpusched.TaskError{TaskID: t.ID, Field: "kind", Reason: "the daemon runs commands only", Kind: gpusched.ErrInvalidTask}))
		}
		if t.Executor != "" && t.Executor != "local" {
			return nil, invalid(w.Locate(&gpusched.TaskError{TaskID: t.ID, Field: "executor", Reason: "the daemon runs tasks on this machine (local) only", Kind: gpusched.ErrInvalidTask}))
		}
		args, _ := t.Payload.([]string)
		ct := client.Task{ID: t.ID, Command: args, Dependencies: t.Dependencies, Priority: t.Priority,
			GPUMiB: t.Resources.MemoryMiB, Exclusive: t.Resources.Exclusive, GPUs: t.Resources.GPUs, GPUMiBAuto: t.Resources.MemoryAuto,
			GPUMiBMax: t.Resources.MemoryMaxMiB, Timeout: client.Duration(t.Timeout), RetryDelay: client.Duration(t.RetryDelay), RetryOnExitCodes: t.RetryOnExitCodes, RetryOnTimeout: t.RetryOnTimeout,
			Env: t.Env, Dir: t.Dir, Artifacts: t.Artifacts, HashArtifacts: t.HashArtifacts, OnComplete: t.OnComplete,
			OnFailure: t.OnFailure, CPUs: t.Resources.CPUs, MemoryMiBHost: t.Resources.MemoryMiBHost,
			MemoryMiBHostAuto: t.Resources.MemoryHostAuto, MemoryMiBHostMax: t.Resources.MemoryHostMaxMiB, Resources: t.Resources.Counters}
		if ct.MemoryMiBHostAuto {
			ct.MemoryMiBHost = 0 // the daemon chooses it
		}
		if t.Resources.GPU() && ct.GPUMiB == 0 && !ct.Exclusive && !ct.GPUMiBAuto {
			ct.Exclusive = true
		}
		if t.Retries != 0 {
			r := t.Retries
			ct.Retries = &r
		}
		for dep, on := range t.DependencyOn {
			if on == gpusched.AfterSuccess {
				continue
			}
			if ct.DependencyOn == nil {
				ct.DependencyOn = map[string]string{}
			}
			ct.DependencyOn[dep] = on.String()
		}
		out[i] = ct
	}
	return out, nil
}

// printSubmitted prints the id of what was submitted: one line, or JSON.
func printSubmitted(c *cobra.Command, s client.Submitted, asJSON bool, id string) error {
	if !asJSON {
		_, err := fmt.Fprintln(c.OutOrStdout(), id)
		return err
	}
	return json.NewEncoder(c.OutOrStdout()).Encode(struct {
		ID    string   `json:"id"`
		Run   string   `json:"run"`
		Tasks []string `json:"tasks"`
	}{id, s.Run, s.Tasks})
}

// submitDir is the task's working directory: --dir, else the current
// one, made absolute.
func submitDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("find the current folder: %w (give --dir)", err)
		}
		return wd, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", inputf("--dir %s: %v", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", inputf("--dir %s is not a folder", dir)
	}
	return abs, nil
}

// environMap is this process's environment, as a task runs with it.
func environMap() map[string]string {
	env := os.Environ()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}
