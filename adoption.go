package gpusched

// What a scheduler opening a run directory would find of the attempts
// recorded running there: for status and plan, which only look.

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
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
	out := map[string]RunningFate{}
	for i := range rows {
		if r := &rows[i]; r.State == task.Running {
			out[r.ID] = inspectRunning(runDir, r)
		}
	}
	return out, nil
}

// inspectRunning tells what a scheduler opening runDir would find of the
// last attempt of task r, recorded running.
func inspectRunning(runDir string, r *store.Row) RunningFate {
	rec := r.Record
	var h executor.Handle
	if a := rec.LastAttempt(); a != nil {
		h = r.Handles[a.Number]
	}
	a := rec.LastAttempt()
	if a == nil || a.Ended() {
		return RunningFate{Note: "interrupted: runs again"}
	}
	abs, err := filepath.Abs(runDir)
	if err != nil {
		abs = runDir
	}
	o := executor.Orphan{Handle: h, Job: executor.Job{TaskID: rec.ID, Attempt: a.Number, LogPath: a.LogPath,
		Token: runTag(abs) + "." + rec.ID + "." + strconv.Itoa(a.Number)}}
	if h.Executor != "" && h.Executor != local.Name {
		return RunningFate{Note: fmt.Sprintf("its executor %s will be asked how it ended", h.Executor)}
	}
	since := a.Start.Local().Format("2006-01-02 15:04:05")
	switch fate, res := supervise.Inspect(abs, o); fate {
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
