package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitRunning waits until status shows task running.
func waitRunning(t *testing.T, wf, task string) {
	t.Helper()
	waitFor(t, 10*time.Second, task+" to be running", func() bool {
		r := gs(t, "", "status", "--json", wf)
		var s statusJSON
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			return false // the run is creating its state database
		}
		return slices.ContainsFunc(s.Tasks, func(tk taskJSON) bool { return tk.ID == task && tk.State == "running" })
	})
}

const watchWorkflow = `
tasks:
  - id: first
    args: %s
  - id: second
    dependencies: [first]
    args: %s
`

// status --watch on a pipe: a full table every interval after a blank
// line, no escape codes; it ends by itself once the run is over, the last
// table being the final state.
func TestStatusWatchPlain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "watch.yaml"), strings.NewReplacer("%s", sleeper("-sleep", "700ms")).Replace(watchWorkflow))
	run := startRun(t, wf)
	waitRunning(t, wf, "first")
	r := gs(t, "", "status", wf, "--watch", "--interval", "200ms")
	r.want(t, 0)
	select {
	case <-run.done:
	case <-time.After(2 * time.Second): // the watch may see the scheduler gone just before it is reaped
		t.Errorf("status --watch ended while the run was still going:\n%s", r.stdout)
	}
	run.wait(t).want(t, 0)
	if strings.ContainsRune(r.stdout, '\x1b') || r.stderr != "" {
		t.Errorf("escape codes in the output, or stderr %q:\n%q", r.stderr, r.stdout)
	}
	tables := regexp.MustCompile(`(?m)^2 tasks: `).FindAllStringIndex(r.stdout, -1)
	if len(tables) < 3 {
		t.Fatalf("%d tables in 1.4s of a run watched every 200ms, want several:\n%s", len(tables), r.stdout)
	}
	for _, tb := range tables[1:] {
		if r.stdout[tb[0]-2:tb[0]] != "\n\n" {
			t.Errorf("a table does not follow a blank line:\n%s", r.stdout)
		}
	}
	first, last := r.stdout[:tables[1][0]], r.stdout[tables[len(tables)-1][0]:]
	if !strings.Contains(first, "scheduler: running (pid ") || !regexp.MustCompile(`(?m)^first +running `).MatchString(first) {
		t.Errorf("first table:\n%s", first)
	}
	if !strings.HasPrefix(last, "2 tasks: 2 complete\nscheduler: not running\n") || !regexp.MustCompile(`(?m)^second +complete +1 +0 `).MatchString(last) {
		t.Errorf("last table is not the final state:\n%s", last)
	}
	// Without a scheduler: the status once.
	r = gs(t, "", "status", wf, "--watch")
	r.want(t, 0)
	if strings.Count(r.stdout, "2 tasks: ") != 1 {
		t.Errorf("status --watch of a finished run:\n%s", r.stdout)
	}
}

// status --watch on a terminal: in place, full screen, until the run is
// over; then the final state is printed once on the normal screen.
func TestStatusWatchTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "watch.yaml"), strings.NewReplacer("%s", sleeper("-sleep", "500ms")).Replace(watchWorkflow))
	run := startRun(t, wf)
	waitRunning(t, wf, "first")
	p := startPTY(t, nil, "status", wf, "--watch", "--interval", "200ms")
	p.waitScreen(t, 10*time.Second, "the watch screen", func(screen string) bool {
		return strings.HasPrefix(screen, "gpusched status, every 200ms: ") && strings.Contains(screen, "scheduler: running")
	})
	raw, code := p.wait(t, 20*time.Second)
	run.wait(t).want(t, 0)
	if code != 0 {
		t.Errorf("exit code %d", code)
	}
	if !strings.Contains(raw, "\x1b[?1049h") || !strings.Contains(raw, "\x1b[?1049l") {
		t.Errorf("the alternate screen was not used, or not left: %q", raw)
	}
	lines := terminalLines(raw)
	screen := strings.Join(lines, "\n")
	if !strings.HasPrefix(screen, "2 tasks: 2 complete\nscheduler: not running\n") || strings.Count(screen, "2 tasks:") != 1 ||
		strings.Contains(screen, "every 200ms") {
		t.Errorf("after the watch, the terminal shows:\n%s", screen)
	}
	if emulate(raw).CursorHidden() {
		t.Error("cursor left hidden")
	}
}

