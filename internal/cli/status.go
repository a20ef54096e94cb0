package cli

import (
	"encoding/json"
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
	"github.com/gpusched/gpusched/internal/store"
)

func newStatusCmd() *cobra.Command {
	var runDir string
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [WORKFLOW] [--run-dir DIR] [--json]",
		Short: "Show the state of every task of a run",
		Long: `Show every task of a run: state, attempts, last exit code, card, time, and
why it failed or is blocked. Name the run with --run-dir, or give the
workflow file to use its default run directory. It reads the state
database without locking it, so it works while "gpusched run" is going.

--json prints {"run_dir": ..., "tasks": [{"id", "state", "attempts",
"exit_code", "gpu", ...}]}; exit_code and gpu are null when not known.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return invalid(fmt.Errorf("%s takes at most one workflow file (got %d arguments)", c.CommandPath(), len(args)))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			wf := ""
			if len(args) == 1 {
				wf = args[0]
			}
			dir, err := runDirFor(runDir, wf)
			if err != nil {
				return err
			}
			rows, err := loadRows(dir)
			if err != nil {
				return err
			}
			pid := schedulerPID(dir)
			if asJSON {
				return writeStatusJSON(c.OutOrStdout(), dir, pid, rows)
			}
			writeStatusTable(c.OutOrStdout(), rows, pid, time.Now())
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	return c
}

// loadRows reads a run's tasks through a read-only connection.
func loadRows(dir string) ([]store.Row, error) {
	path, err := statePath(dir)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenSQLiteReadOnly(path, dir)
	if err != nil {
		return nil, failed(err)
	}
	defer st.Close()
	rows, err := st.Load()
	if err != nil {
		return nil, failed(err)
	}
	return rows, nil
}

type taskJSON struct {
	ID           string             `json:"id"`
	State        gpusched.State     `json:"state"`
	Attempts     int                `json:"attempts"`
	ExitCode     *int               `json:"exit_code"`
	GPU          *int               `json:"gpu"`
	Error        string             `json:"error,omitempty"`
	BlockedBy    string             `json:"blocked_by,omitempty"`
	Dependencies []string           `json:"dependencies"`
	Priority     int                `json:"priority"`
	Started      *time.Time         `json:"started"`
	Ended        *time.Time         `json:"ended"`
	Log          *string            `json:"log"`
	History      []gpusched.Attempt `json:"history"`
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
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
		return 0
	}
	return pid
}

func writeStatusJSON(w io.Writer, dir string, pid int, rows []store.Row) error {
	out := struct {
		RunDir string `json:"run_dir"`
		// SchedulerPID is the running scheduler's PID, null if none runs
		// (then "running" tasks were interrupted and will run again).
		SchedulerPID *int       `json:"scheduler_pid"`
		Tasks        []taskJSON `json:"tasks"`
	}{RunDir: dir, Tasks: make([]taskJSON, 0, len(rows))}
	if pid > 0 {
		out.SchedulerPID = &pid
	}
	for _, r := range rows {
		var spec gpusched.TaskSpec
		_ = json.Unmarshal(r.Spec, &spec)
		t := taskJSON{
			ID: r.ID, State: r.State, Attempts: len(r.Attempts), ExitCode: r.ExitCode,
			Error: r.Error, BlockedBy: r.BlockedBy, Dependencies: spec.Dependencies, Priority: spec.Priority,
			History: r.Attempts,
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

func writeStatusTable(w io.Writer, rows []store.Row, pid int, now time.Time) {
	counts := map[gpusched.State]int{}
	for _, r := range rows {
		counts[r.State]++
	}
	var parts []string
	for _, st := range []gpusched.State{gpusched.StateComplete, gpusched.StateRunning, gpusched.StatePending, gpusched.StateFailed, gpusched.StateBlocked, gpusched.StateCancelled} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	fmt.Fprintf(w, "%d tasks: %s\n", len(rows), strings.Join(parts, ", "))
	switch {
	case pid > 0:
		fmt.Fprintf(w, "scheduler: running (pid %d)\n\n", pid)
	case counts[gpusched.StateRunning] > 0:
		fmt.Fprintf(w, "scheduler: not running; the tasks shown running were interrupted and will run again\n\n")
	default:
		fmt.Fprintf(w, "scheduler: not running\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tATTEMPTS\tEXIT\tGPU\tTIME\tNOTE")
	for _, r := range rows {
		exit, gpu, took := "-", "-", "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		if a := r.LastAttempt(); a != nil {
			if a.GPU != nil {
				gpu = strconv.Itoa(*a.GPU)
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
		if r.State == gpusched.StateComplete {
			note = ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.State, len(r.Attempts), exit, gpu, took, note)
	}
	tw.Flush()
}
