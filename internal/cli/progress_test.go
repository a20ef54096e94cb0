package cli_test

// Tests of what "gpusched run" shows while it goes: the live display on a
// terminal (the binary runs on a pseudo-terminal; its output is replayed
// into a terminal emulator to see the screen a person would see), and the
// plain lines elsewhere.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// The pseudo-terminal's size, and the emulator's.
const ptyCols, ptyRows = 200, 40

// ptyRun is gpusched running on a pseudo-terminal.
type ptyRun struct {
	cmd    *exec.Cmd
	tty    *os.File // the terminal's side: what gpusched writes comes out here
	mu     sync.Mutex
	out    bytes.Buffer
	read   chan struct{} // closed once all the output is read
	exited chan struct{}
	err    error
}

// startPTY starts gpusched with args on a new pseudo-terminal, as its
// stdin, stdout and stderr and its controlling terminal, with TERM set to
// a common terminal and env added to the environment.
func startPTY(t *testing.T, env []string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(gpuschedBin, args...)
	cmd.Env = append(append(gpuBaseEnv(), "TERM=xterm-256color"), env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: ptyRows, Cols: ptyCols})
	if err != nil {
		t.Fatal(err)
	}
	r := &ptyRun{cmd: cmd, tty: tty, read: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(r.read)
		buf := make([]byte, 32<<10)
		for {
			n, err := tty.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return // EIO once gpusched has exited
			}
		}
	}()
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = cmd.Process.Kill()
			<-r.exited
		}
		tty.Close()
	})
	return r
}

// raw returns everything gpusched wrote so far.
func (r *ptyRun) raw() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitScreen polls the emulated screen until cond holds.
func (r *ptyRun) waitScreen(t *testing.T, limit time.Duration, what string, cond func(screen string) bool) string {
	t.Helper()
	var screen string
	waitFor(t, limit, what, func() bool {
		screen = strings.Join(terminalLines(r.raw()), "\n")
		return cond(screen)
	})
	return screen
}

// wait waits for gpusched to exit and returns all it wrote and its exit code.
func (r *ptyRun) wait(t *testing.T, limit time.Duration) (string, int) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(limit):
		t.Fatalf("gpusched did not exit within %s; it wrote:\n%s", limit, strings.Join(terminalLines(r.raw()), "\n"))
	}
	select {
	case <-r.read:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal's output was not all read 5s after gpusched exited")
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case r.err == nil:
	case errors.As(r.err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(r.err)
	}
	return r.raw(), code
}

// emulate replays raw terminal output into an emulated terminal of the
// pseudo-terminal's size.
func emulate(raw string) *vt.Emulator {
	e := vt.NewEmulator(ptyCols, ptyRows)
	_, _ = e.WriteString(raw)
	return e
}

