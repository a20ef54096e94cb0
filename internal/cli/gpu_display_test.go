package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

// GPU tasks in the plain lines and in --events: the card and the memory of
// each start, and a card going into quarantine.
func TestGPUEventsAndQuarantineLine(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 40960), gpuCard(1, 24000)}})
	wf, _ := m.workflow(`
scheduling:
  max_parallel_tasks: 1
  gpu_quarantine_after: 2
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: fail1
    priority: 10
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms", "--exit", "1") + `
  - id: fail2
    priority: 10
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms", "--exit", "1") + `
  - id: later
    resources: {device: cuda, memory_mib: 1000}
    args: ` + m.job("--mem", "1000", "--duration", "50ms") + `
`)
	file := filepath.Join(m.dir, "gpusched-events.jsonl") // events.jsonl is the fake jobs' record
	r := gpuGS(t, m.env, "run", wf, "--events", file)
	r.want(t, 1)
	for _, re := range []string{
		`(?m)^\d\d:\d\d:\d\d start     fail1 \(attempt 1, card 0, 1000 MiB\)$`,
		`(?m)^\d\d:\d\d:\d\d gpu       card 0 quarantined: 2 failed attempts in a row \(until \d\d:\d\d:\d\d\)$`,
		`(?m)^\d\d:\d\d:\d\d start     later \(attempt 1, card 1, 1000 MiB\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", re, r.stdout)
		}
	}
	evs := parseEvents(t, readFile(t, file))
	var quarantined []eventLine
	for _, ev := range evs {
		if ev.Event == "card-quarantined" {
			quarantined = append(quarantined, ev)
		}
	}
	if len(quarantined) != 1 || intp(quarantined[0].Card) != "0" || quarantined[0].Task != "" ||
		!strings.HasPrefix(quarantined[0].Error, "2 failed attempts in a row (until ") {
		t.Errorf("card-quarantined events: %+v", quarantined)
	}
	if ev := findEvent(t, evs, "later", "started", 1); intp(ev.Card) != "1" || ev.MemoryMiB != 1000 {
		t.Errorf("later started on card %s with %d MiB, want card 1, 1000 MiB", intp(ev.Card), ev.MemoryMiB)
	}
	if ev := findEvent(t, evs, "fail2", "attempt-ended", 1); intp(ev.Card) != "0" || intp(ev.ExitCode) != "1" {
		t.Errorf("fail2's attempt ended on card %s with exit code %s", intp(ev.Card), intp(ev.ExitCode))
	}
}

// The live display's line of a GPU task: its card and the memory charged
// (what it uses, more than it asked) over what it asked for. Meanwhile
// status --watch shows the cards and why the other task waits.
func TestGPULiveDisplayAndWatch(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 10240)}})
	wf, runDir := m.workflow(`
scheduling:
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: hog
    resources: {device: cuda, memory_mib: 6000}
    args: ` + m.job("--mem", "7000", "--duration", "2500ms") + `
  - id: waiter
    resources: {device: cuda, memory_mib: 6000}
    args: ` + m.job("--mem", "100", "--duration", "50ms") + `
`)
	p := startPTY(t, m.env, "run", wf)
	p.waitScreen(t, 10*time.Second, "hog's line with its card and memory", func(screen string) bool {
		return regexp.MustCompile(`(?m)^  hog +card 0 +\d+s  7000/6000 MiB$`).MatchString(screen)
	})
	w := gpuGS(t, nil, "status", "--watch", "--interval", "300ms", "--run-dir", runDir)
	w.want(t, 0)
	first := w.stdout[:strings.Index(w.stdout, "\n\n2 tasks: ")]
	for _, re := range []string{
		`(?m)^waiter +pending +0 .* needs 6000 MiB; best card 0 has \d+ MiB left \(foreign \d+, hog holds 7000\)$`,
		`(?m)^CARD +NAME +TOTAL +USED +FOREIGN +CHARGED +AVAILABLE +STATE +TASKS`,
		`(?m)^0 .* 10240 .* ok +hog 7000 *$`,
	} {
		if !regexp.MustCompile(re).MatchString(first) {
			t.Errorf("status --watch's first table does not match %s:\n%s", re, first)
		}
	}
	raw, code := p.wait(t, 30*time.Second)
	lines := terminalLines(raw)
	if code != 0 || indexOf(lines, regexp.MustCompile(`^█{30} 2/2 tasks  elapsed \d+s$`)) < 0 {
		t.Errorf("exit code %d, want 0, and a final frame; the terminal shows:\n%s", code, strings.Join(lines, "\n"))
	}
}
