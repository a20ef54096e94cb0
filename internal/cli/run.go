package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/workflow"
)

func newRunCmd() *cobra.Command {
	var runDir string
	var jobs int
	var order string
	var dryRun bool
	var out runOutput
	var executor string
	var route routeFlags
	var host hostFlags
	var rerun rerunFlags
	c := &cobra.Command{
		Use:   "run WORKFLOW [--run-dir DIR] [-j N] [--cpus N] [--memory-mib-host MIB] [--executor NAME] [--force TASK | --only TASK | --from TASK] [--keep-edited] [--no-progress] [--events FILE] [--daemon | --local] [--socket PATH]",
		Short: "Run a workflow's tasks to the end",
		Long: `Run the tasks of WORKFLOW (a YAML file) until every one has completed,
failed, or been blocked by a failed dependency.

State and logs go to the run directory: --run-dir, by default
.gpusched/<workflow name> beside the workflow file. Running again on the
same run directory keeps the tasks that completed and runs the rest:
those that never ran or did not complete, those whose definition, inputs
or artifacts changed since, and what depends on them ("gpusched plan"
shows which and why). A completed task whose artifacts were changed since
(edited by hand) and that runs again overwrites them: run says so before
anything runs (see --keep-edited below).

On a terminal, a live display shows an overall bar (tasks complete, failed,
running and waiting, time elapsed, an estimate of the time left) and a line
per running task (its card, or all of them for a task on several, "cards
2,1"; its time; its GPU memory charged/requested, on each card);
failures, retries, cancellations and quarantined cards are printed above
it and stay in the scrollback. Elsewhere (a pipe, a file, CI), or with
--no-progress, it prints one timestamped line per change instead. Either
way it ends with a summary: counts by state, the time taken, and for each
failed task its exit code or signal, the last lines of its log and the
log's path.

--events FILE writes one JSON object per line per event, flushed line by
line, for other programs (FILE is truncated first; "-" is stdout, and the
human output then goes to stderr). Every line has "time" (RFC 3339) and
"event", one of started, attempt-ended, complete, retrying, failed,
blocked (with "not_needed": true for a task not needed), cancelled,
card-quarantined, event-failed, gpu-unknown (nvidia-smi
fails or hangs; GPU tasks wait), gpu-known; then, where they apply,
"task", "attempt" (from 1), "card" (GPU index), "memory_mib" (the GPU
memory an attempt was admitted with), "exit_code", "signal" (e.g. SIGKILL),
"error" (why it failed, or why a card was quarantined), "blocked_by",
"log" (the attempt's log file), "rerun" (why a task that ran before runs
again), "duration_s" (of an attempt) and "retry_at" (when a retried task's
next attempt may start). An attempt that ends gives
attempt-ended, then complete, retrying, failed or cancelled.

--cpus N is the cores running tasks may take together (a task takes 1
unless its resources.cpus asks more), in place of the workflow's
scheduling.cpus; by default, the cores this process may use (its CPU
affinity and cgroup quota), or -j when that is more. --memory-mib-host
MIB is what the tasks' resources.memory_mib_host budgets may add up to,
in place of scheduling.memory_mib_host; by default, the cgroup's memory
limit or the machine's memory, less a tenth (at most 4 GiB). A task that
asks for more than either is refused (exit 2). See docs/workflow.md, "CPU,
memory and custom resources".

--executor NAME runs the tasks that name no executor on NAME, in place of
the workflow's scheduling.executor; a task's own executor key still wins.
The executors: local (subprocesses on this machine, the default) and
slurm (each attempt a Slurm batch job; see docs/slurm.md).

WORKFLOW "-" reads the workflow from standard input. A workflow that does
not come from a file in a folder of its own ("-", a pipe, /dev/stdin,
<(...)) has the current folder in its place: its tasks' relative dirs are
relative to it, and its run directory is ./.gpusched/<name> ("stdin" for
"-").

Ctrl-C (SIGINT), SIGTERM or SIGHUP (the terminal closed) stops running
tasks (SIGTERM to each task's process group, SIGKILL after the kill grace)
and records them cancelled; tasks not started stay for the next run. A
second one kills the running tasks at once (SIGKILL). One while the
workflow is still loading starts nothing. Either way the run exits 1.

Through a daemon: --daemon (or --socket PATH) submits the workflow to the
daemon as one run (as "gpusched submit WORKFLOW" does, starting your own
daemon when none answers), says its id on stderr, and follows it with the
same display and summary, ending with the same exit codes. Ctrl-C there
cancels the run's tasks on the daemon (a second exits at once). When
$GPUSCHED_SOCKET is set, or the system daemon's socket exists and
answers, run goes through that daemon by default, and says so on stderr:
people sharing a machine share one GPU ledger. --local runs in this
process all the same (with a warning when a daemon answers: GPU budgets
are not shared with its tasks). Through a daemon, the daemon keeps the
run's state and decides how many tasks run at once: --run-dir and
--events are refused, -j and the workflow's scheduling settings are
ignored with a warning; each run is a new run (nothing is kept from an
earlier one).

` + rerunHelp + `

Exit codes: 0 every task completed (or was not needed: a clean-up that
runs on: failure of a task that completed); 1 a task failed, was blocked
or was cancelled, or the run was interrupted; 2 the workflow or the
command line is invalid (nothing ran).`,
		Args: exactArgs(1, "one workflow file"),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := executorOptions(c, executor)
			if err != nil {
				return err
			}
			if dryRun {
				collectLess() // as plan
				return buffered(c.OutOrStdout(), func(w io.Writer) error {
					return runPlan(w, args[0], runDir, false, opts, rerun)
				})
			}
			if c.Flags().Changed("jobs") && jobs < 1 {
				return inputf("-j/--jobs must be at least 1, got %d", jobs)
			}
			if c.Flags().Changed("order") && order != gpusched.OrderSubmitted && order != gpusched.OrderLongestFirst {
				return inputf("--order must be %q or %q, not %q", gpusched.OrderSubmitted, gpusched.OrderLongestFirst, order)
			}
			if err := host.check(c); err != nil {
				return err
			}
			rt, err := chooseRoute(c.Context(), route)
			if err != nil {
				return err
			}
			if rt.daemon && c.Flags().Changed("order") {
				return inputf("--order: a daemon takes its tasks in submission order; use --local to run in this process")
			}
			if rt.daemon {
				return runThroughDaemon(c, args[0], opts, daemonRunFlags{route: rt, jobsSet: c.Flags().Changed("jobs"), noProgress: out.noProgress,
					hostSet: host.set(c)})
			}
			if rt.announce != "" {
				fmt.Fprintln(c.ErrOrStderr(), rt.announce)
			}
			if route.local {
				warnLocal(c.Context(), c.ErrOrStderr())
			}
			// The signals first: one that comes while a big workflow
			// loads must stop it before anything starts.
			stop := catchInterrupts(c.Context(), stderrSay(c.ErrOrStderr()))
			defer stop.release()
			c.SetContext(stop.ctx)
			return stop.result(func() error {
				out.loaded = collectNone()
				defer func() { out.loaded() }()
				// A front's scheduler runs the workflow its front read.
				data, fromFront, err := frontWorkflow()
				if err == nil && !fromFront {
					data, err = readWorkflowData(args[0], os.Stdin)
				}
				if err != nil {
					return err
				}
				dir, err := runDirFor(runDir, args[0])
				if err != nil {
					return err
				}
				// The workflow parsed and checked, with the flags applied.
				load := func() (*workflow.Workflow, error) {
					// Kept as checked: submitted without copying and
					// checking every task again (SubmitChecked).
					parse := opts
					parse.KeepChecked = true
					w, err := parseWorkflowData(args[0], data, parse)
					if err != nil || stop.interrupted() {
						return nil, err
					}
					if c.Flags().Changed("jobs") {
						w.Scheduling.MaxParallelTasks = jobs
					}
					if c.Flags().Changed("order") {
						w.Scheduling.Order = order
					}
					if w.Scheduling.Order == "" {
						// A workflow is a batch known from the start,
						// which ends soonest longest first (docs/gpu.md,
						// "Order within a batch"); a Scheduler fed
						// tasks over time keeps submission order.
						w.Scheduling.Order = gpusched.OrderLongestFirst
					}
					host.apply(c, &w.Scheduling)
					// Tasks that ask for more cores, host memory or custom
					// resources than there are could never start.
					if err := gpusched.CheckHost(w.Scheduling, w.Tasks); err != nil {
						return nil, invalid(w.Locate(err))
					}
					if out.submit, err = rerun.options(w.Tasks); err != nil {
						return nil, err
					}
					// GPU tasks without nvidia-smi: invalid input, refused
					// before the run directory is created. nvidia-smi itself is
					// not run here (it may hang): requests no card can hold fail
					// when the run first reads the cards, and CPU tasks start
					// meanwhile.
					if err := gpusched.CheckNvidiaSMI(w.Tasks); err != nil {
						return nil, invalid(w.Locate(err))
					}
					return w, nil
				}
				front := !fromFront && canFront(c.OutOrStdout(), c.ErrOrStderr())
				// A front resuming a run directory that exists leaves the
				// workflow to its scheduler, which reads it anyway: read
				// twice, a workflow of 100,000 tasks cost 0.3 s more before
				// the first start. Invalid input is then refused by the
				// scheduler, with the same message and exit code, before it
				// changes anything in the run directory (it checks the
				// directory's state meanwhile: loadReserving); a new run
				// directory is still made only for a valid workflow.
				resuming := hasState(dir)
				deferred := front && resuming
				if !deferred { // this process reads the workflow
					prepareHeap(int64(len(data)), dir)
				}
				var w *workflow.Workflow
				open := func(s gpusched.Scheduling, opts ...gpusched.Option) (*gpusched.Scheduler, error) {
					return gpusched.New(dir, s, opts...)
				}
				switch {
				case !front && resuming:
					// This process is the run's scheduler, resuming: the run
					// directory is taken, and its state checked, while the
					// workflow is read.
					var r *reserved
					w, r, err = loadReserving(stop.ctx, dir, load)
					if r != nil {
						defer r.release()
						open = r.open
					}
					if err != nil || stop.interrupted() {
						return err
					}
				case !deferred:
					if w, err = load(); err != nil || stop.interrupted() {
						return err
					}
				}
				// --events FILE is opened (and emptied) once, here or by
				// the front, which passes it on. A front that has not
				// checked the workflow leaves it as it is: its scheduler
				// empties it once it has.
				if out.events != "" && out.events != "-" {
					f, passed := frontFile(frontEvents)
					if !passed {
						flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
						if deferred {
							flags &^= os.O_TRUNC
						}
						if f, err = os.OpenFile(out.events, flags, 0o644); err != nil {
							return inputf("--events: %w", err)
						}
					}
					defer f.Close()
					out.eventsFile = f
				}
				if front {
					// The front only waits from here on, for as long as
					// the run lasts: the collector as it was (off, the
					// garbage of its reading would be kept all along).
					out.loaded()
					handed, err := runAsFront(stop, c.ErrOrStderr(), dir, data, out.eventsFile)
					if handed {
						return err
					}
					out.loaded = collectNone() // loading here after all
					out.inProcess = true
				}
				if w == nil {
					if w, err = load(); err != nil || stop.interrupted() {
						return err
					}
				}
				if out.eventsFile != nil && (fromFront || deferred) {
					emptyEvents(out.eventsFile)
				}
				out.checked = w.Checked()
				return runWorkflow(stop, c.OutOrStdout(), c.ErrOrStderr(), w.Scheduling, w.Tasks, dir, open, out)
			}())
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory (default .gpusched/<workflow name> beside the workflow)")
	c.Flags().IntVarP(&jobs, "jobs", "j", 0, "run at most N tasks at once (default: the workflow's max_parallel_tasks, else the number of CPUs)")
	c.Flags().StringVar(&order, "order", "", "take ready tasks of one priority in `ORDER`: longest_first (the default: longest estimated run time, with what waits for the task, first) or submitted, in place of the workflow's scheduling.order")
	host.add(c)
	addExecutorFlag(c, &executor)
	addRerunFlags(c, &rerun)
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show what would run and why (as \"gpusched plan\"); run nothing")
	c.Flags().BoolVar(&out.noProgress, "no-progress", false, "no live display on a terminal: one timestamped line per change")
	c.Flags().StringVar(&out.events, "events", "", "write one JSON object per event to FILE (\"-\": stdout; the human output goes to stderr)")
	c.Flags().BoolVar(&route.daemon, "daemon", false, "submit the workflow to the daemon as a run and follow it")
	c.Flags().BoolVar(&route.local, "local", false, "run in this process even when $GPUSCHED_SOCKET or the system daemon's socket names a daemon")
	c.Flags().StringVar(&route.socket, "socket", "", "the daemon's socket (implies --daemon)")
	return c
}

// hasState reports whether the run directory dir holds a state database
// (a run to resume).
func hasState(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, gpusched.StateFile))
	return err == nil
}

