package cli_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver gpusched uses, to write a foreign SQLite file

	"github.com/gpusched/gpusched/internal/testbin"
)

// The binaries under test, built once by TestMain.
var gpuschedBin, sleeperBin string

func TestMain(m *testing.M) {
	// No test's "gpusched run" goes through a daemon of the machine's
	// by accident: those that want one name it.
	os.Unsetenv("GPUSCHED_SOCKET")
	gpuschedBin = testbin.MustBuild("cmd/gpusched")
	sleeperBin = testbin.MustBuild("cmd/sleeper")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// ---------------------------------------------------------------------------
// Helpers

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// command returns a gpusched command run in dir (any folder when "").
func command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, gpuschedBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GPUSCHED_TEST_PARENT=from-parent")
	return cmd
}

// gs runs gpusched to the end (at most a minute) and returns what it did.
func gs(t *testing.T, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return finish(t, ctx, command(ctx, dir, args...), args)
}

// finish runs cmd, made with ctx, to the end and returns what it did.
func finish(t *testing.T, ctx context.Context, cmd *exec.Cmd, args []string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("gpusched %s did not finish within a minute\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("gpusched %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// backgroundRun is a "gpusched run" going on while a test watches it.
type backgroundRun struct {
	cmd       *exec.Cmd
	out, errb bytes.Buffer
	start     time.Time
	done      chan struct{}
	err       error
}

// startRun starts "gpusched run args..." in the background.
func startRun(t *testing.T, args ...string) *backgroundRun {
	t.Helper()
	return startBackground(t, func(ctx context.Context) *exec.Cmd {
		return command(ctx, "", append([]string{"run"}, args...)...)
	})
}

// startBackground starts the command newCmd makes; a test's cleanup stops
// it if it still runs (SIGTERM stops its tasks too).
func startBackground(t *testing.T, newCmd func(ctx context.Context) *exec.Cmd) *backgroundRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b := &backgroundRun{done: make(chan struct{})}
	b.cmd = newCmd(ctx)
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.errb
	b.start = time.Now()
	if err := b.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		b.err = b.cmd.Wait()
		cancel()
		close(b.done)
	}()
	t.Cleanup(func() {
		if b.exited() {
			return
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(15 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

func (b *backgroundRun) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// wait waits for the run to end and returns what it did.
func (b *backgroundRun) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		t.Fatalf("gpusched run did not finish within a minute\nstdout:\n%s\nstderr:\n%s", b.out.String(), b.errb.String())
	}
	r := result{stdout: b.out.String(), stderr: b.errb.String(), took: time.Since(b.start)}
	var ee *exec.ExitError
	switch {
	case b.err == nil:
	case errors.As(b.err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("gpusched run: %v", b.err)
	}
	return r
}

// want checks the exit code, dumping the output if it is wrong.
func (r result) want(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// oneLineError checks that stderr is exactly one line "gpusched: ..." and
// returns it without the newline.
func oneLineError(t *testing.T, r result) string {
	t.Helper()
	if !strings.HasPrefix(r.stderr, "gpusched: ") || !strings.HasSuffix(r.stderr, "\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr is not one line starting with \"gpusched: \": %q", r.stderr)
	}
	return strings.TrimSuffix(r.stderr, "\n")
}

// q quotes s for YAML (a JSON string is a YAML double-quoted scalar).
func q(s string) string { return strconv.Quote(s) }

// sh is a task's args running script with sh -c, as YAML.
func sh(script string) string { return "[sh, -c, " + q(script) + "]" }

// sleeper is a task's args running the sleeper with flags, as YAML.
func sleeper(flags ...string) string {
	parts := []string{q(sleeperBin)}
	for _, f := range flags {
		parts = append(parts, q(f))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// sortedLines returns the non-empty lines of s, sorted.
func sortedLines(s string) []string {
	lines := strings.Fields(s)
	slices.Sort(lines)
	return lines
}

// listTree returns every path under dir, relative to it.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond every 10ms for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
	}
}

// syncBuffer is an output a test reads while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Status JSON as "gpusched status --json" prints it.

type attemptJSON struct {
	Number      int    `json:"number"`
	ExitCode    *int   `json:"exit_code"`
	Signal      string `json:"signal"`
	TimedOut    bool   `json:"timed_out"`
	Cancelled   bool   `json:"cancelled"`
	Interrupted bool   `json:"interrupted"`
	Error       string `json:"error"`
	PID         int    `json:"pid"`
	LogPath     string `json:"log_path"`
}

type taskJSON struct {
	ID           string        `json:"id"`
	State        string        `json:"state"`
	Attempts     int           `json:"attempts"`
	ExitCode     *int          `json:"exit_code"`
	GPU          *int          `json:"gpu"`
	Error        string        `json:"error"`
	BlockedBy    string        `json:"blocked_by"`
	Dependencies []string      `json:"dependencies"`
	Started      *time.Time    `json:"started"`
	Ended        *time.Time    `json:"ended"`
	Log          *string       `json:"log"`
	History      []attemptJSON `json:"history"`
}

type statusJSON struct {
	RunDir string     `json:"run_dir"`
	Tasks  []taskJSON `json:"tasks"`
}

// task returns the named task, failing the test if it is missing.
func (s statusJSON) task(t *testing.T, id string) taskJSON {
	t.Helper()
	for _, tk := range s.Tasks {
		if tk.ID == id {
			return tk
		}
	}
	t.Fatalf("status has no task %q: %+v", id, s.Tasks)
	return taskJSON{}
}

func (s statusJSON) ids() []string {
	var ids []string
	for _, tk := range s.Tasks {
		ids = append(ids, tk.ID)
	}
	return ids
}

// status runs "gpusched status --json" with args and decodes it, checking
// that every task has the keys id, state, attempts (an integer), exit_code
// and gpu (null for CPU tasks).
func status(t *testing.T, args ...string) statusJSON {
	t.Helper()
	r := gs(t, "", append([]string{"status", "--json"}, args...)...)
	r.want(t, 0)
	if r.stderr != "" {
		t.Errorf("status --json wrote to stderr: %q", r.stderr)
	}
	var raw struct {
		Tasks []map[string]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("status --json output is not JSON: %v\n%s", err, r.stdout)
	}
	for _, tk := range raw.Tasks {
		for _, key := range []string{"id", "state", "attempts", "exit_code", "gpu"} {
			if _, ok := tk[key]; !ok {
				t.Errorf("status --json task %s has no %q key", tk["id"], key)
			}
		}
		if _, err := strconv.Atoi(string(tk["attempts"])); err != nil {
			t.Errorf("task %s: attempts is %s, not an integer", tk["id"], tk["attempts"])
		}
		if string(tk["gpu"]) != "null" {
			t.Errorf("task %s: gpu is %s, want null for a CPU task", tk["id"], tk["gpu"])
		}
	}
	var s statusJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decode status: %v\n%s", err, r.stdout)
	}
	return s
}

func intp(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

// checkTask checks a task's state, attempts and exit code ("null" for none).
func checkTask(t *testing.T, s statusJSON, id, state string, attempts int, exit string) taskJSON {
	t.Helper()
	tk := s.task(t, id)
	if tk.State != state || tk.Attempts != attempts || intp(tk.ExitCode) != exit {
		t.Errorf("task %s: state %s, attempts %d, exit_code %s; want %s, %d, %s (error %q)",
			id, tk.State, tk.Attempts, intp(tk.ExitCode), state, attempts, exit, tk.Error)
	}
	if len(tk.History) != tk.Attempts {
		t.Errorf("task %s: %d attempts but %d in history", id, tk.Attempts, len(tk.History))
	}
	for i, a := range tk.History {
		if a.Number != i+1 {
			t.Errorf("task %s: history[%d] is attempt %d, want %d", id, i, a.Number, i+1)
		}
	}
	return tk
}

// procState returns the state letter of process pid from /proc/PID/stat
// (e.g. 'S', 'Z'), 0 if there is no such process, and its process group.
func procState(pid int) (state byte, pgrp int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0
	}
	f := strings.Fields(string(b[i+2:])) // state ppid pgrp ...
	if len(f) < 3 {
		return 0, 0
	}
	pgrp, _ = strconv.Atoi(f[2])
	return f[0][0], pgrp
}

// alive reports whether pid is a live process (a zombie awaiting reaping
// counts as dead).
// schedulerPID returns the PID in runDir's lock: the scheduler's, which
// a gpusched run has its run directory's supervisor start; 0 when none.
func schedulerPID(runDir string) int {
	b, err := os.ReadFile(filepath.Join(runDir, "lock"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func alive(pid int) bool {
	st, _ := procState(pid)
	return st != 0 && st != 'Z' && st != 'X'
}

// groupMembers returns the live processes of process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, g := procState(pid); g == pgid && st != 'Z' && st != 'X' && st != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readPIDs waits until file holds n PIDs, one a line, and returns them.
func readPIDs(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	waitFor(t, 10*time.Second, fmt.Sprintf("%d PIDs in %s", n, file), func() bool {
		b, _ := os.ReadFile(file)
		if strings.Count(string(b), "\n") < n {
			return false
		}
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("bad PID %q in %s", f, file)
			}
			pids = append(pids, p)
		}
		return true
	})
	return pids
}

// checkGone waits up to 5s for every pid and process group pgid to be gone.
func checkGone(t *testing.T, pgid int, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		members := groupMembers(pgid)
		if len(left) == 0 && len(members) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes still alive 5s later: %v; live members of group %d: %v", left, pgid, members)
			for _, p := range append(left, members...) {
				_ = syscall.Kill(p, syscall.SIGKILL) // don't leave them behind
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Tests

// A diamond a -> {b, c} -> d plus an independent e: exit 0, every task
// complete once, in dependency order, and status --json says so.
func TestRunDAG(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "dag.yaml"), `
scheduling:
  max_parallel_tasks: 4
tasks:
  - id: a
    args: `+sh("echo a >> runs.txt; echo task-a")+`
  - id: b
    dependencies: [a]
    args: `+sh("echo b >> runs.txt")+`
  - id: c
    dependencies: [a]
    args: `+sh("echo c >> runs.txt")+`
  - id: d
    dependencies: [b, c]
    args: `+sh("echo d >> runs.txt")+`
  - id: e
    args: `+sh("echo e >> runs.txt")+`
`)
	r := gs(t, "", "run", wf)
	r.want(t, 0)
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}
	if !strings.Contains(r.stdout, "5 tasks in ") || !strings.Contains(r.stdout, ": 5 complete") {
		t.Errorf("summary does not say 5 tasks, 5 complete:\n%s", r.stdout)
	}
	runs := readFile(t, filepath.Join(dir, "runs.txt"))
	if got := sortedLines(runs); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("tasks ran %v, want each of a..e once", got)
	}
	lines := strings.Fields(runs)
	pos := func(id string) int { return slices.Index(lines, id) }
	if !(pos("a") < pos("b") && pos("a") < pos("c") && pos("b") < pos("d") && pos("c") < pos("d")) {
		t.Errorf("tasks ran in order %v, which breaks the dependencies", lines)
	}

	// The default run directory is .gpusched/<name> beside the workflow.
	runDir := filepath.Join(dir, ".gpusched", "dag")
	if !exists(filepath.Join(runDir, "state.db")) {
		t.Fatalf("no state.db in the default run directory %s: %v", runDir, listTree(t, dir))
	}

	s := status(t, wf)
	if got := s.ids(); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("status lists %v, want the workflow's order a..e", got)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		tk := checkTask(t, s, id, "complete", 1, "0")
		if tk.GPU != nil {
			t.Errorf("task %s: gpu %d, want null", id, *tk.GPU)
		}
		if tk.Started == nil || tk.Ended == nil || tk.Ended.Before(*tk.Started) {
			t.Errorf("task %s: started %v, ended %v", id, tk.Started, tk.Ended)
		}
		if tk.Error != "" || tk.BlockedBy != "" {
			t.Errorf("task %s: error %q, blocked_by %q on a complete task", id, tk.Error, tk.BlockedBy)
		}
	}
	d := s.task(t, "d")
	for _, dep := range []string{"b", "c"} {
		if e := s.task(t, dep).Ended; e != nil && d.Started != nil && d.Started.Before(*e) {
			t.Errorf("d started at %v, before its dependency %s ended at %v", d.Started, dep, e)
		}
	}
	if !slices.Equal(d.Dependencies, []string{"b", "c"}) {
		t.Errorf("d's dependencies are %v", d.Dependencies)
	}
	// --run-dir names the same run.
	if s2 := status(t, "--run-dir", runDir); !slices.Equal(s2.ids(), s.ids()) {
		t.Errorf("status --run-dir lists %v", s2.ids())
	}
	// The log holds the task's output.
	if lg := gs(t, "", "logs", wf, "a"); lg.code != 0 || lg.stdout != "task-a\n" {
		t.Errorf("logs a: exit %d, output %q, want \"task-a\\n\" (stderr %q)", lg.code, lg.stdout, lg.stderr)
	}
}

// A failing task: exit 1, its dependents (direct and not) blocked by it,
// an independent branch still complete.
func TestRunFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "fail.yaml"), `
tasks:
  - id: ok
    args: `+sleeper("-print", "fine")+`
  - id: bad
    args: `+sleeper("-exit", "3", "-print", "oops")+`
  - id: child
    dependencies: [bad]
    args: `+sleeper("-touch", "child-ran")+`
  - id: grandchild
    dependencies: [child, ok]
    args: `+sleeper("-touch", "grandchild-ran")+`
  - id: independent
    dependencies: [ok]
    args: `+sleeper("-touch", "independent-ran")+`
`)
	r := gs(t, "", "run", wf)
	r.want(t, 1)
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if line != "" && !strings.HasPrefix(line, "gpusched: ") {
			t.Errorf("stderr line without the gpusched: prefix: %q", line)
		}
	}
	if !strings.Contains(r.stdout, "failed  bad") || !strings.Contains(r.stdout, "exit code 3") {
		t.Errorf("summary does not report bad's failure with its exit code:\n%s", r.stdout)
	}
	if exists(filepath.Join(dir, "child-ran")) || exists(filepath.Join(dir, "grandchild-ran")) {
		t.Error("a task blocked by the failure ran")
	}
	if !exists(filepath.Join(dir, "independent-ran")) {
		t.Error("the independent branch did not run")
	}
	s := status(t, wf)
	checkTask(t, s, "ok", "complete", 1, "0")
	bad := checkTask(t, s, "bad", "failed", 1, "3")
	if !strings.Contains(bad.Error, "exit code 3") {
		t.Errorf("bad's error %q does not mention exit code 3", bad.Error)
	}
	for _, id := range []string{"child", "grandchild"} {
		tk := checkTask(t, s, id, "blocked", 0, "null")
		if tk.BlockedBy != "bad" || !strings.Contains(tk.Error, `"bad"`) {
			t.Errorf("task %s: blocked_by %q, error %q; want blocked by bad", id, tk.BlockedBy, tk.Error)
		}
		if tk.Started != nil || tk.Log != nil {
			t.Errorf("task %s never ran but has started %v, log %v", id, tk.Started, tk.Log)
		}
	}
	checkTask(t, s, "independent", "complete", 1, "0")

	// The table: a header, then each task with its state.
	tr := gs(t, "", "status", wf)
	tr.want(t, 0)
	if !strings.HasPrefix(tr.stdout, "5 tasks: ") {
		t.Errorf("status table does not start with the count:\n%s", tr.stdout)
	}
	states := map[string]string{}
	for _, line := range strings.Split(tr.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			states[f[0]] = f[1] + " " + f[2]
		}
	}
	for id, want := range map[string]string{
		"TASK": "STATE ATTEMPTS", "ok": "complete 1", "bad": "failed 1", "child": "blocked 0",
		"grandchild": "blocked 0", "independent": "complete 1",
	} {
		if states[id] != want {
			t.Errorf("status table row %s: %q, want %q\n%s", id, states[id], want, tr.stdout)
		}
	}

	// logs: the failed task's output; a task that never ran is an error.
	if lg := gs(t, "", "logs", wf, "bad"); lg.code != 0 || lg.stdout != "oops\n" {
		t.Errorf("logs bad: exit %d, %q; want 0, \"oops\\n\"", lg.code, lg.stdout)
	}
	lg := gs(t, "", "logs", wf, "child")
	lg.want(t, 1)
	if msg := oneLineError(t, lg); !strings.Contains(msg, `"child"`) || !strings.Contains(msg, "not started") {
		t.Errorf("logs of a blocked task: %q", msg)
	}
	lg = gs(t, "", "logs", wf, "grandchid")
	lg.want(t, 1)
	if msg := oneLineError(t, lg); !strings.Contains(msg, `did you mean "grandchild"?`) {
		t.Errorf("logs of a mistyped task: %q", msg)
	}
}

