package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// eventLine is one line of --events, decoded.
type eventLine struct {
	Time      time.Time `json:"time"`
	Event     string    `json:"event"`
	Task      string    `json:"task"`
	Attempt   int       `json:"attempt"`
	Card      *int      `json:"card"`
	MemoryMiB int64     `json:"memory_mib"`
	ExitCode  *int      `json:"exit_code"`
	Signal    string    `json:"signal"`
	Error     string    `json:"error"`
	BlockedBy string    `json:"blocked_by"`
	Log       string    `json:"log"`
	Rerun     string    `json:"rerun"`
	Duration  *float64  `json:"duration_s"`
}

var eventKeys = []string{"time", "event", "task", "attempt", "card", "memory_mib", "exit_code", "signal", "error",
	"blocked_by", "log", "rerun", "duration_s", "retry_at"}

// parseEvents decodes --events output: every line a JSON object with known
// keys, "time" and "event" always there, times in order.
func parseEvents(t *testing.T, out string) []eventLine {
	t.Helper()
	if out == "" || !strings.HasSuffix(out, "\n") {
		t.Fatalf("events output is empty or does not end with a newline: %q", out)
	}
	var evs []eventLine
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("events line is not a JSON object: %v\n%s", err, line)
		}
		for k := range raw {
			if !slices.Contains(eventKeys, k) {
				t.Errorf("events line has an undocumented key %q: %s", k, line)
			}
		}
		var ev eventLine
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events line: %v\n%s", err, line)
		}
		if ev.Time.IsZero() || ev.Event == "" {
			t.Errorf("events line without time or event: %s", line)
		}
		if n := len(evs); n > 0 && ev.Time.Before(evs[n-1].Time) {
			t.Errorf("events out of order: %s after %s", line, evs[n-1].Time)
		}
		evs = append(evs, ev)
	}
	return evs
}

// lifecycle returns each task's events as "event/attempt", in order.
func lifecycle(evs []eventLine) map[string][]string {
	out := map[string][]string{}
	for _, ev := range evs {
		if ev.Task != "" {
			out[ev.Task] = append(out[ev.Task], fmt.Sprintf("%s/%d", ev.Event, ev.Attempt))
		}
	}
	return out
}

func findEvent(t *testing.T, evs []eventLine, task, event string, attempt int) eventLine {
	t.Helper()
	for _, ev := range evs {
		if ev.Task == task && ev.Event == event && ev.Attempt == attempt {
			return ev
		}
	}
	t.Fatalf("no %s event of %s attempt %d", event, task, attempt)
	return eventLine{}
}

