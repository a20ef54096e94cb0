package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/procfs"
	"github.com/gpusched/gpusched/internal/store"
)

func newStatusCmd() *cobra.Command {
	var runDir string
	var asJSON, watch bool
	var interval time.Duration
	c := &cobra.Command{
		Use:   "status [WORKFLOW] [--run-dir DIR] [--json | --watch [--interval 1s]]",
		Short: "Show the state of every task of a run",
		Long: `Show every task of a run: state, attempts, last exit code, card, time, why
it failed or is blocked, and why a pending task is still waiting (for a GPU
task: what it needs and what stands in the way on the best card). With GPU
tasks, the cards are shown too. Name the run with --run-dir, or give the
workflow file to use its default run directory. It reads the state
database without locking it, so it works while "gpusched run" is going.

--json prints {"run_dir": ..., "scheduler_pid": ..., "tasks": [{"id",
"state", "attempts", "exit_code", "gpu", "waiting", ...}], "gpus": [...]};
exit_code and gpu are null when not known.

--watch shows it again every --interval (1s) until Ctrl-C, or until the run
is over (no scheduler uses the run directory), when it prints the final
state once and exits 0; with no scheduler running it prints it once. On a
terminal it redraws in place, full screen; elsewhere (a pipe, a file) it
prints a new full status every interval, after a blank line.`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			wf := firstArg(args)
			dir, err := runDirFor(runDir, wf)
			if err != nil {
				return err
			}
			if watch {
				switch {
				case asJSON:
					return invalid(errors.New("--watch and --json cannot be used together; poll status --json instead"))
				case interval < 100*time.Millisecond:
					return invalid(fmt.Errorf("--interval must be at least 100ms, got %s", interval))
				}
				return watchStatus(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), dir, interval)
			}
			if c.Flags().Changed("interval") {
				return invalid(errors.New("--interval goes with --watch"))
			}
			v, err := loadRun(dir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeStatusJSON(c.OutOrStdout(), v)
			}
			writeStatusTable(c.OutOrStdout(), v, time.Now())
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	c.Flags().BoolVar(&watch, "watch", false, "show it again every --interval until Ctrl-C or the end of the run")
	c.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch refreshes")
	return c
}

// runView is what status and gpus show: a run's tasks, cards and facts,
// read through a read-only connection.
type runView struct {
	dir       string
	pid       int // the running scheduler, 0 if none
	rows      []store.Row
	specs     map[string]gpusched.TaskSpec
	cards     []gpu.CardView
	cardsAt   time.Time
	unknown   string            // why the GPU state cannot be read
	waiting   map[string]string // pending task -> why it does not start
	gpuTasks  bool              // the run has GPU tasks
	taskIndex map[string]int
	pending   map[string][]store.EventWrite // completion events not yet delivered, by task
}

// withState opens a run's state database read-only and calls fn with it.
// A database a run is still creating holds nothing yet: fn is not called.
// Errors come back classified for exit codes.
func withState(dir string, fn func(st *store.SQLite) error) error {
	path, err := statePath(dir)
	if err != nil {
		return err
	}
	st, err := store.OpenSQLiteReadOnly(path, dir)
	if errors.Is(err, store.ErrEmpty) {
		return nil
	}
	if err != nil {
		return failed(err)
	}
	defer st.Close()
	if err := fn(st); err != nil {
		return failed(err)
	}
	return nil
}

// loadRows reads a run's tasks.
func loadRows(dir string) (rows []store.Row, err error) {
	err = withState(dir, func(st *store.SQLite) error {
		rows, err = st.Load()
		return err
	})
	return rows, err
}

// loadRun reads everything status shows of a run.
func loadRun(dir string) (*runView, error) {
	v := &runView{dir: dir, pid: schedulerPID(dir), specs: map[string]gpusched.TaskSpec{}, taskIndex: map[string]int{},
		pending: map[string][]store.EventWrite{}, waiting: map[string]string{}}
	if err := withState(dir, v.read); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *runView) read(st *store.SQLite) (err error) {
	if v.rows, err = st.Load(); err != nil {
		return err
	}
	if v.cards, v.cardsAt, v.unknown, err = loadCards(st); err != nil {
		return err
	}
	events, err := st.Events()
	if err != nil {
		return err
	}
	for _, ev := range events {
		if ev.Acked.IsZero() {
			v.pending[ev.TaskID] = append(v.pending[ev.TaskID], ev)
		}
	}
	for i, r := range v.rows {
		var sp gpusched.TaskSpec
		_ = json.Unmarshal(r.Spec, &sp)
		v.specs[r.ID] = sp
		v.taskIndex[r.ID] = i
		v.gpuTasks = v.gpuTasks || sp.Resources.GPU()
	}
	v.explainWaiting()
	return nil
}

