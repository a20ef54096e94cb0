package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
)

// "gpusched status" for a person: a count by state, a table of the tasks
// with a note on each, and the cards.

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