// terminalLines is what a person sees after raw was written to their
// terminal: the lines scrolled off the top, then the screen, each without
// trailing blanks, with the empty lines at the end left out.
func terminalLines(raw string) []string {
	e := emulate(raw)
	var lines []string
	if sb := e.Scrollback(); sb != nil {
		for _, l := range sb.Lines() {
			lines = append(lines, strings.TrimRight(l.String(), " "))
		}
	}
	for _, l := range strings.Split(e.String(), "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func indexOf(lines []string, re *regexp.Regexp) int {
	for i, l := range lines {
		if re.MatchString(l) {
			return i
		}
	}
	return -1
}

func countMatches(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, l := range lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

const (
	hideCursor = "\x1b[?25l"
	showCursor = "\x1b[?25h"
)

// On a terminal: a bar and a line per running task while it runs; the
// failures and retries printed above it, once each; a clean final frame
// (every task accounted for, no task line left behind); then the summary
// with the failed task's exit code and the last 10 lines of its log,
// escape codes from the log removed; the cursor shown again; exit 1.
func TestLiveDisplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "live.yaml"), `
scheduling:
  max_parallel_tasks: 3
tasks:
  - id: slow-a
    args: `+sleeper("-sleep", "1500ms")+`
  - id: slow-b
    args: `+sleeper("-sleep", "1500ms")+`
  - id: flaky
    retries: 1
    args: `+sh(`echo try $GPUSCHED_ATTEMPT; sleep 0.2; [ "$GPUSCHED_ATTEMPT" -ge 2 ]`)+`
  - id: bad
    dependencies: [flaky]
    args: `+sh(`i=1; while [ $i -le 12 ]; do echo "line $i"; i=$((i+1)); done; printf '\033[31mred\033[0m\n'; exit 3`)+`
  - id: after-bad
    dependencies: [bad]
    args: `+sleeper()+`
`)
	r := startPTY(t, nil, "run", wf)
	bar := regexp.MustCompile(`^[█░]{30} \d/5 tasks  elapsed \d+s`)
	task := regexp.MustCompile(`^  slow-a +cpu +\d+s$`)
	r.waitScreen(t, 10*time.Second, "the bar and slow-a's line", func(screen string) bool {
		lines := strings.Split(screen, "\n")
		return indexOf(lines, bar) >= 0 && indexOf(lines, task) >= 0
	})
	raw, code := r.wait(t, 20*time.Second)
	lines := terminalLines(raw)
	screen := strings.Join(lines, "\n")
	if code != 1 {
		t.Fatalf("exit code %d, want 1 (a task failed); the terminal shows:\n%s", code, screen)
	}

	retry := regexp.MustCompile(`^\d\d:\d\d:\d\d retry     flaky: attempt 1 exit code 1; log .*/logs/flaky\.attempt-1\.log; next attempt at \d\d:\d\d:\d\d \(in 1s\)$`)
	fail := regexp.MustCompile(`^\d\d:\d\d:\d\d failed    bad: attempt 1 exit code 3; log .*/logs/bad\.attempt-1\.log$`)
	// The bar: 4 of 5 tasks done (3 complete, 1 failed), 1 that will not
	// run (blocked by the failure) in its own shade.
	final := regexp.MustCompile(`^█{24}▒{6} 4/5 tasks, 1 won't run  elapsed \d+s$`)
	for _, re := range []*regexp.Regexp{retry, fail, final} {
		if n := countMatches(lines, re); n != 1 {
			t.Errorf("%d lines match %s, want 1; the terminal shows:\n%s", n, re, screen)
		}
	}
	i := indexOf(lines, final)
	if i < 0 || i+3 >= len(lines) {
		t.Fatalf("no final frame followed by the summary:\n%s", screen)
	}
	if indexOf(lines, retry) > i || indexOf(lines, fail) > i {
		t.Errorf("the event lines are not above the display:\n%s", screen)
	}
	if want := "complete 3 · failed 1 · blocked 1 · running 0 · waiting 0"; lines[i+1] != want {
		t.Errorf("final counts %q, want %q", lines[i+1], want)
	}
	if lines[i+2] != "" || !strings.HasPrefix(lines[i+3], "5 tasks in ") || !strings.HasSuffix(lines[i+3], ": 3 complete, 1 failed, 1 blocked") {
		t.Errorf("after the final frame, want a blank line and the summary; got:\n%s", strings.Join(lines[i:], "\n"))
	}
	// Nothing of the running tasks' lines is left anywhere.
	if n := countMatches(lines, regexp.MustCompile(`^  (slow-a|slow-b|flaky|bad) +cpu`)); n != 0 {
		t.Errorf("%d task lines left on the terminal:\n%s", n, screen)
	}
	summary := strings.Join(lines[i+3:], "\n")
	want := "/logs/bad.attempt-1.log\n"
	for l := 4; l <= 12; l++ {
		want += fmt.Sprintf("    | line %d\n", l)
	}
	want += "    | red\n  blocked after-bad: blocked: dependency \"bad\" failed\nrun directory: "
	if !strings.Contains(summary, "  failed  bad: exit code 3 after 1 attempt(s); log ") || !strings.Contains(summary, want) {
		t.Errorf("summary does not show bad's last 10 log lines:\n%s\nwant it to contain:\n%s", summary, want)
	}
	if strings.Contains(raw[strings.LastIndex(raw, showCursor):], "\x1b[31m") {
		t.Errorf("summary shows the log's escape codes:\n%q", raw[strings.LastIndex(raw, showCursor):])
	}
	// The cursor was hidden for the display and shown again at its end.
	h, s := strings.Index(raw, hideCursor), strings.LastIndex(raw, showCursor)
	if h < 0 || s < h || strings.LastIndex(raw, hideCursor) > s {
		t.Errorf("the cursor was not hidden then shown again (hide at %d, last show at %d)", h, s)
	}
	if emulate(raw).CursorHidden() {
		t.Error("the cursor is hidden after gpusched exited")
	}
}