// Ctrl-C ends status --watch on a terminal: back to the normal screen, the
// last state printed once, the cursor shown, exit 0; the run goes on.
func TestStatusWatchCtrlC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "watch.yaml"), strings.NewReplacer("%s", sleeper("-sleep", "1h")).Replace(watchWorkflow))
	run := startRun(t, wf)
	waitRunning(t, wf, "first")
	p := startPTY(t, nil, "status", wf, "--watch", "--interval", "200ms")
	p.waitScreen(t, 10*time.Second, "the watch screen", func(screen string) bool {
		return strings.HasPrefix(screen, "gpusched status, every 200ms: ")
	})
	if _, err := p.tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	raw, code := p.wait(t, 10*time.Second)
	screen := strings.Join(terminalLines(raw), "\n")
	if code != 0 || !strings.Contains(raw, "\x1b[?1049l") || emulate(raw).CursorHidden() {
		t.Errorf("exit code %d, or the alternate screen was not left, or the cursor is hidden: %q", code, raw)
	}
	if !strings.Contains(screen, "2 tasks: 1 running, 1 pending\nscheduler: running (pid ") || strings.Count(screen, "2 tasks:") != 1 {
		t.Errorf("after Ctrl-C, the terminal shows:\n%s", screen)
	}
	if run.exited() {
		t.Error("the run ended with the watch")
	}
}

func TestStatusWatchFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--watch", "--json"},
		{"--interval", "2s"},
		{"--watch", "--interval", "10ms"},
	} {
		r := gs(t, "", append([]string{"status", "--run-dir", dir}, args...)...)
		r.want(t, 2)
		oneLineError(t, r)
	}
}

// logs -f follows a task across its attempts, with a separator line, and
// returns once the task is over though the run goes on; it waits for a
// task that has not started yet.
func TestLogsFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "follow.yaml"), `
scheduling:
  max_parallel_tasks: 2
tasks:
  - id: flaky
    retries: 1
    args: `+sh(`echo "attempt $GPUSCHED_ATTEMPT begins"; sleep 0.4; echo "attempt $GPUSCHED_ATTEMPT ends"; if [ "$GPUSCHED_ATTEMPT" -lt 2 ]; then printf "no newline"; exit 1; fi`)+`
  - id: after
    dependencies: [flaky]
    args: `+sh(`echo after ran`)+`
  - id: other
    args: `+sleeper("-sleep", "2500ms")+`
`)
	run := startRun(t, wf)
	waitRunning(t, wf, "flaky")
	type res struct {
		r      result
		during bool // returned while the run was going
	}
	follow := func(task string) chan res {
		ch := make(chan res, 1)
		go func() {
			r := gs(t, "", "logs", wf, task, "-f")
			ch <- res{r, !run.exited()}
		}()
		return ch
	}
	flaky, after := follow("flaky"), follow("after")
	for task, c := range map[string]struct {
		ch   chan res
		want string
	}{
		"flaky": {flaky, "attempt 1 begins\nattempt 1 ends\nno newline\n--- attempt 2 ---\nattempt 2 begins\nattempt 2 ends\n"},
		"after": {after, "after ran\n"},
	} {
		got := <-c.ch
		got.r.want(t, 0)
		if got.r.stdout != c.want {
			t.Errorf("logs -f %s:\n%q\nwant\n%q", task, got.r.stdout, c.want)
		}
		if !got.during {
			t.Errorf("logs -f %s returned only after the run ended, not when the task was over", task)
		}
	}
	run.wait(t).want(t, 0)
}

// logs -f returns, with what the attempt wrote, when the scheduler is gone.
func TestLogsFollowSchedulerGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "gone.yaml"), `
tasks:
  - id: long
    args: `+sleeper("-print", "hello", "-pidfile", pidfile, "-sleep", "1h")+`
`)
	run := startRun(t, wf)
	pid := readPIDs(t, pidfile, 1)[0]
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	waitRunning(t, wf, "long")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := command(ctx, "", "logs", wf, "long", "-f")
	var out syncBuffer
	f.Stdout = &out
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	// logs -f is following once it has printed what the attempt wrote.
	waitFor(t, 30*time.Second, "logs -f to print the log so far", func() bool { return out.String() == "hello\n" })
	_ = run.cmd.Process.Kill()
	<-run.done
	// It returns by itself (within the test's minute) once it sees the
	// scheduler gone.
	if err := f.Wait(); err != nil {
		t.Errorf("logs -f after the scheduler died: %v", err)
	}
	if out.String() != "hello\n" {
		t.Errorf("logs -f printed %q", out.String())
	}
}
