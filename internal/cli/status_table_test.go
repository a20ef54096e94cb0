package cli

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// A card's state: a cooldown or quarantine over by now says when it ended;
// in the view of a run that has ended, one that was on says "was", and a
// reservation is not shown (no scheduler keeps them).
func TestCardState(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 16, 50, 0, time.Local)
	cooling := gpu.CardView{State: gpu.CardCooling, Reason: "a task just left it", Until: now.Add(-2 * time.Minute)}
	quarantined := gpu.CardView{State: gpu.CardQuarantined, Reason: "2 failed attempts in a row", Until: now.Add(8 * time.Minute)}
	reserved := gpu.CardView{State: gpu.CardOK, ReservedFor: "train"}
	for _, c := range []struct {
		name string
		card gpu.CardView
		past bool
		want string
	}{
		{"cooling, over", cooling, false, "cooling down: a task just left it (ended 10:14:50)"},
		{"cooling, run ended", cooling, true, "was cooling down: a task just left it (ended 10:14:50)"},
		{"quarantined", quarantined, false, "quarantined: 2 failed attempts in a row (until 10:24:50)"},
		{"quarantined, run ended", quarantined, true, "was quarantined: 2 failed attempts in a row (until 10:24:50)"},
		{"reserved", reserved, false, "ok, reserved for train"},
		{"reserved, run ended", reserved, true, "ok"},
		{"unknown", gpu.CardView{State: gpu.CardUnknown, Reason: "memory [N/A]"}, true, "unknown: memory [N/A]"},
	} {
		if got := cardState(c.card, now, c.past); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The cards' heading says how old a saved view is, and that the run has
// ended when no scheduler runs.
func TestWriteCardsAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 16, 50, 0, time.Local)
	at := now.Add(-2*time.Minute - 2*time.Second)
	cards := []gpu.CardView{{Index: 0, Name: "NVIDIA H100", TotalMiB: 81559, State: gpu.CardCooling, Reason: "a task just left it", Until: at.Add(time.Second)}}
	for _, c := range []struct {
		cv   cardsView
		want string
	}{
		{cardsView{cards: cards, at: at, saved: true, running: true},
			"cards as of 10:14:48, 2m02s ago (MiB):\n"},
		{cardsView{cards: cards, at: at, saved: true},
			"cards as of 10:14:48, 2m02s ago; the run has ended (MiB; \"gpusched gpus\" reads them now):\n"},
	} {
		var b strings.Builder
		writeCards(&b, c.cv, now)
		if !strings.HasPrefix(b.String(), c.want) {
			t.Errorf("heading:\n%s\nwant it to start with:\n%s", b.String(), c.want)
		}
		state := "cooling down: a task just left it (ended 10:14:49)"
		if !c.cv.running {
			state = "was " + state
		}
		if !strings.Contains(b.String(), "  "+state+"  ") {
			t.Errorf("card 0's state is not %q:\n%s", state, b.String())
		}
	}
}

// A task's pending event is named by its kind in the table.
func TestEventNote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		evs  []store.EventWrite
		want string
	}{
		{nil, ""},
		{[]store.EventWrite{{Kind: store.EventComplete}}, "completion event pending"},
		{[]store.EventWrite{{Kind: store.EventComplete, Tries: 2, LastError: "on_complete exit code 1"}}, "completion handler failed 2 time(s): on_complete exit code 1"},
		{[]store.EventWrite{{Kind: store.EventComplete}, {Kind: store.EventFailure, Tries: 1, LastError: "on_failure exit code 3"}}, "failure handler failed 1 time(s): on_failure exit code 3"},
		{[]store.EventWrite{{Kind: store.EventWebhook}}, "webhook event pending"},
	} {
		if got := eventNote(c.evs); got != c.want {
			t.Errorf("eventNote(%+v) = %q, want %q", c.evs, got, c.want)
		}
	}
}

// A task whose budget is learned from history says, while it waits or
// runs, what was chosen and why, after the engine's reason; a finished
// one, or one with a fixed budget, does not.
func TestStatusNotesAutoBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 1, 10, 16, 50, 0, time.Local)
	auto := gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryAuto: true, MemoryMiB: 6400,
		Budget: &gpusched.MemoryBudget{Source: gpusched.BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 1}}
	specs := map[string]specView{
		"waits": {Resources: auto},
		"runs":  {Resources: auto},
		"done":  {Resources: auto},
		"fixed": {Resources: gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 6400}},
	}
	v := &runView{pid: 4242} // a scheduler runs: the reasons saved stand
	const why = "memory_mib auto: 6400 MiB (peak 5800 MiB in 3 attempts + margin)"
	started := []task.Attempt{{Number: 1, Start: now.Add(-time.Minute)}}
	for _, c := range []struct {
		row  store.Row
		want string
	}{
		{store.Row{Record: task.Record{ID: "waits", State: task.Pending,
			Waiting: task.WaitReason{Kind: task.WaitGPUMemory, Detail: "needs 6400 MiB; best card 0 has 2000 MiB left"}}},
			"needs 6400 MiB; best card 0 has 2000 MiB left; " + why},
		{store.Row{Record: task.Record{ID: "runs", State: task.Running, Attempts: started}}, why},
		{store.Row{Record: task.Record{ID: "done", State: task.Complete, Attempts: started}}, ""},
		{store.Row{Record: task.Record{ID: "fixed", State: task.Pending, Waiting: task.WaitReason{Kind: task.WaitSlot}}}, "waiting for a free slot"},
	} {
		sp := specs[c.row.ID]
		row := taskRow(v, c.row, &sp, now)
		if got := row[len(row)-1]; got != c.want {
			t.Errorf("%s: note %q, want %q", c.row.ID, got, c.want)
		}
	}
}

// status has the garbage collector run less often, unless $GOGC says how
// often it should.
func TestCollectLessKeepsGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	t.Setenv("GOGC", "100")
	collectLess()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=100: GC percent %d, want 100", got)
	}
	os.Unsetenv("GOGC") // t.Setenv puts it back
	collectLess()
	if got := debug.SetGCPercent(100); got != lessGCPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, lessGCPercent)
	}
}
