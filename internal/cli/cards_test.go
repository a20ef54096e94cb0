package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// An attempt on several cards is shown with all of them, in the order
// chosen: the status table's column, the run's line, --events' "cards";
// one on a single card as before.
func TestAttemptOnSeveralCardsIsShown(t *testing.T) {
	two, one := 3, 2
	several := gpusched.Attempt{Number: 1, Start: time.Unix(1, 0), GPU: &two, GPUs: []int{3, 1}, MemRequestedMiB: 20000}
	single := gpusched.Attempt{Number: 1, Start: time.Unix(1, 0), GPU: &one, MemRequestedMiB: 500}
	if got := gpuList(several.GPU, several.GPUs); got != "3,1" {
		t.Errorf("gpu column %q, want 3,1", got)
	}
	if got := gpuList(single.GPU, single.GPUs); got != "2" {
		t.Errorf("gpu column %q, want 2", got)
	}
	if got := gpuList(nil, nil); got != "-" {
		t.Errorf("gpu column %q, want -", got)
	}
	line := eventLine(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "train", Attempt: several})
	if !strings.Contains(line, "(attempt 1, cards 3,1, 20000 MiB each)") {
		t.Errorf("run output %q", line)
	}
	if line := eventLine(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "t", Attempt: single}); !strings.Contains(line, "card 2, 500 MiB") {
		t.Errorf("run output %q", line)
	}
	lines := eventJSONLines(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "train", Attempt: several})
	if len(lines) != 1 || *lines[0].Card != 3 || !slices.Equal(lines[0].Cards, []int{3, 1}) {
		t.Errorf("--events lines %+v, want card 3, cards [3 1]", lines)
	}
	if lines := eventJSONLines(gpusched.Event{Kind: gpusched.EventStarted, TaskID: "t", Attempt: single}); lines[0].Cards != nil {
		t.Errorf("--events of a one-card attempt has cards %v", lines[0].Cards)
	}
}