// An invalid workflow or command line: exit 2, one line on stderr, and no
// run directory or state database anywhere.
func TestInvalidWritesNothing(t *testing.T) {
	t.Parallel()
	good := "tasks:\n  - id: a\n    args: " + sleeper("-touch", "ran") + "\n"
	tests := []struct {
		name     string
		workflow string
		args     func(wf, runDir string) []string
		contains []string
	}{
		{
			name:     "unknown dependency",
			workflow: "tasks:\n  - id: a\n    args: [true]\n  - id: b\n    args: [true]\n    dependencies: [aa]\n",
			args:     func(wf, _ string) []string { return []string{"run", wf} },
			contains: []string{"flow.yaml:6: ", `"aa"`},
		},
		{
			name:     "unknown dependency with --run-dir",
			workflow: "tasks:\n  - id: a\n    args: [true]\n  - id: b\n    args: [true]\n    dependencies: [aa]\n",
			args:     func(wf, rd string) []string { return []string{"run", "--run-dir", rd, wf} },
			contains: []string{"flow.yaml:6: ", `"aa"`},
		},
		{
			name:     "YAML syntax",
			workflow: "tasks:\n  - id: a\n    args: [true]\n  oops\n",
			args:     func(wf, rd string) []string { return []string{"run", wf, "--run-dir", rd} },
			contains: []string{"flow.yaml:4: ", "invalid YAML"},
		},
		{
			name:     "cycle",
			workflow: "tasks:\n  - id: a\n    args: [true]\n    dependencies: [b]\n  - id: b\n    args: [true]\n    dependencies: [a]\n",
			args:     func(wf, _ string) []string { return []string{"run", wf} },
			contains: []string{"flow.yaml:4: ", "dependency cycle: a -> b -> a"},
		},
		{
			name:     "unknown task key",
			workflow: "tasks:\n  - id: a\n    args: [true]\n    dependecies: []\n",
			args:     func(wf, _ string) []string { return []string{"run", wf} },
			contains: []string{"flow.yaml:4: ", `did you mean "dependencies"?`},
		},
		{
			name:     "missing workflow file",
			args:     func(wf, _ string) []string { return []string{"run", wf + ".missing"} },
			contains: []string{"flow.yaml.missing"},
		},
		{
			name:     "-j 0",
			workflow: good,
			args:     func(wf, _ string) []string { return []string{"run", "-j", "0", wf} },
			contains: []string{"-j", "at least 1"},
		},
		{
			name:     "-j not a number",
			workflow: good,
			args:     func(wf, _ string) []string { return []string{"run", wf, "-j", "lots"} },
			contains: []string{"lots"},
		},
		{
			name:     "unknown flag",
			workflow: good,
			args:     func(wf, _ string) []string { return []string{"run", wf, "--frobnicate"} },
			contains: []string{"frobnicate"},
		},
		{
			name:     "two workflows",
			workflow: good,
			args:     func(wf, _ string) []string { return []string{"run", wf, wf} },
			contains: []string{"one workflow file"},
		},
		{
			name:     "no workflow",
			workflow: good,
			args:     func(string, string) []string { return []string{"run"} },
			contains: []string{"one workflow file"},
		},
		{
			name:     "unknown subcommand",
			workflow: good,
			args:     func(wf, _ string) []string { return []string{"runn", wf} },
			contains: []string{"runn"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wf := filepath.Join(dir, "flow.yaml")
			if tt.workflow != "" {
				writeFile(t, wf, tt.workflow)
			}
			before := listTree(t, dir)
			rd := filepath.Join(dir, "rundir")
			r := gs(t, dir, tt.args(wf, rd)...)
			r.want(t, 2)
			msg := oneLineError(t, r)
			for _, s := range tt.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
			if after := listTree(t, dir); !slices.Equal(before, after) {
				t.Errorf("files changed: before %v, after %v", before, after)
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}

// -j N overrides max_parallel_tasks, before or after the workflow path: four
// tasks that each wait for all four to have started only finish if they run
// at once.
func TestJobsFlag(t *testing.T) {
	t.Parallel()
	barrier := `touch "started-$GPUSCHED_TASK_ID"; i=0
while [ "$(ls | grep -c '^started-')" -lt 4 ]; do
  i=$((i+1)); if [ $i -gt 100 ]; then echo "barrier not reached"; exit 9; fi; sleep 0.03
done`
	tasks := "scheduling:\n  max_parallel_tasks: 1\ntasks:\n"
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		tasks += "  - id: " + id + "\n    args: " + sh(barrier) + "\n"
	}
	for _, tt := range []struct {
		name string
		args func(wf string) []string
	}{
		{"before", func(wf string) []string { return []string{"run", "-j", "4", wf} }},
		{"after", func(wf string) []string { return []string{"run", wf, "-j", "4"} }},
		{"long form", func(wf string) []string { return []string{"run", wf, "--jobs=4"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wf := writeFile(t, filepath.Join(dir, "jobs.yaml"), tasks)
			r := gs(t, "", tt.args(wf)...)
			r.want(t, 0)
			s := status(t, wf)
			for _, id := range []string{"w1", "w2", "w3", "w4"} {
				checkTask(t, s, id, "complete", 1, "0")
			}
		})
	}
	// -j 1 overrides a larger max_parallel_tasks: tasks that fail if another
	// is running at the same time all succeed.
	t.Run("one", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		excl := `mkdir busy || exit 7; sleep 0.1; rmdir busy`
		src := "scheduling:\n  max_parallel_tasks: 4\ntasks:\n"
		for _, id := range []string{"x1", "x2", "x3", "x4"} {
			src += "  - id: " + id + "\n    args: " + sh(excl) + "\n"
		}
		wf := writeFile(t, filepath.Join(dir, "one.yaml"), src)
		gs(t, "", "run", wf, "-j", "1").want(t, 0)
	})
}

// --run-dir before or after the workflow, absolute or relative to the
// working directory, puts the state there and not in the default place.
func TestRunDirFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args func(wf, rd string) []string
		rel  bool
	}{
		{"before", func(wf, rd string) []string { return []string{"run", "--run-dir", rd, wf} }, false},
		{"after", func(wf, rd string) []string { return []string{"run", wf, "--run-dir=" + rd} }, false},
		{"relative", func(wf, rd string) []string { return []string{"run", wf, "--run-dir", rd} }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cwd := t.TempDir()
			wf := writeFile(t, filepath.Join(dir, "rd.yaml"), "tasks:\n  - id: only\n    args: "+sleeper("-print", "hello")+"\n")
			rd := filepath.Join(t.TempDir(), "my-run")
			arg := rd
			if tt.rel {
				arg, rd = "rel-run", filepath.Join(cwd, "rel-run")
			}
			r := gs(t, cwd, tt.args(wf, arg)...)
			r.want(t, 0)
			if !exists(filepath.Join(rd, "state.db")) {
				t.Fatalf("no state.db in %s", rd)
			}
			if !strings.Contains(r.stdout, "run directory: "+rd) {
				t.Errorf("summary does not name the run directory %s:\n%s", rd, r.stdout)
			}
			if exists(filepath.Join(dir, ".gpusched")) {
				t.Errorf("the default run directory was created too: %v", listTree(t, dir))
			}
			s := status(t, "--run-dir", rd)
			checkTask(t, s, "only", "complete", 1, "0")
			if lg := gs(t, "", "logs", "only", "--run-dir", rd); lg.stdout != "hello\n" {
				t.Errorf("logs --run-dir: %q", lg.stdout)
			}
		})
	}
}

