package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/workflow"
)

// "gpusched run" through a daemon: the workflow is read and checked here
// (invalid input exits 2 and nothing is submitted), submitted as one run
// with this process's environment and folder (as "gpusched submit
// WORKFLOW" does), then followed: the live display or plain lines fed by
// the daemon's events, and at the end a summary and run's exit codes,
// from the run's tasks as the daemon saw them finish.
//
// Signals (SIGINT, SIGTERM, SIGHUP): the first cancels the run's tasks on
// the daemon (client.Cancel of the run: pending ones never start, running
// ones are stopped) and the command exits 1 once they have ended; the
// second exits 1 at once. One that comes before the run is submitted
// submits nothing.

// daemonRunFlags are the flags of run that a run through the daemon reads.
type daemonRunFlags struct {
	route      runRoute
	jobsSet    bool
	noProgress bool
	hostSet    string // the --cpus or --memory-mib-host flag given, if any
}

// refuseThroughDaemon refuses the flags of run that mean nothing through
// the daemon: the daemon keeps each run's state itself, in no run
// directory.
func refuseThroughDaemon(c *cobra.Command) error {
	if c.Flags().Changed("run-dir") {
		return inputf("--run-dir: a run through the daemon has no run directory (the daemon keeps each run's state); give --local to run in this process")
	}
	if c.Flags().Changed("events") {
		return inputf("--events: a run through the daemon writes no events file (read the daemon's, GET /v1/events); give --local to run in this process")
	}
	for _, flag := range []string{"force", "only", "from", "keep-edited"} {
		if c.Flags().Changed(flag) {
			return inputf("--%s: a run through the daemon is a new run, which keeps nothing from an earlier one: every task runs; give --local to run in this process", flag)
		}
	}
	return nil
}

// runThroughDaemon is "gpusched run" through a daemon.
func runThroughDaemon(c *cobra.Command, arg string, opts workflow.Options, f daemonRunFlags) error {
	stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
	if f.route.cl != nil {
		defer f.route.cl.Close()
	}
	if err := refuseThroughDaemon(c); err != nil {
		return err
	}
	sig := catchDaemonInterrupts(stderrSay(stderr))
	defer sig.release()

	data, err := readWorkflowData(arg, os.Stdin)
	if err != nil {
		return err
	}
	opts.DeclaredElsewhere = true // the daemon declares the custom resources, and checks them
	w, err := parseWorkflowData(arg, data, opts)
	if err != nil {
		return err
	}
	if err := gpusched.CheckNvidiaSMI(w.Tasks); err != nil {
		return invalid(w.Locate(err))
	}
	tasks, err := daemonTasks(w)
	if err != nil {
		return err
	}
	dir, err := workflowFolder(arg)
	if err != nil {
		return err
	}
	if f.route.announce != "" {
		fmt.Fprintln(stderr, f.route.announce)
	}
	if f.jobsSet {
		fmt.Fprintln(stderr, "gpusched: -j: how many tasks run at once is the daemon's to decide (gpusched daemon -j N); ignored")
	}
	if f.hostSet != "" {
		fmt.Fprintf(stderr, "gpusched: %s: the machine's cores and memory are the daemon's to count; ignored\n", f.hostSet)
	}
	warnDaemonScheduling(stderr, workflowName(arg), w.Scheduling)

	ctx := c.Context()
	cl := f.route.cl
	switch {
	case cl != nil: // dialed by chooseRoute
	case f.route.start:
		cl, err = dialOrStart(ctx, f.route.socket, stderr)
	default:
		cl, err = dialDaemon(ctx, f.route.socket)
		if err != nil {
			err = fmt.Errorf("%w; or give --local to run in this process", err)
		}
	}
	if err != nil {
		return err
	}
	defer cl.Close()
	if sig.interrupted() {
		fmt.Fprintln(stderr, "gpusched: interrupted before the run was submitted: nothing was submitted")
		return &interruptedError{}
	}

	// Following starts before the submission, so that no event of the
	// run is missed; the events of other runs are dropped.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	fw := newDaemonFollower(cl, tasks)
	stream, err := fw.subscribe(fctx)
	if err != nil {
		return fmt.Errorf("follow the daemon's events: %w", daemonError(err))
	}
	go fw.events(fctx, stream)

	start := time.Now()
	sub, err := cl.SubmitWorkflow(ctx, client.Workflow{Name: workflowName(arg), Dir: dir, Env: environMap(), Tasks: tasks})
	if err != nil {
		return submitError(workflowName(arg), err)
	}
	run := sub.Run
	sig.submitted(run)
	fmt.Fprintf(stderr, "gpusched: submitted run %s to the daemon at %s; Ctrl-C cancels its tasks\n", run, cl.Socket())

	human := stdout
	var display runDisplay
	if !f.noProgress && isTerminal(human) {
		live := newLiveDisplay(human, "", len(tasks))
		live.st.line = daemonEventLine
		live.charges = &daemonCharges{cl: cl, run: run}
		live.waits = &daemonWaits{cl: cl, run: run}
		display = live
	} else {
		plain := newPlainDisplay(human, stderr)
		plain.line = daemonEventLine
		display = plain
	}
	defer display.stop()
	order := sub.Tasks
	records := make([]gpusched.Record, len(order))
	for i, id := range order {
		records[i] = gpusched.Record{ID: id, State: gpusched.StatePending}
	}
	if q, err := cl.Queue(ctx, client.QueueOptions{IDs: []string{run}}); err == nil {
		records = records[:0]
		for _, t := range q {
			var st gpusched.State
			if st.UnmarshalText([]byte(t.State)) != nil {
				st = gpusched.StatePending
			}
			records = append(records, gpusched.Record{ID: t.ID, State: st})
		}
	}
	display.begin(records)
	fw.follow(run, display)
	sig.following(display.interrupted)

	// The tasks' ends, as the daemon answers them (reconnecting if it
	// restarts), and the signals meanwhile.
	type waited struct {
		tasks []client.TaskInfo
		err   error
	}
	ended := make(chan waited, 1)
	go func() {
		ts, err := cl.Wait(ctx, []string{run}, nil)
		ended <- waited{ts, err}
	}()
	var cancelErr chan error
	var res waited
	first := sig.first // nil once acted on
	for {
		select {
		case res = <-ended:
		case <-first:
			first = nil
			cancelErr = make(chan error, 1)
			go func() {
				_, err := cl.Cancel(context.WithoutCancel(ctx), run)
				cancelErr <- err
			}()
			continue
		}
		break
	}
	if res.err == nil {
		ids := make([]string, len(res.tasks))
		for i, t := range res.tasks {
			ids[i] = t.ID
		}
		fw.drain(ids, 2*time.Second)
	}
	stopFollow()
	display.stop()
	if res.err != nil {
		return fmt.Errorf("follow run %s: %w", run, res.err)
	}
	writeDaemonSummary(ctx, human, cl, res.tasks, order, time.Since(start), run)
	if cancelErr != nil {
		if err := <-cancelErr; err != nil {
			return &interruptedError{fmt.Errorf("cancel run %s: %w", run, err)}
		}
		return &interruptedError{}
	}
	for _, t := range res.tasks {
		if t.State != "complete" && !t.NotNeeded {
			return errUnfinished
		}
	}
	return nil
}