// emptyEvents empties the --events file f that a front opened without
// emptying it (it had not checked the workflow): once the workflow is
// found valid, as a front that checked it would have. Only a regular file
// can be emptied; a pipe or a terminal has nothing to empty.
func emptyEvents(f *os.File) {
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		_ = f.Truncate(0)
	}
}

// addExecutorFlag gives c (run, validate, plan: they judge the same tasks)
// the --executor flag.
func addExecutorFlag(c *cobra.Command, name *string) {
	c.Flags().StringVar(name, "executor", "", "run the tasks that name no executor on `NAME` (local, slurm), in place of the workflow's scheduling.executor")
}

// executorOptions checks the --executor flag, if given, and returns the
// workflow options it makes: an invalid or unknown name is invalid input,
// said on one line that names the flag.
func executorOptions(c *cobra.Command, name string) (workflow.Options, error) {
	if !c.Flags().Changed("executor") {
		return workflow.Options{}, nil
	}
	if why := workflow.ExecutorProblem(name); why != "" {
		return workflow.Options{}, inputf("--executor: %s", why)
	}
	return workflow.Options{Executor: name, ExecutorFrom: "--executor"}, nil
}

// runOutput is how a run reports as it goes.
type runOutput struct {
	noProgress bool     // plain lines even on a terminal
	events     string   // --events: a file, "-" for stdout, "" for none
	eventsFile *os.File // the file --events names, open
	inProcess  bool     // run the tasks in this process, unsupervised (no supervisor could be had)
	// submit is what --force, --only, --from and --keep-edited ask.
	submit gpusched.SubmitOptions
	// checked, if not nil, is the tasks as the workflow's parse checked
	// them (workflow.Options.KeepChecked), submitted in their place.
	checked *gpusched.CheckedTasks
	// loaded, called once the tasks are submitted, gives the garbage
	// collector back its settings (collectNone).
	loaded func()
}