// validate: exit 0 on a valid workflow, 2 on an invalid one, and nothing
// written either way.
func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "good.yaml"), "tasks:\n  - id: a\n    args: "+sleeper("-touch", "ran")+"\n  - id: b\n    dependencies: [a]\n    args: [true]\n")
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "tasks:\n  - id: a\n    args: [true]\n    resources:\n      device: cuda\n")
	before := listTree(t, dir)

	r := gs(t, dir, "validate", good)
	r.want(t, 0)
	if r.stdout != good+": 2 tasks, valid\n" || r.stderr != "" {
		t.Errorf("validate good: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = gs(t, dir, "validate", bad)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.HasPrefix(msg, "gpusched: "+bad+":4: ") || !strings.Contains(msg, "memory_mib") {
		t.Errorf("validate bad: %q", msg)
	}
	r = gs(t, dir, "validate")
	r.want(t, 2)
	oneLineError(t, r)

	if after := listTree(t, dir); !slices.Equal(before, after) {
		t.Errorf("validate wrote files: before %v, after %v", before, after)
	}
}

// status without a run, or without saying which run.
func TestStatusNoRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "never.yaml"), "tasks:\n  - id: a\n    args: [true]\n")
	r := gs(t, dir, "status", wf)
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "no run found") || !strings.Contains(msg, filepath.Join(dir, ".gpusched", "never")) {
		t.Errorf("status of a workflow never run: %q", msg)
	}
	r = gs(t, dir, "status")
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "--run-dir") {
		t.Errorf("status without a run: %q", msg)
	}
	if after := listTree(t, dir); !slices.Equal(after, []string{"never.yaml"}) {
		t.Errorf("status wrote files: %v", after)
	}
}