// loadCards reads the saved view of the cards, when it was saved, and why
// the GPU state is unknown, if it is.
func loadCards(st *store.SQLite) (cards []gpu.CardView, at time.Time, unknown string, err error) {
	if cards, at, err = st.LoadCards(); err != nil {
		return nil, at, "", err
	}
	meta, err := st.LoadMeta()
	return cards, at, meta[store.MetaGPUUnknown], err
}

// pendingEvents counts the completion events not delivered yet.
func pendingEvents(dir string) (n int, err error) {
	err = withState(dir, func(st *store.SQLite) error {
		pending, _, err := st.PendingEvents()
		n = len(pending)
		return err
	})
	return n, err
}

// explainWaiting says, for each pending task, why it has not started.
func (v *runView) explainWaiting() {
	v.waiting = map[string]string{}
	for _, r := range v.rows {
		if r.State != gpusched.StatePending {
			continue
		}
		sp := v.specs[r.ID]
		var waitingOn []string
		for _, d := range sp.Dependencies {
			if i, ok := v.taskIndex[d]; ok && v.rows[i].State != gpusched.StateComplete {
				waitingOn = append(waitingOn, d)
			}
		}
		switch {
		case v.pid == 0:
			v.waiting[r.ID] = "not started: no scheduler is running"
		case len(waitingOn) > 0:
			v.waiting[r.ID] = "waiting for " + strings.Join(waitingOn, ", ")
		case sp.Resources.GPU():
			need := gpu.Need{MiB: max(sp.Resources.MemoryMiB, r.GPURequestMiB), Exclusive: sp.Resources.Exclusive}
			v.waiting[r.ID] = gpu.Explain(v.cards, need, r.ID, v.unknown)
		default:
			v.waiting[r.ID] = "waiting for a free slot"
		}
	}
}

type taskJSON struct {
	ID           string             `json:"id"`
	State        gpusched.State     `json:"state"`
	Attempts     int                `json:"attempts"`
	ExitCode     *int               `json:"exit_code"`
	GPU          *int               `json:"gpu"`
	Error        string             `json:"error,omitempty"`
	BlockedBy    string             `json:"blocked_by,omitempty"`
	Waiting      string             `json:"waiting,omitempty"`
	Rerun        string             `json:"rerun,omitempty"`
	Events       []eventJSON        `json:"events_pending,omitempty"`
	Dependencies []string           `json:"dependencies"`
	Priority     int                `json:"priority"`
	MemoryMiB    int64              `json:"memory_mib,omitempty"`
	Started      *time.Time         `json:"started"`
	Ended        *time.Time         `json:"ended"`
	Log          *string            `json:"log"`
	History      []gpusched.Attempt `json:"history"`
}

// eventJSON is a completion event not yet delivered.
type eventJSON struct {
	ID        int64      `json:"id"`
	Attempt   int        `json:"attempt"`
	Tries     int        `json:"failed_tries"`
	LastError string     `json:"last_error,omitempty"`
	NextTry   *time.Time `json:"next_try,omitempty"`
}

// eventNote says, for the table, why a task's completion event is pending.
func eventNote(evs []store.EventWrite) string {
	if len(evs) == 0 {
		return ""
	}
	ev := evs[len(evs)-1]
	if ev.Tries == 0 {
		return "completion event pending"
	}
	return fmt.Sprintf("completion handler failed %d time(s): %s", ev.Tries, ev.LastError)
}

// schedulerPID returns the PID of the scheduler using the run directory, or
// 0 if none is running: the PID the lock file names, if that process lives.
func schedulerPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, gpusched.LockFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !procfs.Alive(pid) {
		return 0
	}
	return pid
}