// runWorkflow runs tasks in the run directory dir to the end, or until
// stop's signals stop it, on the scheduler open makes (gpusched.New on
// dir, or on a reservation of it), reporting as o says.
func runWorkflow(stop *interrupts, stdout, stderr io.Writer, s gpusched.Scheduling, tasks []gpusched.TaskSpec, dir string,
	open func(gpusched.Scheduling, ...gpusched.Option) (*gpusched.Scheduler, error), o runOutput) (err error) {
	defer startProfile(stderr)()
	// Where the events go, and the human output.
	human := stdout
	var events *eventLog
	switch o.events {
	case "":
	case "-":
		human = stderr
		events = newEventLog(newLineQueue(stdout))
	default:
		events = newEventLog(newLineQueue(o.eventsFile))
	}
	if events != nil {
		defer func() {
			// A write error is said, unless a louder error is said already.
			if werr := events.close(); werr != nil && message(err) == "" {
				err = fmt.Errorf("--events %s: %w", o.events, werr)
			}
		}()
	}
	var display runDisplay
	live := !o.noProgress && isTerminal(human)
	if live {
		display = newLiveDisplay(human, dir, len(tasks))
	} else {
		display = newPlainDisplay(human, stderr)
	}
	// Every way out of here gives the terminal back (the summary below
	// stops the display first; this is for the errors).
	defer display.stop()

	// A reader that goes away (gpusched run | head) must not kill the
	// scheduler in the middle of its tasks: with SIGPIPE notified, a write
	// to a closed pipe fails with EPIPE instead, and that output is dropped.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	start := time.Now()
	completedNow := 0           // touched by the observer only, read after Run
	var startedNow atomic.Int32 // read before Run, when interrupted
	opts := []gpusched.Option{gpusched.WithUserAgent("gpusched/" + Version), gpusched.WithObserver(func(ev gpusched.Event) {
		if ev.Kind == gpusched.EventComplete {
			completedNow++
		} else if ev.Kind == gpusched.EventStarted {
			startedNow.Add(1)
		}
		if events != nil {
			events.observe(ev)
		}
		display.observe(ev)
	})}
	if o.inProcess {
		opts = append(opts, gpusched.WithExecutor(&local.Executor{}))
	}
	sched, err := open(s, opts...)
	if err != nil {
		return err
	}
	defer sched.Close()
	submitted := false
	if !stop.interrupted() {
		// Checking earlier runs' artifacts (hashing them) may take a while:
		// a signal stops it, and then nothing is submitted.
		// Run follows at once: the first task may start before the
		// submission is committed in full (a resumed run's, sooner).
		opts := o.submit
		opts.RunNext = true
		var edited []gpusched.EditedTask
		if o.checked != nil {
			edited, err = sched.SubmitChecked(stop.ctx, o.checked, opts)
		} else {
			edited, err = sched.SubmitWith(stop.ctx, tasks, opts)
		}
		if o.loaded != nil {
			o.loaded()
		}
		switch {
		case err == nil:
			submitted = true
			sayEdited(stderr, edited, o.submit.KeepEdited)
		case !stop.interrupted():
			return err
		}
	}
	if !stop.begin(cmp.Or(s.KillGrace, gpusched.DefaultKillGrace), sched.StopNow, display.interrupted) {
		saved := "nothing was saved"
		if submitted {
			saved = fmt.Sprintf("the %d tasks are saved for the next run", len(sched.Records()))
		}
		started := "no task started"
		if startedNow.Load() > 0 { // the first, as the tasks were submitted (RunNext): stopped by Close
			started = "the first task started, and is stopped"
		}
		fmt.Fprintf(human, "interrupted while loading: %s; %s\nrun directory: %s\n", started, saved, sched.RunDir())
		return nil
	}
	// Every task's record costs a copy of each (0.1-0.2 s for 100,000):
	// asked for only where they are used before the run starts (the
	// plain display's begin ignores them).
	if live || anyAutoBudget(tasks) {
		records := sched.Records()
		writeChosenBudgets(human, sched, tasks, records)
		display.begin(records)
	}
	records, err := sched.Run(stop.ctx)
	display.stop()
	if err != nil && !stop.interrupted() {
		return err
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, engine.ErrStoppedNow) {
		return err // the run broke (its state cannot be saved) as it was being stopped
	}
	writeSummary(human, records, completedNow, time.Since(start), sched.RunDir())
	if n, err := pendingEvents(sched.RunDir()); err == nil && n > 0 {
		fmt.Fprintf(human, "%d event(s) not delivered yet (on_complete, on_failure, on_run_end, webhook; see gpusched status); they are delivered again on the next run\n", n)
	}
	for _, r := range records {
		if !r.OK() { // complete, or not needed
			return errUnfinished
		}
	}
	return nil
}