// logs prints the last attempt by default and attempt N with --attempt.
func TestLogsAttempts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "logs.yaml"), `
tasks:
  - id: flaky
    retries: 1
    args: `+sh(`echo "attempt $GPUSCHED_ATTEMPT output"; echo "to stderr $GPUSCHED_ATTEMPT" >&2; [ "$GPUSCHED_ATTEMPT" -ge 2 ]`)+`
`)
	gs(t, "", "run", wf).want(t, 0)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", wf, "flaky"}, "attempt 2 output\nto stderr 2\n"},
		{[]string{"logs", wf, "flaky", "--attempt", "1"}, "attempt 1 output\nto stderr 1\n"},
		{[]string{"logs", "--attempt=2", "flaky", "--workflow", wf}, "attempt 2 output\nto stderr 2\n"},
		{[]string{"logs", "flaky", "--run-dir", filepath.Join(dir, ".gpusched", "logs"), "--attempt", "1"}, "attempt 1 output\nto stderr 1\n"},
	} {
		r := gs(t, "", tt.args...)
		r.want(t, 0)
		if r.stdout != tt.want {
			t.Errorf("%v: %q, want %q", tt.args, r.stdout, tt.want)
		}
	}
	r := gs(t, "", "logs", wf, "flaky", "--attempt", "3")
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "no attempt 3") || !strings.Contains(msg, "1 to 2") {
		t.Errorf("logs --attempt 3: %q", msg)
	}
	r = gs(t, "", "logs", "-w", wf)
	r.want(t, 2)
	oneLineError(t, r)
	// -w, from older versions, still names the workflow, and says how to
	// give it now; given twice, the workflow is refused.
	r = gs(t, "", "logs", "flaky", "-w", wf)
	r.want(t, 0)
	if r.stdout != "attempt 2 output\nto stderr 2\n" || !strings.Contains(oneLineError(t, r), "-w/--workflow is deprecated: give the workflow before the task (gpusched logs "+wf+" flaky)") {
		t.Errorf("logs flaky -w: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = gs(t, "", "logs", wf, "flaky", "-w", wf)
	r.want(t, 2)
	oneLineError(t, r)
	r = gs(t, "", "logs", wf, "flaky", "extra")
	r.want(t, 2)
	oneLineError(t, r)
	s := status(t, wf)
	tk := checkTask(t, s, "flaky", "complete", 2, "0")
	if h := tk.History; len(h) == 2 && (intp(h[0].ExitCode) != "1" || intp(h[1].ExitCode) != "0") {
		t.Errorf("history exit codes %s, %s; want 1, 0", intp(h[0].ExitCode), intp(h[1].ExitCode))
	}
}

// The attempt's environment: gpusched's variables (which a task's env
// cannot override), the task's env, and gpusched's own environment. Dirs:
// relative to the workflow's folder, which is also the default, whatever
// gpusched's working directory.
func TestEnvAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub", "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := writeFile(t, filepath.Join(dir, "env.yaml"), `
tasks:
  - id: show-env
    env: {SEED: "7", EMPTY: "", GPUSCHED_TASK_ID: spoofed, NUM: 42}
    args: `+sleeper("-env", "GPUSCHED_TASK_ID", "-env", "GPUSCHED_ATTEMPT", "-env", "SEED", "-env", "EMPTY",
		"-env", "NUM", "-env", "GPUSCHED_TEST_PARENT", "-env", "GPUSCHED_RUN_DIR", "-env", "UNSET_VARIABLE_X")+`
  - id: in-sub
    dir: sub/work
    args: `+sleeper("-touch", "marker-sub")+`
  - id: in-default
    args: `+sleeper("-touch", "marker-default")+`
  - id: pwd
    dir: sub
    args: [pwd]
`)
	cwd := t.TempDir() // gpusched runs elsewhere
	gs(t, cwd, "run", wf).want(t, 0)
	runDir := filepath.Join(dir, ".gpusched", "env")
	r := gs(t, "", "logs", wf, "show-env")
	r.want(t, 0)
	want := strings.Join([]string{
		"GPUSCHED_TASK_ID=show-env",
		"GPUSCHED_ATTEMPT=1",
		"SEED=7",
		"EMPTY=",
		"NUM=42",
		"GPUSCHED_TEST_PARENT=from-parent",
		"GPUSCHED_RUN_DIR=" + runDir,
		"UNSET_VARIABLE_X=<unset>",
	}, "\n") + "\n"
	if r.stdout != want {
		t.Errorf("environment:\n%s\nwant:\n%s", r.stdout, want)
	}
	if !exists(filepath.Join(dir, "sub", "work", "marker-sub")) {
		t.Errorf("dir: sub/work was not the working directory: %v", listTree(t, dir))
	}
	if !exists(filepath.Join(dir, "marker-default")) {
		t.Errorf("the workflow's folder was not the default working directory: %v", listTree(t, dir))
	}
	if got := listTree(t, cwd); len(got) != 0 {
		t.Errorf("files written in gpusched's working directory: %v", got)
	}
	if r := gs(t, "", "logs", wf, "pwd"); r.stdout != filepath.Join(dir, "sub")+"\n" {
		t.Errorf("pwd in dir: sub printed %q", r.stdout)
	}
}

