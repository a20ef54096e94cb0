package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
)

func newGPUsCmd() *cobra.Command {
	var runDir, socket string
	var asJSON, live bool
	c := &cobra.Command{
		Use:   "gpus [WORKFLOW] [--run-dir DIR] [--json] [--live]",
		Short: "Show the GPUs as gpusched sees them",
		Long: `Show each card: total, used, foreign (held by processes that are not ours),
charged (to our running tasks), available for new tasks, the tasks on it,
and its state (ok, cooling down, quarantined, unknown, hidden).

With a run (--run-dir, or a workflow for its default run directory) whose
scheduler is running, its view of the cards is shown: what it decides
with, saved at each reading, and how old that is. Otherwise (no run, a run
that has ended, or --live) nvidia-smi is run now, with the workflow's GPU
settings if one is given, and nothing of ours is counted as running; if
nvidia-smi cannot be read then, the ended run's last view is shown, with
its age. The first line says where the numbers come from.

--json prints {"source": "live" or "run", "run_dir", "scheduler_pid",
"updated" (when the run's view was saved), "live_error" (why nvidia-smi
could not be read, when a run's last view is shown instead), "unknown",
"cards": [...]}.

With neither a run nor --live, when a daemon answers (see gpusched
submit for which), its ledger is shown: the cards as its admission sees
them, every user's tasks on them. --json prints {"source": "daemon" (or
"live" while it has not read the cards), "error", "cards": [...]}.`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			wf := firstArg(args)
			if wf == "" && runDir == "" && !live {
				if handled, err := daemonGPUs(c, socket, asJSON); handled {
					return err
				}
			}
			var settings gpusched.Scheduling
			if wf != "" {
				w, err := loadWorkflow(wf)
				if err != nil {
					return err
				}
				settings = w.Scheduling
			}
			var saved *savedCards
			if !live && (runDir != "" || wf != "") {
				dir, err := runDirFor(runDir, wf)
				if err != nil {
					return err
				}
				if saved, err = loadSavedCards(dir, runDir != ""); err != nil {
					return err
				}
			}
			now := time.Now()
			out := gpusOutput{Source: "live", Cards: []gpu.CardView{}}
			if saved != nil && saved.pid > 0 {
				out.fromRun(saved)
			} else {
				cards, err := readGPUs(c.Context(), settings)
				switch {
				case err == nil:
					out.Cards = cards
				case saved != nil:
					out.fromRun(saved) // the run's last view, rather than nothing
					out.LiveError = oneLine(err.Error())
				default:
					return fmt.Errorf("read GPUs: %w", err)
				}
			}
			if out.Cards == nil {
				out.Cards = []gpu.CardView{}
			}
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			out.write(c.OutOrStdout(), saved, now)
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	c.Flags().BoolVar(&live, "live", false, "read nvidia-smi now even when a scheduler runs")
	c.Flags().StringVar(&socket, "socket", "", "the daemon's socket")
	return c
}

// savedCards is a run's saved view of the cards.
type savedCards struct {
	dir     string
	pid     int // the scheduler that uses the run directory, 0 if none
	cards   []gpu.CardView
	at      time.Time
	unknown string
}

// loadSavedCards reads the view of the cards saved in the run in dir: nil
// if there is none (no run there, unless mustExist, or no view yet).
func loadSavedCards(dir string, mustExist bool) (*savedCards, error) {
	if _, err := os.Stat(filepath.Join(dir, gpusched.StateFile)); err != nil {
		if mustExist {
			return nil, fmt.Errorf("no run found in %s: %w", dir, errors.Unwrap(err))
		}
		return nil, nil
	}
	s := &savedCards{dir: dir, pid: schedulerPID(dir)}
	err := withState(dir, func(st *store.SQLite) (err error) {
		s.cards, s.at, s.unknown, _, err = loadCards(st)
		return err
	})
	if err != nil || (len(s.cards) == 0 && s.unknown == "") {
		return nil, err
	}
	return s, nil
}

// gpusOutput is what "gpusched gpus" shows; as JSON, its fields are a
// stable interface.
type gpusOutput struct {
	Source       string         `json:"source"` // "run" or "live"
	RunDir       string         `json:"run_dir,omitempty"`
	SchedulerPID *int           `json:"scheduler_pid,omitempty"`
	Updated      *time.Time     `json:"updated,omitempty"`
	LiveError    string         `json:"live_error,omitempty"`
	Unknown      string         `json:"unknown,omitempty"`
	Cards        []gpu.CardView `json:"cards"`
}

func (o *gpusOutput) fromRun(s *savedCards) {
	o.Source, o.RunDir, o.Cards, o.Unknown = "run", s.dir, s.cards, s.unknown
	if s.pid > 0 {
		pid := s.pid
		o.SchedulerPID = &pid
	}
	if !s.at.IsZero() {
		at := s.at
		o.Updated = &at
	}
}

// write prints the table, after a line that says where it comes from.
func (o *gpusOutput) write(w io.Writer, saved *savedCards, now time.Time) {
	cv := cardsView{cards: o.Cards, unknown: o.Unknown}
	switch {
	case o.Source == "live":
		fmt.Fprintf(w, "live reading of nvidia-smi at %s (no task of ours counted)\n", now.Format(time.TimeOnly))
		if saved != nil {
			fmt.Fprintf(w, "no scheduler runs on %s; its last view, of %s (%s ago), is in gpusched status\n",
				saved.dir, saved.at.Local().Format(time.TimeOnly), clock(now.Sub(saved.at)))
		}
	case o.SchedulerPID != nil:
		fmt.Fprintf(w, "run %s, as its scheduler (pid %d) sees them\n", o.RunDir, *o.SchedulerPID)
		cv.at, cv.saved, cv.running = saved.at, true, true
	default:
		fmt.Fprintf(w, "run %s: no scheduler runs on it, and nvidia-smi cannot be read now (%s)\n", o.RunDir, o.LiveError)
		cv.at, cv.saved = saved.at, true
	}
	writeCards(w, cv, now)
}

// readGPUs reads the cards now, as a run with settings s would see them,
// in the form the rest of the command shows (the run's saved view). The
// library's public view and the saved one share their JSON form, which
// carries one into the other.
func readGPUs(ctx context.Context, s gpusched.Scheduling) ([]gpu.CardView, error) {
	cards, err := gpusched.ReadGPUs(ctx, s)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cards)
	if err != nil {
		return nil, err
	}
	var out []gpu.CardView
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("read GPUs: %w", err)
	}
	return out, nil
}