func writeStatusJSON(w io.Writer, v *runView) error {
	out := struct {
		RunDir string `json:"run_dir"`
		// SchedulerPID is the running scheduler's PID, null if none runs
		// (then "running" tasks were interrupted and will run again).
		SchedulerPID *int           `json:"scheduler_pid"`
		Tasks        []taskJSON     `json:"tasks"`
		GPUs         []gpu.CardView `json:"gpus"`
		GPUUnknown   string         `json:"gpu_unknown,omitempty"`
	}{RunDir: v.dir, Tasks: make([]taskJSON, 0, len(v.rows)), GPUs: v.cards, GPUUnknown: v.unknown}
	if v.pid > 0 {
		out.SchedulerPID = &v.pid
	}
	if out.GPUs == nil {
		out.GPUs = []gpu.CardView{}
	}
	for _, r := range v.rows {
		spec := v.specs[r.ID]
		t := taskJSON{
			ID: r.ID, State: r.State, Attempts: len(r.Attempts), ExitCode: r.ExitCode,
			Error: r.Error, BlockedBy: r.BlockedBy, Waiting: v.waiting[r.ID], Rerun: r.Rerun,
			Dependencies: spec.Dependencies, Priority: spec.Priority, History: r.Attempts,
		}
		if spec.Resources.GPU() {
			t.MemoryMiB = max(spec.Resources.MemoryMiB, r.GPURequestMiB)
		}
		for _, ev := range v.pending[r.ID] {
			e := eventJSON{ID: ev.ID, Attempt: ev.Attempt, Tries: ev.Tries, LastError: ev.LastError}
			if !ev.NextTry.IsZero() {
				next := ev.NextTry
				e.NextTry = &next
			}
			t.Events = append(t.Events, e)
		}
		if t.Dependencies == nil {
			t.Dependencies = []string{}
		}
		if t.History == nil {
			t.History = []gpusched.Attempt{}
		}
		if a := r.LastAttempt(); a != nil {
			t.GPU = a.GPU
			start := a.Start
			t.Started = &start
			if a.Ended() {
				end := a.End
				t.Ended = &end
			}
			if a.LogPath != "" {
				lp := a.LogPath
				t.Log = &lp
			}
		}
		out.Tasks = append(out.Tasks, t)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return failed(err)
	}
	return nil
}

func writeStatusTable(w io.Writer, v *runView, now time.Time) {
	counts := map[gpusched.State]int{}
	for _, r := range v.rows {
		counts[r.State]++
	}
	var parts []string
	for _, st := range []gpusched.State{gpusched.StateComplete, gpusched.StateRunning, gpusched.StatePending, gpusched.StateFailed, gpusched.StateBlocked, gpusched.StateCancelled} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	fmt.Fprintf(w, "%d tasks: %s\n", len(v.rows), strings.Join(parts, ", "))
	switch {
	case v.pid > 0:
		fmt.Fprintf(w, "scheduler: running (pid %d)\n\n", v.pid)
	case counts[gpusched.StateRunning] > 0:
		fmt.Fprintf(w, "scheduler: not running; the tasks shown running were interrupted and will run again\n\n")
	default:
		fmt.Fprintf(w, "scheduler: not running\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tATTEMPTS\tEXIT\tGPU\tTIME\tNOTE")
	for _, r := range v.rows {
		exit, card, took := "-", "-", "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		if a := r.LastAttempt(); a != nil {
			if a.GPU != nil {
				card = strconv.Itoa(*a.GPU)
			}
			end := a.End
			if !a.Ended() {
				end = now
			}
			took = round(end.Sub(a.Start)).String()
			if a.Signal != "" && r.ExitCode == nil {
				exit = a.Signal
			}
		}
		note := r.Error
		switch r.State {
		case gpusched.StateComplete:
			note = eventNote(v.pending[r.ID])
		case gpusched.StateRunning:
			note = ""
			if r.Rerun != "" {
				note = "runs again: " + r.Rerun
			}
		case gpusched.StatePending:
			note = v.waiting[r.ID]
			if r.Rerun != "" {
				note = "runs again (" + r.Rerun + "); " + note
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.State, len(r.Attempts), exit, card, took, note)
	}
	tw.Flush()
	if v.gpuTasks && (len(v.cards) > 0 || v.unknown != "") {
		fmt.Fprintln(w)
		writeCards(w, v.cards, v.unknown, v.cardsAt)
	}
}

// writeCards prints the cards as admission sees them.
func writeCards(w io.Writer, cards []gpu.CardView, unknown string, at time.Time) {
	if unknown != "" {
		fmt.Fprintf(w, "GPU state unknown: %s\n", unknown)
	}
	if len(cards) == 0 {
		return
	}
	if !at.IsZero() {
		fmt.Fprintf(w, "cards as of %s (MiB):\n", at.Format(time.TimeOnly))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CARD\tNAME\tTOTAL\tUSED\tFOREIGN\tCHARGED\tAVAILABLE\tSTATE\tTASKS\t")
	for _, c := range cards {
		state := c.State.String()
		if c.Reason != "" && c.State != gpu.CardOK {
			state += ": " + c.Reason
		}
		if !c.Until.IsZero() {
			state += " (until " + c.Until.Local().Format(time.TimeOnly) + ")"
		}
		if c.ReservedFor != "" {
			state += ", reserved for " + c.ReservedFor
		}
		var tasks []string
		for _, h := range c.Holders {
			s := fmt.Sprintf("%s %d", h.Task, h.ChargedMiB())
			if h.Exclusive {
				s += " (exclusive)"
			}
			tasks = append(tasks, s)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", c.Index, c.Name, c.TotalMiB, c.UsedMiB, c.ForeignMiB,
			c.ChargedMiB, c.AvailableMiB, state, strings.Join(tasks, ", "))
	}
	tw.Flush()
}