// A task that outlives its timeout is stopped: SIGTERM (ignored), SIGKILL
// after the kill grace, its whole process group with it, and it fails with
// an error that says it timed out.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "timeout.yaml"), `
scheduling:
  kill_grace: 200ms
tasks:
  - id: stuck
    timeout: 300ms
    args: `+sleeper("-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")+`
  - id: after
    dependencies: [stuck]
    args: [true]
`)
	r := gs(t, "", "run", wf)
	r.want(t, 1)
	pids := readPIDs(t, pidfile, 2)
	checkGone(t, pids[0], pids)

	s := status(t, wf)
	tk := checkTask(t, s, "stuck", "failed", 1, "null")
	if !strings.Contains(tk.Error, "timed out") || !strings.Contains(tk.Error, "300ms") {
		t.Errorf("error %q does not say it timed out after 300ms", tk.Error)
	}
	if len(tk.History) == 1 {
		a := tk.History[0]
		if !a.TimedOut || a.Signal != "SIGKILL" || a.PID != pids[0] {
			t.Errorf("attempt: timed_out %v, signal %q, pid %d; want true, SIGKILL, %d", a.TimedOut, a.Signal, a.PID, pids[0])
		}
	}
	if !strings.Contains(r.stdout, "timed out") {
		t.Errorf("run output does not mention the timeout:\n%s", r.stdout)
	}
	after := checkTask(t, s, "after", "blocked", 0, "null")
	if after.BlockedBy != "stuck" {
		t.Errorf("after: blocked_by %q", after.BlockedBy)
	}
}

// retries: a task that fails twice then succeeds completes on its third
// attempt with retries 2; with retries 1 it fails after two.
func TestRetries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	counter := func(file string) string {
		return sh(`n=$(cat ` + file + ` 2>/dev/null || echo 0); n=$((n+1)); echo $n > ` + file + `; echo "try $n"; [ $n -ge 3 ]`)
	}
	wf := writeFile(t, filepath.Join(dir, "retry.yaml"), `