// anyAutoBudget reports whether a task learns a memory budget from
// history (writeChosenBudgets has something to say).
func anyAutoBudget(tasks []gpusched.TaskSpec) bool {
	for i := range tasks {
		if tasks[i].Resources.MemoryAuto || tasks[i].Resources.MemoryHostAuto {
			return true
		}
	}
	return false
}

// maxBudgetLines is how many chosen budgets a run says before it starts;
// plan shows them all.
const maxBudgetLines = 10

// writeChosenBudgets says, before the run starts, the GPU and host memory
// budgets chosen for each task that learns them from history and is to
// run, and why ("train: memory_mib auto: 6400 MiB (peak 5800 MiB in 3
// attempts + margin)").
func writeChosenBudgets(w io.Writer, sched *gpusched.Scheduler, tasks []gpusched.TaskSpec, records []gpusched.Record) {
	toRun := make(map[string]bool, len(records))
	for _, r := range records {
		toRun[r.ID] = r.State == gpusched.StatePending
	}
	said, more := 0, 0
	for _, t := range tasks {
		if !t.Resources.MemoryAuto && !t.Resources.MemoryHostAuto || !toRun[t.ID] {
			continue
		}
		if said == maxBudgetLines {
			more++
			continue
		}
		st, ok, err := sched.Lookup(t.ID)
		if err != nil || !ok || st.Spec.Resources.Budget == nil && st.Spec.Resources.HostBudget == nil {
			continue
		}
		fmt.Fprintf(w, "%s: %s\n", t.ID, budgetNote(st.Spec.Resources))
		said++
	}
	if more > 0 {
		fmt.Fprintf(w, "... and %d more tasks with memory_mib or memory_mib_host auto (gpusched plan lists them all)\n", more)
	}
}
