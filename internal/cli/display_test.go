package cli

// Unit tests of the run's displays and event formats, without a scheduler.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/vt"

	"github.com/gpusched/gpusched"
)

// frameCounter is a display's output that counts its writes (a renderer
// writes a frame at once) and can be made to block, as a terminal that
// nobody reads does.
type frameCounter struct {
	mu      sync.Mutex
	writes  int
	data    []byte
	gate    chan struct{} // when not nil, writes wait for it to close
	blocked chan struct{} // when not nil, closed when a write first waits at the gate
	once    sync.Once
}

func (w *frameCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	gate := w.gate
	w.mu.Unlock()
	if gate != nil {
		if w.blocked != nil {
			w.once.Do(func() { close(w.blocked) })
		}
		<-gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	w.data = append(w.data, p...)
	return len(p), nil
}

func (w *frameCounter) counts() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, string(w.data)
}

func pendingRecords(n int) []gpusched.Record {
	recs := make([]gpusched.Record, n)
	for i := range recs {
		recs[i] = gpusched.Record{ID: fmt.Sprintf("t%05d", i), State: gpusched.StatePending}
	}
	return recs
}

// events for task i: its attempt started, then ended (failed every 100th).
func taskEvents(i int, at time.Time) []gpusched.Event {
	id := fmt.Sprintf("t%05d", i)
	code := 0
	kind := gpusched.EventComplete
	if i%100 == 0 {
		code, kind = 1, gpusched.EventFailed
	}
	a := gpusched.Attempt{Number: 1, Start: at, LogPath: "/logs/" + id + "/attempt-1.log"}
	started := gpusched.Event{Time: at, Kind: gpusched.EventStarted, TaskID: id, Attempt: a}
	a.End, a.ExitCode = at.Add(time.Millisecond), &code
	if code != 0 {
		a.Error = "exit code 1"
	}
	return []gpusched.Event{started, {Time: a.End, Kind: kind, TaskID: id, Attempt: a}}
}

// However many events come, the terminal gets a frame (and the lines
// printed above it) per tick of the display's clock, not per event: 10,000
// events between 10 ticks make at most a few dozen writes. The last frame
// accounts for every task, and each failure is printed once above it.
func TestLiveDisplayThrottles(t *testing.T) {
	t.Parallel()
	const n, ticks = 5000, 10
	w := &frameCounter{}
	tick := make(chan time.Time)
	d := newLiveDisplay(w, t.TempDir(), n, tea.WithWindowSize(120, 30))
	d.ticks = tick
	d.begin(pendingRecords(n))
	for i := range n {
		for _, ev := range taskEvents(i, time.Now()) {
			d.observe(ev)
		}
		if i%(n/ticks) == n/ticks-1 {
			tick <- time.Now() // taken by the display's loop: one frame
		}
	}
	d.stop()
	writes, out := w.counts()
	// A frame and the lines above it per tick, the last frame at stop, and
	// a few writes to set up and give back the terminal.
	if limit := 2*(ticks+1) + 6; writes > limit {
		t.Errorf("%d writes to the terminal for %d events and %d ticks, want at most %d", writes, 2*n, ticks, limit)
	}
	e := vt.NewEmulator(120, 30)
	e.WriteString(strings.ReplaceAll(out, "\n", "\r\n")) // no tty here to map newlines
	var lines []string
	for _, l := range e.Scrollback().Lines() {
		lines = append(lines, strings.TrimRight(l.String(), " "))
	}
	for _, l := range strings.Split(e.String(), "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	screen := strings.Join(lines, "\n")
	if !strings.Contains(screen, " 5000/5000 tasks  elapsed ") || !strings.Contains(screen, "complete 4950 · failed 50 · running 0 · waiting 0") {
		t.Errorf("final frame missing:\n%s", screen)
	}
	// Each failure is written once, above the display. (Counted in what
	// was written: when many lines come between two redraws the terminal
	// emulator here may scroll some out of its small scrollback.)
	for i := 0; i < n; i += 100 {
		if got := strings.Count(out, fmt.Sprintf(" failed    t%05d:", i)); got != 1 {
			t.Errorf("the failure of t%05d was written %d times, want once", i, got)
		}
	}
	if e.CursorHidden() {
		t.Error("cursor left hidden")
	}
}

// A terminal that takes nothing (a stalled ssh session, a suspended
// terminal emulator) never holds up the scheduler's observer.
func TestLiveDisplayNeverBlocksObserver(t *testing.T) {
	t.Parallel()
	w := &frameCounter{gate: make(chan struct{}), blocked: make(chan struct{})}
	d := newLiveDisplay(w, t.TempDir(), 1000, tea.WithWindowSize(100, 30))
	d.begin(pendingRecords(1000))
	<-w.blocked // the display is stuck writing
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			for _, ev := range taskEvents(i, time.Now()) {
				d.observe(ev)
			}
		}
		d.interrupted("gpusched: interrupt: stopping running tasks")
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatal("observe blocked while the terminal did not take output")
	}
	close(w.gate)
	d.stop()
	if _, out := w.counts(); !strings.Contains(out, "1000/1000 tasks") {
		t.Errorf("no final frame after the terminal came back:\n%q", out)
	}
}