scheduling:
  retries: 5
tasks:
  - id: thrice
    retries: 2
    args: `+counter("count-thrice")+`
  - id: twice
    retries: 1
    args: `+counter("count-twice")+`
  - id: once
    retries: 0
    args: `+counter("count-once")+`
`)
	r := gs(t, "", "run", wf)
	r.want(t, 1)
	for file, want := range map[string]string{"count-thrice": "3\n", "count-twice": "2\n", "count-once": "1\n"} {
		if got := readFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	s := status(t, wf)
	tk := checkTask(t, s, "thrice", "complete", 3, "0")
	for i, a := range tk.History {
		want := "1"
		if i == 2 {
			want = "0"
		}
		if intp(a.ExitCode) != want {
			t.Errorf("thrice attempt %d: exit code %s, want %s", a.Number, intp(a.ExitCode), want)
		}
	}
	checkTask(t, s, "twice", "failed", 2, "1")
	checkTask(t, s, "once", "failed", 1, "1")
	if !strings.Contains(r.stdout, "retry") {
		t.Errorf("run output does not report the retries:\n%s", r.stdout)
	}
	if lg := gs(t, "", "logs", wf, "thrice", "--attempt", "2"); lg.stdout != "try 2\n" {
		t.Errorf("logs thrice --attempt 2: %q", lg.stdout)
	}
}

// Running again on the same run directory keeps completed tasks and runs
// the failed and blocked ones, attempt numbers continuing.
func TestResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flag := filepath.Join(dir, "broken")
	writeFile(t, flag, "")
	wf := writeFile(t, filepath.Join(dir, "resume.yaml"), `
tasks:
  - id: a
    args: `+sh(`echo a >> runs.txt`)+`
  - id: b
    dependencies: [a]
    args: `+sh(`echo b >> runs.txt; echo "b attempt $GPUSCHED_ATTEMPT"; test ! -f broken`)+`
  - id: c
    dependencies: [b]
    args: `+sh(`echo c >> runs.txt`)+`
  - id: d
    args: `+sh(`echo d >> runs.txt`)+`