// --events FILE: a JSON line per event, written as they happen; every
// task's whole lifecycle, attempt by attempt, started before ended. Then
// --events - on a second run: JSON alone on stdout, the plain human output
// on stderr.
func TestEventsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "events.yaml"), `
scheduling:
  max_parallel_tasks: 4
tasks:
  - id: ok
    args: `+sleeper("-print", "fine")+`
  - id: flaky
    retries: 1
    args: `+sh(`[ "$GPUSCHED_ATTEMPT" -ge 2 ]`)+`
  - id: bad
    args: `+sleeper("-exit", "3")+`
  - id: child
    dependencies: [bad]
    args: `+sleeper()+`
  - id: killed
    args: `+sh(`kill -9 $$`)+`
  - id: slow
    dependencies: [ok]
    args: `+sleeper("-sleep", "1s")+`
`)
	file := filepath.Join(dir, "events.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, "", "run", wf, "--events", file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Each line is written when it happens: slow's start is in the file
	// while slow runs.
	waitFor(t, 10*time.Second, "slow's start in the events file", func() bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(string(b), `"event":"started","task":"slow"`)
	})
	select {
	case <-exited:
		t.Fatal("gpusched exited before the test saw slow's start in the events file")
	default:
	}
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("run: %v, want exit code 1\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "start     slow (attempt 1)") {
		t.Errorf("the human output is not on stdout:\n%s", out.String())
	}

	evs := parseEvents(t, readFile(t, file))
	want := map[string][]string{
		"ok":     {"started/1", "attempt-ended/1", "complete/1"},
		"flaky":  {"started/1", "attempt-ended/1", "retrying/1", "started/2", "attempt-ended/2", "complete/2"},
		"bad":    {"started/1", "attempt-ended/1", "failed/1"},
		"child":  {"blocked/0"},
		"killed": {"started/1", "attempt-ended/1", "failed/1"},
		"slow":   {"started/1", "attempt-ended/1", "complete/1"},
	}
	got := lifecycle(evs)
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("task %s: events %v, want %v", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("events for tasks %v", got)
	}
	for _, ev := range evs {
		if ev.Event == "started" && (!exists(ev.Log) || filepath.Base(ev.Log) != fmt.Sprintf("%s.attempt-%d.log", ev.Task, ev.Attempt)) {
			t.Errorf("started event of %s attempt %d: log %q", ev.Task, ev.Attempt, ev.Log)
		}
		if ev.Event == "started" && (ev.Card != nil || ev.MemoryMiB != 0) {
			t.Errorf("CPU task %s started with card %v, memory %d", ev.Task, ev.Card, ev.MemoryMiB)
		}
		if ev.Event == "attempt-ended" && (ev.Duration == nil || *ev.Duration < 0) {
			t.Errorf("attempt-ended of %s without a duration", ev.Task)
		}
	}
	if ev := findEvent(t, evs, "bad", "attempt-ended", 1); intp(ev.ExitCode) != "3" || ev.Error != "exit code 3" || ev.Signal != "" {
		t.Errorf("bad's attempt ended with exit_code %s, signal %q, error %q", intp(ev.ExitCode), ev.Signal, ev.Error)
	}
	if ev := findEvent(t, evs, "bad", "failed", 1); ev.Error != "exit code 3" || !strings.HasSuffix(ev.Log, "/logs/bad.attempt-1.log") {
		t.Errorf("bad failed with error %q, log %q", ev.Error, ev.Log)
	}
	if ev := findEvent(t, evs, "killed", "attempt-ended", 1); ev.ExitCode != nil || ev.Signal != "SIGKILL" {
		t.Errorf("killed's attempt ended with exit_code %s, signal %q", intp(ev.ExitCode), ev.Signal)
	}
	if ev := findEvent(t, evs, "flaky", "retrying", 1); ev.Error != "exit code 1" {
		t.Errorf("flaky retrying with error %q", ev.Error)
	}
	if ev := findEvent(t, evs, "flaky", "attempt-ended", 2); intp(ev.ExitCode) != "0" {
		t.Errorf("flaky's second attempt ended with exit_code %s", intp(ev.ExitCode))
	}
	if ev := findEvent(t, evs, "child", "blocked", 0); ev.BlockedBy != "bad" {
		t.Errorf("child blocked by %q", ev.BlockedBy)
	}

	// Again, to stdout: failed, blocked and killed run again, with why.
	r := gs(t, "", "run", wf, "--events", "-")
	r.want(t, 1)
	evs = parseEvents(t, r.stdout)
	if ev := findEvent(t, evs, "bad", "started", 2); ev.Rerun != "was failed" {
		t.Errorf("bad's second run: rerun %q, want \"was failed\"", ev.Rerun)
	}
	got = lifecycle(evs)
	if _, ok := got["ok"]; ok {
		t.Errorf("ok was kept, yet has events: %v", got["ok"])
	}
	if strings.ContainsRune(r.stderr, '\x1b') || !strings.Contains(r.stderr, "start     bad (attempt 2; runs again: was failed)") ||
		!strings.Contains(r.stderr, "6 tasks in ") {
		t.Errorf("stderr does not have the plain human output:\n%s", r.stderr)
	}
}

// --events into a folder that does not exist: invalid, nothing runs.
func TestEventsFileInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    args: "+sleeper()+"\n")
	r := gs(t, "", "run", wf, "--events", filepath.Join(dir, "no", "such", "dir", "ev.jsonl"))
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "--events") {
		t.Errorf("error %q does not name --events", msg)
	}
	if exists(filepath.Join(dir, ".gpusched")) {
		t.Error("a run directory was created")
	}
}