// Ctrl-C on the terminal (the character, so that the terminal sends SIGINT
// as it would for a person): the line saying so is printed above the
// display, the running task is stopped and recorded cancelled, the cursor
// is shown again with no half-drawn frame, and gpusched exits 1.
func TestLiveDisplayCtrlC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "ctrlc.yaml"), `
scheduling:
  kill_grace: 300ms
tasks:
  - id: long
    args: `+sleeper("-ignore-term", "-sleep", "1h")+`
  - id: next
    dependencies: [long]
    args: `+sleeper()+`
`)
	r := startPTY(t, nil, "run", wf)
	r.waitScreen(t, 10*time.Second, "long's line", func(screen string) bool {
		return regexp.MustCompile(`(?m)^  long +cpu +\d+s$`).MatchString(screen)
	})
	before := len(r.raw())
	if _, err := r.tty.Write([]byte{3}); err != nil { // ^C
		t.Fatal(err)
	}
	raw, code := r.wait(t, 10*time.Second)
	lines := terminalLines(raw)
	screen := strings.Join(lines, "\n")
	if code != 1 {
		t.Fatalf("exit code %d after Ctrl-C, want 1; the terminal shows:\n%s", code, screen)
	}
	if !strings.Contains(raw[before:], showCursor) || emulate(raw).CursorHidden() {
		t.Errorf("the cursor was not shown again after Ctrl-C: %q", raw[before:])
	}
	stopping := indexOf(lines, regexp.MustCompile(`^gpusched: interrupt: stopping running tasks \(SIGTERM, then SIGKILL after 300ms; Ctrl-C again kills them at once\)$`))
	cancelled := indexOf(lines, regexp.MustCompile(`^\d\d:\d\d:\d\d cancelled long$`))
	// Nothing is done: long was cancelled and next never ran (pending,
	// or blocked by long); neither counts as done.
	final := indexOf(lines, regexp.MustCompile(`^▒{15}[▒░]{15} 0/2 tasks, [12] won't run  elapsed \d+s$`))
	if stopping < 0 || cancelled < 0 || final < 0 || stopping > final || cancelled > final {
		t.Fatalf("want the Ctrl-C line and long's cancellation above a final frame:\n%s", screen)
	}
	if !regexp.MustCompile(`^complete 0 · failed 0 · (blocked 1 · )?cancelled 1 · running 0 · waiting (0|1( \(1 for dependencies\))?)$`).MatchString(lines[final+1]) ||
		lines[final+2] != "" || !strings.HasPrefix(lines[final+3], "2 tasks in ") {
		t.Errorf("final frame and summary:\n%s", strings.Join(lines[final:], "\n"))
	}
	if !strings.Contains(screen, "1 cancelled") {
		t.Errorf("the summary does not count long cancelled:\n%s", screen)
	}
	if n := countMatches(lines, regexp.MustCompile(`^1 task not started \((pending|blocked by a cancelled task)\): it runs on the next run$`)); n != 1 {
		t.Errorf("the summary does not say once that next was not started:\n%s", screen)
	}
	if tk := status(t, wf).task(t, "long"); tk.State != "cancelled" {
		t.Errorf("long is %s after Ctrl-C, want cancelled", tk.State)
	}
}