`)
	runs := filepath.Join(dir, "runs.txt")
	gs(t, "", "run", wf).want(t, 1)
	if got := sortedLines(readFile(t, runs)); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Fatalf("first run ran %v, want a, b, d", got)
	}
	s := status(t, wf)
	checkTask(t, s, "b", "failed", 1, "1")
	checkTask(t, s, "c", "blocked", 0, "null")

	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	writeFile(t, runs, "")
	r := gs(t, "", "run", wf)
	r.want(t, 0)
	if got := strings.Fields(readFile(t, runs)); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("second run ran %v, want b then c only", got)
	}
	if !strings.Contains(r.stdout, "2 kept") {
		t.Errorf("summary does not report the 2 tasks kept:\n%s", r.stdout)
	}
	s = status(t, wf)
	checkTask(t, s, "a", "complete", 1, "0")
	checkTask(t, s, "b", "complete", 2, "0")
	checkTask(t, s, "c", "complete", 1, "0")
	checkTask(t, s, "d", "complete", 1, "0")
	for n, want := range map[string]string{"1": "b attempt 1\n", "2": "b attempt 2\n"} {
		if lg := gs(t, "", "logs", wf, "b", "--attempt", n); lg.stdout != want {
			t.Errorf("logs b --attempt %s: %q, want %q", n, lg.stdout, want)
		}
	}

	// A third run has nothing to do.
	writeFile(t, runs, "")
	r = gs(t, "", "run", wf)
	r.want(t, 0)
	if got := readFile(t, runs); got != "" {
		t.Errorf("third run ran %q", got)
	}
	if !strings.Contains(r.stdout, "4 kept") {
		t.Errorf("summary of a run with nothing to do:\n%s", r.stdout)
	}
}

// While a run is going: status --json reads it (a running task), and a
// second run on the same directory fails at once naming the directory and
// the first's PID, without disturbing it.
func TestConcurrentRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "busy.yaml"), `
tasks:
  - id: hold
    args: `+sh(`echo hold >> runs.txt; touch started; i=0; while [ ! -f release ]; do i=$((i+1)); [ $i -gt 1000 ] && exit 9; sleep 0.02; done`)+`
  - id: after
    dependencies: [hold]
    args: `+sh(`echo after >> runs.txt`)+`
`)
	runDir := filepath.Join(dir, ".gpusched", "busy")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := command(ctx, "", "run", wf)
	var out, errb bytes.Buffer
	first.Stdout, first.Stderr = &out, &errb
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			writeFile(t, filepath.Join(dir, "release"), "")
			_ = first.Wait()
		}
	}()
	waitFor(t, 10*time.Second, "the first run's task to start", func() bool { return exists(filepath.Join(dir, "started")) })

	s := status(t, wf)
	hold := checkTask(t, s, "hold", "running", 1, "null")
	if hold.Ended != nil || hold.Started == nil {
		t.Errorf("running task: started %v, ended %v", hold.Started, hold.Ended)
	}
	checkTask(t, s, "after", "pending", 0, "null")
	if tr := gs(t, "", "status", wf); !strings.Contains(tr.stdout, "1 running") {
		t.Errorf("status table during the run:\n%s", tr.stdout)
	}

	second := gs(t, "", "run", wf)
	if second.code == 0 {
		t.Fatalf("a second run on a busy run directory succeeded:\n%s", second.stdout)
	}
	// It failed at once, not after waiting for the first run: hold still
	// runs (it ends only once this test writes the release file).
	if tk := checkTask(t, status(t, wf), "hold", "running", 1, "null"); tk.Ended != nil {
		t.Errorf("hold ended before the second run failed: %+v", tk)
	}
	// The lock names the first run's scheduler (its front's child).
	sched := schedulerPID(runDir)
	msg := oneLineError(t, second)
	if sched <= 0 || !strings.Contains(msg, runDir) || !strings.Contains(msg, "pid "+strconv.Itoa(sched)) {
		t.Errorf("second run's error %q does not name %s and pid %d", msg, runDir, sched)
	}

	writeFile(t, filepath.Join(dir, "release"), "")
	released = true
	err := first.Wait()
	if err != nil {
		t.Fatalf("first run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if got := strings.Fields(readFile(t, filepath.Join(dir, "runs.txt"))); !slices.Equal(got, []string{"hold", "after"}) {
		t.Errorf("tasks ran %v, want hold then after, once each", got)
	}
	s = status(t, wf)
	checkTask(t, s, "hold", "complete", 1, "0")
	checkTask(t, s, "after", "complete", 1, "0")
}

// SIGINT, SIGTERM or SIGHUP (a terminal closed, an SSH session dropped) to
// gpusched run: running tasks are stopped (SIGKILL after the kill grace for
// one that ignores SIGTERM), recorded cancelled, their process groups gone,
// and gpusched exits 1.
func TestSIGINT(t *testing.T) {
	t.Parallel()
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			testStopSignal(t, sig)
		})
	}
}

func testStopSignal(t *testing.T, sig os.Signal) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "sigint.yaml"), `
scheduling:
  kill_grace: 300ms
tasks:
  - id: long
    args: `+sleeper("-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")+`
  - id: next
    dependencies: [long]
    args: `+sleeper("-touch", "next-ran")+`
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, "", "run", wf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, pidfile, 2)
	// The attempt is recorded running (with its PID) before we interrupt.
	waitFor(t, 10*time.Second, "long to be recorded running", func() bool {
		s := status(t, wf)
		tk := s.task(t, "long")
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == pids[0]
	})
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("gpusched run after %s: %v, want exit code 1\nstdout:\n%s\nstderr:\n%s", sig, err, out.String(), errb.String())
	}
	if took < 250*time.Millisecond {
		t.Errorf("gpusched stopped %s after %s, before the 300ms kill grace of a task ignoring SIGTERM", took, sig)
	}
	if !strings.HasPrefix(errb.String(), "gpusched: ") || !strings.Contains(errb.String(), "stopping running tasks") {
		t.Errorf("stderr after %s: %q", sig, errb.String())
	}
	checkGone(t, pids[0], pids)

	s := status(t, wf)
	long := checkTask(t, s, "long", "cancelled", 1, "null")
	if len(long.History) == 1 && !long.History[0].Cancelled {
		t.Errorf("long's attempt is not marked cancelled: %+v", long.History[0])
	}
	next := s.task(t, "next")
	if next.Attempts != 0 || (next.State != "blocked" && next.State != "pending") {
		t.Errorf("next: state %s, %d attempts; want blocked or pending, never run", next.State, next.Attempts)
	}
	if exists(filepath.Join(dir, "next-ran")) {
		t.Error("next ran after the interrupt")
	}
}

