package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/metrics"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("content type %q, want the text format", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCountersFromEvents(t *testing.T) {
	m := metrics.New(func() metrics.Snapshot { return metrics.Snapshot{} })
	card := 0
	oom := "CUDA out of memory (peak seen 9000 MiB): its request grows from 8000 to 12000 MiB"
	for _, e := range []struct {
		ev   gpusched.Event
		user string
	}{
		{gpusched.Event{Kind: gpusched.EventStarted, TaskID: "1", Attempt: gpusched.Attempt{Number: 1, GPU: &card}}, "alice"},
		{gpusched.Event{Kind: gpusched.EventStarted, TaskID: "2", Attempt: gpusched.Attempt{Number: 1}}, "bob"},
		{gpusched.Event{Kind: gpusched.EventStarted, TaskID: "3", Attempt: gpusched.Attempt{Number: 1}}, "bob"},
		{gpusched.Event{Kind: gpusched.EventRetrying, TaskID: "1", Attempt: gpusched.Attempt{Number: 1, EndReason: "exited", Error: oom}}, "alice"},
		{gpusched.Event{Kind: gpusched.EventComplete, TaskID: "2", Attempt: gpusched.Attempt{Number: 1, EndReason: "exited"}}, "bob"},
		{gpusched.Event{Kind: gpusched.EventFailed, TaskID: "3", Attempt: gpusched.Attempt{Number: 1, EndReason: "timed-out"}}, "bob"},
		{gpusched.Event{Kind: gpusched.EventBlocked, TaskID: "4", BlockedBy: "3"}, "bob"},
	} {
		m.Observe(e.ev, e.user)
	}
	out := scrape(t, m)
	for _, want := range []string{
		`gpusched_admissions_total{resource="gpu",user="alice"} 1`,
		`gpusched_admissions_total{resource="cpu",user="bob"} 2`,
		`gpusched_attempts_ended_total{reason="exited"} 2`,
		`gpusched_attempts_ended_total{reason="timed-out"} 1`,
		`gpusched_oom_retries_total{user="alice"} 1`,
		`gpusched_tasks_finished_total{state="complete",user="bob"} 1`,
		`gpusched_tasks_finished_total{state="failed",user="bob"} 1`,
		`gpusched_tasks_finished_total{state="blocked",user="bob"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(out, `gpusched_oom_retries_total{user="bob"}`) {
		t.Error("a timeout counted as an out-of-memory retry")
	}
}

func TestGaugesFromSnapshot(t *testing.T) {
	calls := 0
	m := metrics.New(func() metrics.Snapshot {
		calls++
		return metrics.Snapshot{
			Tasks:   []metrics.TaskCount{{User: "alice", State: "running", N: 2}, {User: "bob", State: "pending", N: 5}},
			Waiting: map[string]int{"gpu-fit": 3, "slot": 2},
			Cards: []gpusched.CardView{{Index: 1, UUID: "GPU-x", TotalMiB: 81920, UsedMiB: 30000, ForeignMiB: 1000,
				ChargedMiB: 28000, State: gpusched.CardQuarantined}},
			EventsPending: 4,
		}
	})
	out := scrape(t, m)
	for _, want := range []string{
		`gpusched_tasks{state="running",user="alice"} 2`,
		`gpusched_tasks{state="pending",user="bob"} 5`,
		`gpusched_tasks_waiting{reason="gpu-fit"} 3`,
		`gpusched_card_total_mib{card="1",uuid="GPU-x"} 81920`,
		`gpusched_card_used_mib{card="1",uuid="GPU-x"} 30000`,
		`gpusched_card_foreign_mib{card="1",uuid="GPU-x"} 1000`,
		`gpusched_card_charged_mib{card="1",uuid="GPU-x"} 28000`,
		`gpusched_card_state{card="1",state="quarantined",uuid="GPU-x"} 1`,
		`gpusched_card_state{card="1",state="ok",uuid="GPU-x"} 0`,
		`gpusched_completion_events_pending 4`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if calls != 1 {
		t.Errorf("one scrape read %d snapshots, want 1", calls)
	}
}