// The plain line of each kind of event; card-quarantined is new, the
// others are as they always were.
func TestEventLine(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 5, 1, 8, 19, 56, 0, time.Local)
	code, card := 3, 0
	a := gpusched.Attempt{Number: 2, Start: at.Add(-1500 * time.Millisecond), End: at, ExitCode: &code, Error: "exit code 3", LogPath: "/r/logs/x/attempt-2.log"}
	for _, c := range []struct {
		ev   gpusched.Event
		want string
	}{
		{gpusched.Event{Kind: gpusched.EventStarted, TaskID: "x", Attempt: gpusched.Attempt{Number: 1, GPU: &card, MemRequestedMiB: 4096}, Rerun: "failed before"},
			"08:19:56 start     x (attempt 1, card 0, 4096 MiB; runs again: failed before)"},
		{gpusched.Event{Kind: gpusched.EventComplete, TaskID: "x", Attempt: a}, "08:19:56 complete  x (attempt 2, 1.5s)"},
		{gpusched.Event{Kind: gpusched.EventRetrying, TaskID: "x", Attempt: a}, "08:19:56 retry     x: attempt 2 exit code 3; log /r/logs/x/attempt-2.log"},
		{gpusched.Event{Kind: gpusched.EventFailed, TaskID: "x", Attempt: a}, "08:19:56 failed    x: attempt 2 exit code 3; log /r/logs/x/attempt-2.log"},
		{gpusched.Event{Kind: gpusched.EventFailed, TaskID: "x", Error: "needs 90000 MiB"}, "08:19:56 failed    x: needs 90000 MiB"},
		{gpusched.Event{Kind: gpusched.EventBlocked, TaskID: "y", BlockedBy: "x"}, "08:19:56 blocked   y (by x)"},
		{gpusched.Event{Kind: gpusched.EventBlocked, TaskID: "clean", BlockedBy: "x", NotNeeded: true}, "08:19:56 skipped   clean (not needed: x completed)"},
		{gpusched.Event{Kind: gpusched.EventCancelled, TaskID: "x"}, "08:19:56 cancelled x"},
		{gpusched.Event{Kind: gpusched.EventDeliveryFailed, TaskID: "x", Error: "event 3, try 1: exit status 1"},
			"08:19:56 event     x: completion handler failed, will retry: event 3, try 1: exit status 1"},
		{gpusched.Event{Kind: gpusched.EventDeliveryFailed, Notification: "run-end", Error: "run-end event 5, try 1: on_run_end: exit code 1"},
			"08:19:56 event     run: on_run_end failed, will retry: run-end event 5, try 1: on_run_end: exit code 1"},
		{gpusched.Event{Kind: gpusched.EventDeliveryFailed, TaskID: "x", Notification: "webhook", GaveUp: true, Error: "webhook event 4, try 10: answered 500; given up after 10 tries"},
			"08:19:56 event     x: webhook failed, given up: webhook event 4, try 10: answered 500; given up after 10 tries"},
		{gpusched.Event{Kind: gpusched.EventCardQuarantined, Card: 1, Error: "3 failed attempts in a row (until 08:29:56)"},
			"08:19:56 gpu       card 1 quarantined: 3 failed attempts in a row (until 08:29:56)"},
	} {
		c.ev.Time = at
		if got := eventLine(c.ev); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.ev.Kind, got, c.want)
		}
	}
}