// workflowFolder is the run's folder: the workflow file's, or the current
// one for a workflow that has none (standard input, a pipe).
func workflowFolder(arg string) (string, error) {
	if arg != stdinArg && hasFolder(arg) {
		return filepath.Abs(filepath.Dir(arg))
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the current folder: %w", err)
	}
	return wd, nil
}

// warnDaemonScheduling says that a workflow's scheduling settings, which
// the daemon decides, are ignored.
func warnDaemonScheduling(w io.Writer, name string, s gpusched.Scheduling) {
	if !reflect.ValueOf(s).IsZero() {
		fmt.Fprintf(w, "gpusched: %s: the scheduling settings are the daemon's to decide; ignored\n", name)
	}
	if len(s.Resources) > 0 {
		fmt.Fprintf(w, "gpusched: %s: scheduling.resources: the daemon declares the custom resources (gpusched daemon --resource NAME=N); the tasks take units of the daemon's\n", name)
	}
}

// workflowName is the run's name in the queue: the workflow file's.
func workflowName(arg string) string {
	if arg == stdinArg {
		return "stdin"
	}
	return filepath.Base(arg)
}

// daemonInterrupts catches the stop signals of a run through the daemon.
type daemonInterrupts struct {
	sigs  chan os.Signal
	first chan struct{} // closed by the first signal
	done  chan struct{}
	exit  func(int)

	mu  sync.Mutex // guards the fields below
	got int
	run string           // the run, once submitted
	say func(msg string) // stderr, then the display
}

func catchDaemonInterrupts(say func(string)) *daemonInterrupts {
	in := &daemonInterrupts{sigs: make(chan os.Signal, 4), first: make(chan struct{}), done: make(chan struct{}),
		exit: os.Exit, say: say}
	signal.Notify(in.sigs, stopSignals...)
	go func() {
		for {
			select {
			case s := <-in.sigs:
				in.handle(s)
			case <-in.done:
				return
			}
		}
	}()
	return in
}

