package report

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// TableRow is one task in the table.
type TableRow struct {
	N          int // anchor: the row's id is "t<N>"
	ID         string
	State      string
	StateClass string
	Attempts   int
	RunTime    Cell   // sum of the attempts' durations
	DepWait    Cell   // first ready - submitted
	SlotWait   Cell   // sum over attempts of start - ready
	Card       string // the cards its attempts ran on, and their batch jobs (Slurm's job id and node)
	Requested  Cell   // MiB
	Peak       Cell   // MiB
	Exit       string
	Error      string // full text, shown on hover when shortened: why it failed, was blocked, or waits
	ErrorShort string
}

// Cell is a table cell with a sort key (empty: sorts last).
type Cell struct {
	Text string
	V    string
}

const errorShort = 120 // characters of an error shown in the table

func buildRows(d Data, items []item) []TableRow {
	// Run time: what is known of each attempt; at least that for one
	// without an end or interrupted by its scheduler's stop.
	runTime := make([]time.Duration, len(d.Rows))
	atLeast := make([]bool, len(d.Rows))
	for _, it := range items {
		runTime[it.row] += it.known.Sub(it.start)
		if it.end.After(it.known) || (it.open && it.outcome != Running) {
			atLeast[it.row] = true
		}
	}
	rows := make([]TableRow, len(d.Rows))
	for i := range d.Rows {
		r := &d.Rows[i]
		tr := TableRow{N: i, ID: r.ID, State: r.State.String(), StateClass: "s-" + r.State.String(), Attempts: len(r.Attempts)}
		if r.State == task.Blocked && r.NotNeeded {
			tr.State = "not needed" // blocked, and nothing went wrong
		}
		if len(r.Attempts) > 0 {
			tr.RunTime = durCell(runTime[i])
			if atLeast[i] {
				tr.RunTime.Text = "≥ " + tr.RunTime.Text
			}
		}
		// Waiting for dependencies: from submission to the first time it
		// became ready in this submission (a resumed run resubmits).
		for _, a := range r.Attempts {
			if !r.Submitted.IsZero() && !a.ReadyAt.IsZero() && !a.ReadyAt.Before(r.Submitted) {
				tr.DepWait = durCell(a.ReadyAt.Sub(r.Submitted))
				break
			}
		}
		var slot time.Duration
		known := false
		var cardList []string
		var peak, asked int64
		for _, a := range r.Attempts {
			if !a.ReadyAt.IsZero() && !a.Start.Before(a.ReadyAt) {
				slot += a.Start.Sub(a.ReadyAt)
				known = true
			}
			if cs := a.Cards(); len(cs) > 0 {
				if c := task.CardList(cs); !slices.Contains(cardList, c) {
					cardList = append(cardList, c)
				}
			}
			if j := jobText(a.Job); j != "" && !slices.Contains(cardList, j) {
				cardList = append(cardList, j)
			}
			peak = max(peak, a.MemPeakMiB)
			if a.MemRequestedMiB > 0 {
				asked = a.MemRequestedMiB
			}
		}
		if known {
			tr.SlotWait = durCell(slot)
		}
		tr.Card = strings.Join(cardList, ", ")
		var sp spec
		_ = json.Unmarshal(r.Spec, &sp)
		if sp.Resources.Device == string(task.CUDA) {
			if r.State == task.Pending || asked == 0 {
				asked = max(asked, sp.Resources.MemoryMiB, r.GPURequestMiB)
			}
		}
		if asked > 0 {
			tr.Requested = Cell{Text: strconv.FormatInt(asked, 10), V: strconv.FormatInt(asked, 10)}
		}
		if peak > 0 {
			tr.Peak = Cell{Text: strconv.FormatInt(peak, 10), V: strconv.FormatInt(peak, 10)}
		}
		if r.ExitCode != nil {
			tr.Exit = strconv.Itoa(*r.ExitCode)
		}
		if a := r.LastAttempt(); a != nil {
			var extra []string
			if a.Signal != "" && r.ExitCode == nil {
				extra = append(extra, a.Signal)
			}
			if a.TimedOut {
				extra = append(extra, "timed out")
			}
			if !a.Ended() && d.Live {
				extra = append(extra, "running")
			}
			if len(extra) > 0 {
				tr.Exit = strings.TrimPrefix(tr.Exit+" "+strings.Join(extra, ", "), " ")
			}
		}
		msg := r.Error
		if r.BlockedBy != "" && !strings.Contains(msg, r.BlockedBy) {
			msg = strings.TrimPrefix(msg+"; blocked by "+r.BlockedBy, "; ")
		}
		switch {
		case r.State == task.Complete:
			msg = ""
			if r.Rerun != "" {
				msg = "ran again: " + r.Rerun
			}
		case (r.State == task.Pending || r.Waiting.Kind == task.WaitQueued) && d.Live && r.Waiting.Waiting():
			// Why it waits, as the running scheduler decided it (a
			// retry's says after what error; a running task's, why its
			// attempt waits in Slurm's queue).
			msg = r.Waiting.Text(d.Now)
		}
		tr.Error = oneLine(msg)
		tr.ErrorShort = shorten(tr.Error, errorShort)
		if tr.ErrorShort == tr.Error {
			tr.Error = ""
		}
		rows[i] = tr
	}
	return rows
}

// jobText names an attempt's batch job for the table and the timeline:
// "Slurm job 4242 on node7"; "" for none (an attempt run here, or one
// whose submission never got a job).
func jobText(j *task.RemoteJob) string {
	if j == nil || j.ID == "" {
		return ""
	}
	s := cmp.Or(j.System, "batch") + " job " + j.ID
	if j.Node != "" {
		s += " on " + j.Node
	}
	return s
}

func durCell(d time.Duration) Cell {
	return Cell{Text: fmtDur(d), V: strconv.FormatFloat(d.Seconds(), 'f', 3, 64)}
}