// Not a terminal, or --no-progress on one: one plain line per change, and
// no escape code at all.
func TestPlainOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "plain.yaml"), `
tasks:
  - id: ok
    args: `+sleeper("-print", "fine")+`
  - id: flaky
    retries: 1
    args: `+sh(`[ "$GPUSCHED_ATTEMPT" -ge 2 ]`)+`
  - id: bad
    args: `+sh(`echo broken; exit 4`)+`
`)
	check := func(t *testing.T, out string) {
		t.Helper()
		if strings.ContainsRune(out, '\x1b') {
			t.Errorf("output has escape codes: %q", out)
		}
		for _, re := range []string{
			`(?m)^\d\d:\d\d:\d\d start     ok \(attempt 1\)\r?$`,
			`(?m)^\d\d:\d\d:\d\d complete  ok \(attempt 1, \d+ms\)\r?$`,
			`(?m)^\d\d:\d\d:\d\d retry     flaky: attempt 1 exit code 1; log \S+/logs/flaky\.attempt-1\.log; next attempt at \S+ \(in \S+\)\r?$`,
			`(?m)^\d\d:\d\d:\d\d start     flaky \(attempt 2\)\r?$`,
			`(?m)^\d\d:\d\d:\d\d failed    bad: attempt 1 exit code 4; log \S+/logs/bad\.attempt-1\.log\r?$`,
			`(?m)^  failed  bad: exit code 4 after 1 attempt\(s\); log \S+/logs/bad\.attempt-1\.log\r?\n    \| broken\r?$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("output does not match %s:\n%s", re, out)
			}
		}
	}
	t.Run("pipe", func(t *testing.T) {
		r := gs(t, "", "run", wf, "--run-dir", filepath.Join(dir, "run-pipe"))
		r.want(t, 1)
		check(t, r.stdout)
		if r.stderr != "" {
			t.Errorf("stderr: %q", r.stderr)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		p := startPTY(t, nil, "run", wf, "--no-progress", "--run-dir", filepath.Join(dir, "run-tty"))
		raw, code := p.wait(t, 20*time.Second)
		if code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		check(t, raw)
	})
}

// Hundreds of short tasks a second: the final frame accounts for every one
// and no task line is left behind (the rate of frames is tested in
// display_test.go).
func TestLiveDisplayManyTasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("scheduling:\n  max_parallel_tasks: 8\ntasks:\n")
	for i := range 200 {
		fmt.Fprintf(&b, "  - id: t%03d\n    args: [true]\n", i)
	}
	wf := writeFile(t, filepath.Join(dir, "many.yaml"), b.String())
	r := startPTY(t, nil, "run", wf)
	raw, code := r.wait(t, 30*time.Second)
	lines := terminalLines(raw)
	if code != 0 {
		t.Fatalf("exit code %d:\n%s", code, strings.Join(lines, "\n"))
	}
	final := indexOf(lines, regexp.MustCompile(`^█{30} 200/200 tasks  elapsed \d+s$`))
	if final < 0 || lines[final+1] != "complete 200 · failed 0 · running 0 · waiting 0" {
		t.Fatalf("no clean final frame:\n%s", strings.Join(lines, "\n"))
	}
	if final != 0 {
		t.Errorf("%d lines above the final frame, want none:\n%s", final, strings.Join(lines, "\n"))
	}
}

// A reader that goes away (gpusched run | head -1) does not kill the
// scheduler in the middle of its tasks: the run goes on to the end.
func TestRunReaderGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "gone.yaml"), `
tasks:
  - id: a
    args: `+sleeper("-sleep", "200ms")+`
  - id: b
    dependencies: [a]
    args: `+sleeper()+`
`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, "", "run", wf)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &errb
	err = cmd.Run()
	w.Close()
	if err != nil {
		t.Fatalf("gpusched run with its reader gone: %v (stderr %q)", err, errb.String())
	}
	s := status(t, wf)
	checkTask(t, s, "a", "complete", 1, "0")
	checkTask(t, s, "b", "complete", 1, "0")
}
