package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
)

func newGPUsCmd() *cobra.Command {
	var runDir string
	var asJSON, live bool
	c := &cobra.Command{
		Use:   "gpus [WORKFLOW] [--run-dir DIR] [--json] [--live]",
		Short: "Show the GPUs as gpusched sees them",
		Long: `Show each card: total, used, foreign (held by processes that are not ours),
charged (to our running tasks), available for new tasks, the tasks on it,
and its state (ok, cooling down, quarantined, unknown, hidden).

With a run (--run-dir, or a workflow for its default run directory) whose
state database has a view of the cards, that view is shown: it is what the
run's scheduler decided with, saved at each reading. Otherwise, or with
--live, nvidia-smi is run now (with the workflow's GPU settings, if one is
given) and nothing of ours is counted as running.`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			wf := ""
			var settings gpusched.Scheduling
			if len(args) == 1 {
				wf = args[0]
				w, err := loadWorkflow(wf)
				if err != nil {
					return err
				}
				settings = w.Scheduling
			}
			out := struct {
				Source  string         `json:"source"` // "run" or "live"
				RunDir  string         `json:"run_dir,omitempty"`
				Updated *time.Time     `json:"updated,omitempty"`
				Unknown string         `json:"unknown,omitempty"`
				Cards   []gpu.CardView `json:"cards"`
			}{Source: "live"}
			if !live && (runDir != "" || wf != "") {
				dir, err := runDirFor(runDir, wf)
				if err != nil {
					return err
				}
				if _, err := os.Stat(filepath.Join(dir, gpusched.StateFile)); err == nil {
					var cards []gpu.CardView
					var at time.Time
					var unknown string
					err := withState(dir, func(st *store.SQLite) (err error) {
						cards, at, unknown, err = loadCards(st)
						return err
					})
					if err != nil {
						return err
					}
					if len(cards) > 0 || unknown != "" {
						out.Source, out.RunDir, out.Cards, out.Unknown = "run", dir, cards, unknown
						if !at.IsZero() {
							out.Updated = &at
						}
					}
				} else if runDir != "" {
					return fmt.Errorf("no run found in %s: %w", dir, errors.Unwrap(err))
				}
			}
			if out.Source == "live" {
				cards, err := gpusched.ReadGPUs(c.Context(), settings)
				if err != nil {
					return fmt.Errorf("read GPUs: %w", err)
				}
				out.Cards = cards
			}
			if out.Cards == nil {
				out.Cards = []gpu.CardView{}
			}
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
				return nil
			}
			w := c.OutOrStdout()
			if out.Source == "live" {
				fmt.Fprintln(w, "live reading of nvidia-smi (no task of ours counted)")
			} else {
				fmt.Fprintf(w, "run %s\n", out.RunDir)
			}
			var at time.Time
			if out.Updated != nil {
				at = *out.Updated
			}
			writeCards(w, out.Cards, out.Unknown, at)
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	c.Flags().BoolVar(&live, "live", false, "read nvidia-smi now even when a run's view exists")
	return c
}