// A scheduler killed outright (SIGKILL) leaves its attempt's process group
// running. The next run records the attempt interrupted, numbers the new one
// 2, and first stops the orphan so the task never runs twice at once.
func TestKilledScheduler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "crash.yaml"), `
tasks:
  - id: job
    args: `+sh(`echo $$ >> pids; if [ "$GPUSCHED_ATTEMPT" = 1 ]; then exec `+sleeperBin+` -sleep 1h; fi; echo second`)+`
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, "", "run", wf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	orphan := readPIDs(t, pidfile, 1)[0]
	t.Cleanup(func() { _ = syscall.Kill(-orphan, syscall.SIGKILL) })
	waitFor(t, 10*time.Second, "job to be recorded running", func() bool {
		tk := status(t, wf).task(t, "job")
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == orphan
	})
	// The scheduler dies, and so does the supervisor that watched the
	// attempt (a scheduler killed alone leaves its attempts to be adopted:
	// see adopt_e2e_test.go): the attempt's outcome is lost.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killSupervisor(t, status(t, wf).RunDir)

	r := gs(t, "", "run", wf)
	r.want(t, 0)
	tk := checkTask(t, status(t, wf), "job", "complete", 2, "0")
	if len(tk.History) == 2 && (!tk.History[0].Interrupted || tk.History[1].Interrupted) {
		t.Errorf("history: attempt 1 interrupted %v, attempt 2 interrupted %v; want true, false", tk.History[0].Interrupted, tk.History[1].Interrupted)
	}
	if lg := gs(t, "", "logs", wf, "job"); lg.stdout != "second\n" {
		t.Errorf("logs of attempt 2: %q", lg.stdout)
	}
	if alive(orphan) {
		t.Errorf("the attempt of the killed scheduler (pid %d, its own process group) is still running after the next run re-ran the task", orphan)
	}
}

// --help works for the command and every subcommand.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"},
		{"run", "--help"},
		{"validate", "--help"},
		{"status", "--help"},
		{"logs", "--help"},
		{"help", "run"},
		{"run", "-h"},
	} {
		r := gs(t, "", args...)
		r.want(t, 0)
		name := "gpusched"
		if args[0] != "--help" && args[0] != "help" {
			name += " " + args[0]
		} else if args[0] == "help" {
			name += " " + args[1]
		}
		if !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, name) || r.stderr != "" {
			t.Errorf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
	r := gs(t, "", "--help")
	for _, sub := range []string{"run", "validate", "status", "logs"} {
		if !strings.Contains(r.stdout, "  "+sub+" ") {
			t.Errorf("gpusched --help does not list %s:\n%s", sub, r.stdout)
		}
	}
}

// A state.db that is not gpusched's is refused by run, status and logs with
// a one-line error naming it, and left byte for byte as it was.
func TestForeignStateDB(t *testing.T) {
	t.Parallel()
	garbage := make([]byte, 8192)
	for i := range garbage {
		garbage[i] = byte(i*7 + i/13)
	}
	for _, tt := range []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) { writeFile(t, path, string(garbage)) }},
		{"short text", func(t *testing.T, path string) { writeFile(t, path, "this is not a database\n") }},
		{"another program's SQLite", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1), (2)`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wf := writeFile(t, filepath.Join(dir, "w.yaml"), "tasks:\n  - id: a\n    args: "+sleeper("-touch", "ran")+"\n")
			rd := filepath.Join(dir, "run")
			if err := os.MkdirAll(rd, 0o755); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(rd, "state.db")
			tt.write(t, db)
			orig := readFile(t, db)
			for _, args := range [][]string{
				{"run", wf, "--run-dir", rd},
				{"status", "--run-dir", rd},
				{"status", "--json", "--run-dir", rd},
				{"logs", "a", "--run-dir", rd},
			} {
				r := gs(t, dir, args...)
				if r.code == 0 {
					t.Errorf("%v succeeded on a foreign state.db:\n%s", args, r.stdout)
				}
				if msg := oneLineError(t, r); !strings.Contains(msg, db) {
					t.Errorf("%v: error %q does not name %s", args, msg, db)
				}
				if got := readFile(t, db); got != orig {
					t.Fatalf("%v changed state.db", args)
				}
			}
			if exists(filepath.Join(dir, "ran")) {
				t.Error("a task ran")
			}
			for _, f := range listTree(t, rd) {
				if f != "state.db" && f != "lock" {
					t.Errorf("unexpected file in the run directory: %s", f)
				}
			}
		})
	}
}

// A task whose working directory does not exist fails without running, and
// its error names the directory, not the program.
func TestMissingDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "nodir.yaml"), "tasks:\n  - id: a\n    dir: no/such/place\n    args: "+sleeper("-touch", "ran")+"\n")
	r := gs(t, "", "run", wf)
	r.want(t, 1)
	tk := checkTask(t, status(t, wf), "a", "failed", 1, "null")
	if exists(filepath.Join(dir, "no")) {
		t.Errorf("the missing dir was created")
	}
	if !strings.Contains(tk.Error, "no/such/place") {
		t.Errorf("the error for a missing working directory does not name it: %q", tk.Error)
	}
}

// killSupervisor kills, with SIGKILL, the supervisor of run directory dir
// (its PID is in supervisor.lock) and waits for it to be gone.
func killSupervisor(t *testing.T, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "supervisor.lock"))
	if err != nil {
		t.Fatal(err)
	}
	sup, err := strconv.Atoi(strings.TrimSpace(string(lock)))
	if err != nil || sup <= 0 {
		t.Fatalf("supervisor.lock holds %q, want its PID", lock)
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the supervisor %d: %v", sup, err)
	}
	waitFor(t, 10*time.Second, "the supervisor to be gone", func() bool { return !alive(sup) })
}