// The JSON lines of --events: stable names, fields left out when they do
// not apply, attempt-ended before what became of the task.
func TestEventJSONLines(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 5, 1, 8, 19, 56, 0, time.UTC)
	code, card := 0, 1
	a := gpusched.Attempt{Number: 1, Start: at.Add(-1500 * time.Millisecond), End: at, ExitCode: &code, LogPath: "/l/a.log", GPU: &card, MemRequestedMiB: 2048}
	killed := gpusched.Attempt{Number: 2, Start: at.Add(-time.Second), End: at, Signal: "SIGKILL", Error: "killed by SIGKILL", LogPath: "/l/b.log"}
	for _, c := range []struct {
		ev   gpusched.Event
		want []string
	}{
		{gpusched.Event{Kind: gpusched.EventStarted, TaskID: "a", Attempt: gpusched.Attempt{Number: 1, Start: at, LogPath: "/l/a.log", GPU: &card, MemRequestedMiB: 2048}},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"started","task":"a","attempt":1,"card":1,"memory_mib":2048,"log":"/l/a.log"}`}},
		{gpusched.Event{Kind: gpusched.EventComplete, TaskID: "a", Attempt: a}, []string{
			`{"time":"2025-05-01T08:19:56Z","event":"attempt-ended","task":"a","attempt":1,"card":1,"exit_code":0,"log":"/l/a.log","duration_s":1.5}`,
			`{"time":"2025-05-01T08:19:56Z","event":"complete","task":"a","attempt":1}`}},
		{gpusched.Event{Kind: gpusched.EventFailed, TaskID: "b", Attempt: killed}, []string{
			`{"time":"2025-05-01T08:19:56Z","event":"attempt-ended","task":"b","attempt":2,"signal":"SIGKILL","error":"killed by SIGKILL","log":"/l/b.log","duration_s":1}`,
			`{"time":"2025-05-01T08:19:56Z","event":"failed","task":"b","attempt":2,"error":"killed by SIGKILL","log":"/l/b.log"}`}},
		{gpusched.Event{Kind: gpusched.EventRetrying, TaskID: "b", Attempt: killed}, []string{
			`{"time":"2025-05-01T08:19:56Z","event":"attempt-ended","task":"b","attempt":2,"signal":"SIGKILL","error":"killed by SIGKILL","log":"/l/b.log","duration_s":1}`,
			`{"time":"2025-05-01T08:19:56Z","event":"retrying","task":"b","attempt":2,"error":"killed by SIGKILL"}`}},
		{gpusched.Event{Kind: gpusched.EventFailed, TaskID: "c", Error: "GPU state unknown for 10m"},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"failed","task":"c","error":"GPU state unknown for 10m"}`}},
		{gpusched.Event{Kind: gpusched.EventBlocked, TaskID: "d", BlockedBy: "b", Error: `blocked: dependency "b" failed`},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"blocked","task":"d","error":"blocked: dependency \"b\" failed","blocked_by":"b"}`}},
		{gpusched.Event{Kind: gpusched.EventBlocked, TaskID: "clean", BlockedBy: "b", NotNeeded: true, Error: "not needed"},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"blocked","task":"clean","error":"not needed","blocked_by":"b","not_needed":true}`}},
		{gpusched.Event{Kind: gpusched.EventCancelled, TaskID: "e"},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"cancelled","task":"e"}`}},
		{gpusched.Event{Kind: gpusched.EventDeliveryFailed, TaskID: "a", Error: "event 1, try 2: exit status 1"},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"event-failed","task":"a","error":"event 1, try 2: exit status 1"}`}},
		{gpusched.Event{Kind: gpusched.EventCardQuarantined, Card: 0, Error: "2 failed attempts in a row (until 08:29:56)"},
			[]string{`{"time":"2025-05-01T08:19:56Z","event":"card-quarantined","card":0,"error":"2 failed attempts in a row (until 08:29:56)"}`}},
	} {
		c.ev.Time = at
		var got []string
		for _, l := range eventJSONLines(c.ev) {
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(b))
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", c.ev.Kind, strings.Join(got, "\n     "), strings.Join(c.want, "\n     "))
		}
	}
}

// The summary's log tail: the last lines, printable.
func TestLogTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	b.WriteString("epoch 1  10%\repoch 1  50%\repoch 1 100%\n\x1b[31mred\x1b[0m\tand a tab\x07\n")
	b.WriteString(strings.Repeat("x", 400) + "\n\n")
	path := filepath.Join(dir, "attempt-1.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := logTail(path, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"line 10", "line 11", "line 12", "epoch 1 100%", "red and a tab?", strings.Repeat("x", 300) + "…"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("logTail:\n got %q\nwant %q", got, want)
	}
	// A log bigger than what is read: the cut line is left out.
	big := strings.Repeat(strings.Repeat("y", 99)+"\n", 2000) + "last\n"
	if err := os.WriteFile(path, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := logTail(path, 1000); len(got) == 0 || len(got[0]) != 99 || got[len(got)-1] != "last" {
		t.Errorf("logTail of a big log: %d lines, first %q", len(got), got[0])
	}
	if got, err := logTail(filepath.Join(dir, "empty.log"), 10); err == nil || got != nil {
		t.Errorf("logTail of a missing file: %q, %v", got, err)
	}
}
