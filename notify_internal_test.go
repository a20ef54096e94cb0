package gpusched

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Which transitions ask for which outbox events, and what those carry.
func TestNotices(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	code := 3
	failedRec := &task.Record{ID: "bad", State: task.Failed, Error: "exit code 3", ExitCode: &code,
		Attempts: []task.Attempt{{Number: 1}, {Number: 2, ExitCode: &code, LogPath: "/r/logs/bad/attempt-2.log"}}}
	withCmd := &task.Spec{ID: "bad", Kind: task.DefaultKind, OnFailure: []string{"notify"}}
	without := &task.Spec{ID: "bad", Kind: task.DefaultKind}
	failed := engine.Event{Kind: engine.Failed, TaskID: "bad", Time: at}
	quarantined := engine.Event{Kind: engine.CardQuarantined, Card: 1, Error: "3 failed attempts in a row (until 05:16:07)", Time: at}

	s := &Scheduler{runDir: "/r", handlers: map[string]Handler{task.DefaultKind: CommandHandler{}}}
	hooked := &Scheduler{runDir: "/r", handlers: s.handlers, settings: Scheduling{Webhook: "https://h.example/hook"}}
	tests := []struct {
		name  string
		s     *Scheduler
		ev    engine.Event
		spec  *task.Spec
		kinds []string
	}{
		{"failed, on_failure", s, failed, withCmd, []string{store.EventFailure}},
		{"failed, nothing to run", s, failed, without, nil},
		{"failed, webhook", hooked, failed, without, []string{store.EventWebhook}},
		{"failed, both", hooked, failed, withCmd, []string{store.EventFailure, store.EventWebhook}},
		{"card quarantined, webhook", hooked, quarantined, nil, []string{store.EventWebhook}},
		{"card quarantined, no webhook", s, quarantined, nil, nil},
		{"completed", hooked, engine.Event{Kind: engine.Completed, TaskID: "bad"}, withCmd, nil},
		{"blocked", hooked, engine.Event{Kind: engine.TaskBlocked, TaskID: "bad"}, withCmd, nil},
		{"cancelled", hooked, engine.Event{Kind: engine.TaskCancelled, TaskID: "bad"}, withCmd, nil},
	}
	for _, tt := range tests {
		var kinds []string
		got := tt.s.notices(tt.ev, tt.spec, failedRec)
		for _, n := range got {
			kinds = append(kinds, n.Kind)
		}
		if !slices.Equal(kinds, tt.kinds) {
			t.Errorf("%s: notices %v, want %v", tt.name, kinds, tt.kinds)
		}
		for _, n := range got {
			switch n.Kind {
			case store.EventFailure:
				var f failurePayload
				if err := json.Unmarshal(n.Payload, &f); err != nil || f.Attempts != 2 || *f.ExitCode != 3 || f.Error != "exit code 3" ||
					f.AttemptLog != "/r/logs/bad/attempt-2.log" {
					t.Errorf("%s: failure payload %s", tt.name, n.Payload)
				}
			case store.EventWebhook:
				var p webhookPayload
				if err := json.Unmarshal(n.Payload, &p); err != nil || p.URL != "https://h.example/hook" || p.Body.RunDir != "/r" || !p.Body.Time.Equal(at) {
					t.Fatalf("%s: webhook payload %s", tt.name, n.Payload)
				}
				b := p.Body
				if tt.ev.Kind == engine.Failed {
					if b.Event != WebhookTaskFailed || b.Task != "bad" || *b.Attempts != 2 || *b.ExitCode != 3 || b.Card != nil || b.RunSummary != nil {
						t.Errorf("%s: body %+v", tt.name, b)
					}
				} else if tt.ev.Kind == engine.CardQuarantined {
					if b.Event != WebhookCardQuarantined || b.Card == nil || *b.Card != 1 || b.Error != tt.ev.Error || b.Task != "" || b.Attempts != nil {
						t.Errorf("%s: body %+v", tt.name, b)
					}
				} else {
					t.Errorf("%s: a webhook notice for a %s event", tt.name, tt.ev.Kind)
				}
			}
		}
	}
}

// A run's end asks for on_run_end's event and the webhook's, both with
// the summary; a run stopped before its end says so.
func TestRunEndNotices(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	end := engine.RunEnd{Started: start, Ended: start.Add(time.Minute), Stopped: errors.New("context canceled"),
		Records: []task.Record{{ID: "a", State: task.Complete}, {ID: "b", State: task.Failed}, {ID: "c", State: task.Pending}}}
	s := &Scheduler{runDir: "/r", settings: Scheduling{OnRunEnd: []string{"sh", "end.sh"}, OnRunEndDir: "/flows", Webhook: "http://h/x"}}
	got := s.runEnded(end)
	if len(got) != 2 || got[0].Kind != store.EventRunEnd || got[1].Kind != store.EventWebhook {
		t.Fatalf("notices = %+v", got)
	}
	var p runEndPayload
	if err := json.Unmarshal(got[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	sum := p.Summary
	want := map[string]int{"pending": 1, "running": 0, "complete": 1, "failed": 1, "blocked": 0, "cancelled": 0}
	if !slices.Equal(p.Args, []string{"sh", "end.sh"}) || p.Dir != "/flows" || sum.RunDir != "/r" || !sum.Interrupted ||
		sum.Reason != "context canceled" || sum.Total != 3 || !slices.Equal(sum.Failed, []string{"b"}) || len(sum.Counts) != len(want) {
		t.Errorf("run-end payload = %s", got[0].Payload)
	}
	for k, v := range want {
		if sum.Counts[k] != v {
			t.Errorf("counts[%s] = %d, want %d", k, sum.Counts[k], v)
		}
	}
	// The webhook's body has the summary's fields beside its own.
	var body map[string]any
	var wp struct {
		Body json.RawMessage `json:"body"`
	}
	if json.Unmarshal(got[1].Payload, &wp) != nil || json.Unmarshal(wp.Body, &body) != nil ||
		body["event"] != WebhookRunEnded || body["run_dir"] != "/r" || body["total"] != 3.0 || body["interrupted"] != true {
		t.Errorf("webhook body = %s", wp.Body)
	}
	if none := (&Scheduler{}).runEnded(end); none != nil {
		t.Errorf("without on_run_end or a webhook: %+v", none)
	}
}
