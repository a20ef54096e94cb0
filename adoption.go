package gpusched

// What a scheduler opening a run directory would find of the attempts
// recorded running there: for status and plan, which only look.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/executor/slurm"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/supervise"
	"github.com/gpusched/gpusched/internal/task"
)

// RunningFate says what a scheduler opening a run directory now would do
// with a task recorded running there while no scheduler runs it.
type RunningFate struct {
	// Adopt: its attempt still runs under its supervisor and would be
	// adopted, not started again.
	Adopt bool
	// Ended: its attempt ended while no scheduler watched; Result says how,
	// and that is what would be recorded.
	Ended  bool
	Result ExecResult
	// Since is when the attempt started running.
	Since string
	// Note says it for a person: "adopt (running since 2026-12-02
	// 14:03:11)", "ended while no scheduler ran: exit code 3",
	// "interrupted: its supervisor is gone; runs again".
	Note string
}

// RunningFates tells, for each task recorded running in runDir, what a
// scheduler opening it now would do, without changing anything. Only
// meaningful while no scheduler uses the run directory.
func RunningFates(runDir string) (map[string]RunningFate, error) {
	path := filepath.Join(runDir, StateFile)
	st, err := store.OpenSQLiteReadOnly(path, runDir)
	if err != nil {
		return nil, err
	}
	rows, err := st.Load()
	st.Close()
	if err != nil {
		return nil, err
	}
	all := make([]*store.Row, len(rows))
	for i := range rows {
		all[i] = &rows[i]
	}
	return runningFates(runDir, all), nil
}

// runningFates tells what a scheduler opening runDir would find of the last
// attempt of each task of rows recorded running, by task id.
func runningFates(runDir string, rows []*store.Row) map[string]RunningFate {
	abs, err := filepath.Abs(runDir)
	if err != nil {
		abs = runDir
	}
	out := map[string]RunningFate{}
	var orphans []executor.Orphan
	var asked []*store.Row
	for _, r := range rows {
		if r.State != task.Running {
			continue
		}
		a := r.LastAttempt()
		if a == nil || a.Ended() {
			out[r.ID] = RunningFate{Note: "interrupted: runs again"}
			continue
		}
		h := r.Handles[a.Number]
		var sp struct{ Executor string }
		_ = json.Unmarshal(r.Spec, &sp) // a definition that does not read has no executor: local
		switch {
		case h.Executor == slurm.Name || h.IsZero() && sp.Executor == slurm.Name:
			out[r.ID] = slurmFate(h, a)
		case h.Executor != "" && h.Executor != local.Name:
			out[r.ID] = RunningFate{Note: fmt.Sprintf("its executor %s will be asked how it ended", h.Executor)}
		default:
			orphans = append(orphans, executor.Orphan{Handle: h, Job: executor.Job{TaskID: r.ID, Attempt: a.Number,
				LogPath: a.LogPath, Token: runTag(abs) + "." + r.ID + "." + strconv.Itoa(a.Number)}})
			asked = append(asked, r)
		}
	}
	fates, results := supervise.Inspect(abs, orphans)
	for i, r := range asked {
		out[r.ID] = fateNote(fates[i], results[i], r.LastAttempt().Start)
	}
	return out
}

// slurmFate is what a scheduler opening the run would do with attempt a
// of a Slurm job whose handle is h, as far as can be told without asking
// Slurm: record its result file's outcome, or adopt the job (Slurm is
// asked then; a job it no longer has is waited for, then run again). An
// attempt without a handle (the scheduler died between sbatch and saving
// the job id) has its job looked for by name.
func slurmFate(h executor.Handle, a *task.Attempt) RunningFate {
	since := a.Start.Local().Format("2006-01-02 15:04:05")
	if h.IsZero() {
		return RunningFate{Adopt: true, Since: since,
			Note: "adopt its Slurm job, looked for by name (its id was not saved); run again if Slurm has none"}
	}
	job, res, ended, err := slurm.Peek(h)
	switch {
	case err != nil:
		return RunningFate{Since: since, Note: "interrupted: " + err.Error() + "; runs again"}
	case ended:
		f := fateNote(supervise.Ended, res, a.Start)
		f.Note = "Slurm job " + job + " " + f.Note
		return f
	}
	note := "adopt Slurm job " + job
	if j := a.Job; j != nil && j.State != "" {
		seen := j.State
		if j.Node != "" {
			seen += " on " + j.Node
		}
		if j.Reason != "" {
			seen += ": " + j.Reason
		}
		note += " (last seen " + seen + ")"
	}
	return RunningFate{Adopt: true, Since: since, Note: note + "; Slurm is asked when the run starts"}
}

// fateNote says a fate for a person.
func fateNote(fate supervise.Fate, res executor.Result, start time.Time) RunningFate {
	since := start.Local().Format("2006-01-02 15:04:05")
	switch fate {
	case supervise.Adoptable:
		return RunningFate{Adopt: true, Since: since, Note: "adopt (running since " + since + ")"}
	case supervise.Ended:
		how := "exit code " + strconv.Itoa(res.ExitCode)
		switch {
		case res.Err != nil:
			how = res.Err.Error()
		case res.Signal != 0:
			how = executor.SignalName(res.Signal)
		case res.Reason == executor.TimedOut:
			how = "timed out"
		}
		return RunningFate{Ended: true, Result: res, Since: since, Note: "ended while no scheduler ran (" + how + "): its result is recorded"}
	case supervise.Unknown:
	}
	return RunningFate{Since: since, Note: "interrupted: its supervisor is gone; runs again"}
}
