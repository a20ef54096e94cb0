package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/gpu"
)

// daemonLogs prints a daemon's task's log, when a daemon answers; handled
// is false when none does and id may name a task of a run directory
// (a plain number). An id with a "/" cannot: it is the daemon's or none.
func daemonLogs(c *cobra.Command, socket, id string, attempt int, follow bool) (handled bool, err error) {
	cl, err := client.Dial(c.Context(), socket)
	if err != nil {
		if errors.Is(err, client.ErrNoDaemon) && !strings.Contains(id, "/") && socket == "" {
			return false, nil
		}
		return true, daemonError(err)
	}
	defer cl.Close()
	if attempt < 0 {
		return true, inputf("--attempt must be at least 1, got %d", attempt)
	}
	_, err = cl.Logs(c.Context(), id, client.LogOptions{Attempt: attempt, Follow: follow}, c.OutOrStdout())
	if err != nil {
		return true, refusal(fmt.Errorf("logs %s: %w", id, err))
	}
	return true, nil
}

// daemonGPUs prints a daemon's ledger, when a daemon answers; handled is
// false when none does (and no --socket named one).
func daemonGPUs(c *cobra.Command, socket string, asJSON bool) (handled bool, err error) {
	cl, err := client.Dial(c.Context(), socket)
	if err != nil {
		if errors.Is(err, client.ErrNoDaemon) && socket == "" {
			return false, nil
		}
		return true, daemonError(err)
	}
	defer cl.Close()
	g, err := cl.GPUs(c.Context())
	if err != nil {
		return true, fmt.Errorf("gpus: %w", err)
	}
	w := c.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(g)
	}
	var cards []gpu.CardView
	b, _ := json.Marshal(g.Cards) // the same JSON form
	if err := json.Unmarshal(b, &cards); err != nil {
		return true, fmt.Errorf("gpus: %w", err)
	}
	d := cl.Daemon()
	switch g.Source {
	case "daemon":
		fmt.Fprintf(w, "daemon (pid %d) on %s, as its admission sees them\n", d.PID, cl.Socket())
	case "live":
		fmt.Fprintf(w, "live reading of nvidia-smi by the daemon (pid %d) on %s, which has run no GPU task yet\n", d.PID, cl.Socket())
	default:
		return true, fmt.Errorf("gpus: the daemon (pid %d) on %s cannot read the GPUs: %s", d.PID, cl.Socket(), g.Error)
	}
	now := time.Now()
	writeCards(w, cardsView{cards: cards, at: now, running: true}, now)
	return true, nil
}
