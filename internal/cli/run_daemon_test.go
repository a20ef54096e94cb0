package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// recordingDisplay is a runDisplay that keeps what it is given.
type recordingDisplay struct{ events []gpusched.Event }

func (d *recordingDisplay) observe(ev gpusched.Event) { d.events = append(d.events, ev) }
func (d *recordingDisplay) begin([]gpusched.Record)   {}
func (d *recordingDisplay) interrupted(string)        {}
func (d *recordingDisplay) stop()                     {}

// The follower passes on the events of its run (those that came before
// the run was known too) and of the GPUs, with the attempt's start and
// request, and drops other runs' events.
func TestDaemonFollower(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	card, code := 1, 3
	f := newDaemonFollower(nil, []client.Task{{ID: "a", GPUMiB: 500}, {ID: "b"}})
	f.take(client.Event{Time: t0, Kind: "started", Task: "7/a", Attempt: 1, GPU: &card})
	f.take(client.Event{Time: t0, Kind: "started", Task: "6/a", Attempt: 1})
	d := &recordingDisplay{}
	f.follow("7", d)
	f.take(client.Event{Time: t0.Add(2 * time.Second), Kind: "failed", Task: "7/a", Attempt: 1, ExitCode: &code, GPU: &card})
	f.take(client.Event{Time: t0, Kind: "blocked", Task: "7/b", BlockedBy: "7/a"})
	f.take(client.Event{Time: t0, Kind: "complete", Task: "70/a", Attempt: 1})
	f.take(client.Event{Time: t0, Kind: "gpu-unknown", Error: "nvidia-smi timed out"})
	f.take(client.Event{Time: t0, Kind: "some-new-kind", Task: "7/a"})

	var kinds []string
	for _, ev := range d.events {
		kinds = append(kinds, ev.Kind.String()+" "+ev.TaskID)
	}
	if got, want := strings.Join(kinds, ", "), "started 7/a, failed 7/a, blocked 7/b, gpu-unknown "; got != want {
		t.Fatalf("passed on: %s\nwant:       %s", got, want)
	}
	if a := d.events[0].Attempt; a.MemRequestedMiB != 500 || a.GPU == nil || *a.GPU != 1 {
		t.Errorf("started: %+v; want card 1, 500 MiB", a)
	}
	if a := d.events[1].Attempt; !a.Start.Equal(t0) || a.Error != "exit code 3" {
		t.Errorf("failed: start %v, error %q; want the start event's time and \"exit code 3\"", a.Start, a.Error)
	}
	if got, want := daemonEventLine(d.events[1]), "12:00:02 failed    7/a: attempt 1 exit code 3; gpusched logs 7/a"; got != want {
		t.Errorf("line %q\nwant %q", got, want)
	}
	if !f.ended["7/a"] || !f.ended["7/b"] || f.ended["70/a"] {
		t.Errorf("ended: %v; want 7/a and 7/b", f.ended)
	}
}

// A task on several cards reaches the display with all of them, and its
// line says so.
func TestDaemonFollowerTwoCards(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	first := 2
	f := newDaemonFollower(nil, []client.Task{{ID: "pair", GPUMiB: 500, GPUs: 2}})
	d := &recordingDisplay{}
	f.follow("7", d)
	f.take(client.Event{Time: t0, Kind: "started", Task: "7/pair", Attempt: 1, GPU: &first, GPUs: []int{2, 1}, GPUMiB: 500})
	if len(d.events) != 1 {
		t.Fatalf("passed on %d events, want 1", len(d.events))
	}
	if a := d.events[0].Attempt; !slices.Equal(a.GPUs, []int{2, 1}) || a.GPU == nil || *a.GPU != 2 {
		t.Errorf("started: gpu %v, gpus %v; want 2, [2 1]", a.GPU, a.GPUs)
	}
	if got := eventLine(d.events[0]); !strings.Contains(got, "cards 2,1, 500 MiB each") {
		t.Errorf("line %q does not name both cards", got)
	}
}