func (in *daemonInterrupts) handle(sig os.Signal) {
	in.mu.Lock()
	in.got++
	n, run, say := in.got, in.run, in.say
	in.mu.Unlock()
	switch {
	case n == 1 && run == "":
		say(fmt.Sprintf("gpusched: %s: nothing will be submitted (again to exit at once)", sig))
		close(in.first)
	case n == 1:
		say(fmt.Sprintf("gpusched: %s: cancelling the tasks of run %s on the daemon (again to exit at once)", sig, run))
		close(in.first)
	case n == 2 && run == "":
		say(fmt.Sprintf("gpusched: %s again: exiting now", sig))
		in.exit(ExitFailed)
	case n == 2:
		say(fmt.Sprintf("gpusched: %s again: exiting now; the daemon goes on cancelling run %s (gpusched queue)", sig, run))
		in.exit(ExitFailed)
	}
}

// submitted records the run, for the messages.
func (in *daemonInterrupts) submitted(run string) {
	in.mu.Lock()
	in.run = run
	in.mu.Unlock()
}

// following sends the messages to the display from now on.
func (in *daemonInterrupts) following(say func(string)) {
	in.mu.Lock()
	in.say = say
	in.mu.Unlock()
}

func (in *daemonInterrupts) interrupted() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.got > 0
}

// release stops acting on signals; they are still caught, and dropped.
func (in *daemonInterrupts) release() { close(in.done) }

// ---------------------------------------------------------------------------
// Summary

// writeDaemonSummary writes the summary of a run through the daemon that
// ended with tasks, as writeSummary does for a run in this process: the
// counts, the failed tasks with the end of their logs, the blocked ones.
// order is the tasks' ids in the workflow's order.
func writeDaemonSummary(ctx context.Context, w io.Writer, cl *client.Client, tasks []client.TaskInfo, order []string, took time.Duration, run string) {
	rank := make(map[string]int, len(order))
	for i, id := range order {
		rank[id] = i
	}
	sorted := append([]client.TaskInfo(nil), tasks...)
	sortByRank(sorted, rank)
	counts := map[string]int{}
	for _, t := range sorted {
		if t.NotNeeded {
			counts["not needed"]++ // blocked, and nothing went wrong
			continue
		}
		counts[t.State]++
	}
	var parts []string
	for _, st := range []string{"complete", "failed", "blocked", "not needed", "cancelled", "pending"} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	fmt.Fprintf(w, "\n%d tasks in %s: %s\n", len(sorted), round(took), joinComma(parts))
	tails, blocked := 0, 0
	for _, t := range sorted {
		switch t.State {
		case "failed":
			why := t.Error
			if why == "" && t.ExitCode != nil {
				why = fmt.Sprintf("exit code %d", *t.ExitCode)
			}
			if t.Attempts == 0 {
				fmt.Fprintf(w, "  failed  %s: %s (it never started)\n", t.ID, why)
				break
			}
			fmt.Fprintf(w, "  failed  %s: %s after %d attempt(s); gpusched logs %s\n", t.ID, oneLine(why), t.Attempts, t.ID)
			if tails++; tails <= maxSummaryTails {
				writeDaemonLogTail(ctx, w, cl, t.ID)
			}
		case "blocked":
			if t.NotNeeded {
				break // counted above
			}
			if blocked++; blocked <= maxSummaryBlocked {
				fmt.Fprintf(w, "  blocked %s: by %s\n", t.ID, t.BlockedBy)
			}
		}
	}
	if tails > maxSummaryTails {
		fmt.Fprintf(w, "  (the logs of the other %d failed tasks: gpusched logs TASK)\n", tails-maxSummaryTails)
	}
	if blocked > maxSummaryBlocked {
		fmt.Fprintf(w, "  (and %d more blocked: gpusched queue --all lists every task)\n", blocked-maxSummaryBlocked)
	}
	fmt.Fprintf(w, "run %s on the daemon at %s (gpusched queue --all)\n", run, cl.Socket())
}

// writeDaemonLogTail prints the last lines of a task's last log, as the
// daemon gives it, indented and made safe for a terminal.
func writeDaemonLogTail(ctx context.Context, w io.Writer, cl *client.Client, id string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var tail tailWriter
	if _, err := cl.Logs(ctx, id, client.LogOptions{}, &tail); err != nil {
		fmt.Fprintf(w, "    (cannot read its log: %v)\n", oneLine(err.Error()))
		return
	}
	lines := tailLines(tail.buf, tail.cut, summaryTailLines)
	if len(lines) == 0 {
		fmt.Fprintf(w, "    (its log is empty)\n")
	}
	for _, l := range lines {
		fmt.Fprintf(w, "    | %s\n", l)
	}
}

// tailWriter keeps the last tailWindow bytes written to it.
type tailWriter struct {
	buf []byte
	cut bool // bytes were dropped before buf
}

const tailWindow = 64 << 10

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailWindow; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}
