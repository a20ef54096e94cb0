package cli_test

// End-to-end tests of "gpusched run" through a daemon: a real daemon on a
// short socket path in a temporary folder, the real gpusched as client.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
)

// testDaemon is a daemon started by a test, with an environment of its
// own: XDG folders in its temporary folder (so that no per-user daemon of
// the machine is found) and no $GPUSCHED_SOCKET.
type testDaemon struct {
	dir    string
	socket string
	env    []string
	exited chan struct{}
}

func startTestDaemon(t *testing.T) *testDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "gsr") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &testDaemon{dir: dir, socket: filepath.Join(dir, "d.sock"), exited: make(chan struct{})}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GPUSCHED_SOCKET" && !strings.HasPrefix(k, "XDG_") {
			d.env = append(d.env, kv)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "r"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.env = append(d.env, "XDG_RUNTIME_DIR="+filepath.Join(dir, "r"), "XDG_STATE_HOME="+filepath.Join(dir, "st"))
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gpuschedBin, "daemon", "--socket", d.socket, "--state-dir", filepath.Join(dir, "state"))
	cmd.Env, cmd.Stdout, cmd.Stderr = d.env, logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	go func() { cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		if c, err := client.Dial(context.Background(), d.socket); err == nil {
			c.Shutdown(context.Background(), true)
			c.Close()
		}
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-d.exited
		}
	})
	waitFor(t, 20*time.Second, "the daemon to answer", func() bool {
		select {
		case <-d.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
			t.Fatalf("the daemon exited: %s", b)
		default:
		}
		c, err := client.Dial(context.Background(), d.socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return d
}

// command is gpusched with args, in dir, in the daemon's environment plus
// extra.
func (d *testDaemon) command(ctx context.Context, dir string, extra []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, gpuschedBin, args...)
	cmd.Dir, cmd.Env = dir, append(slices.Clone(d.env), extra...)
	return cmd
}

// gs runs gpusched to the end in the daemon's environment plus extra.
func (d *testDaemon) gs(t *testing.T, dir string, extra []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return finish(t, ctx, d.command(ctx, dir, extra, args...), args)
}

// queue returns the daemon's tasks, finished ones too, as queue --json
// prints them.
func (d *testDaemon) queue(t *testing.T) []client.TaskInfo {
	t.Helper()
	r := d.gs(t, "", nil, "queue", "--json", "--all", "--socket", d.socket)
	r.want(t, 0)
	var q client.Queue
	if err := json.Unmarshal([]byte(r.stdout), &q); err != nil {
		t.Fatalf("queue --json: %v\n%s", err, r.stdout)
	}
	return q.Tasks
}

func states(tasks []client.TaskInfo) map[string]string {
	m := map[string]string{}
	for _, t := range tasks {
		m[t.ID] = t.State
	}
	return m
}

// A workflow of two tasks through the daemon: exit 0, the run's id on
// stderr, run's summary on stdout, both tasks complete in the daemon's
// queue, and no run directory beside the workflow.
func TestRunDaemonCompletes(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: a
    args: `+sh("echo from-a > a.out")+`
  - id: b
    dependencies: [a]
    args: `+sh("cat a.out > b.out")+`
`)
	r := d.gs(t, dir, nil, "run", "--daemon", "--socket", d.socket, wf)
	r.want(t, 0)
	if !strings.Contains(r.stderr, "gpusched: submitted run 1 to the daemon at "+d.socket) {
		t.Errorf("stderr does not give the run's id:\n%s", r.stderr)
	}
	for _, want := range []string{"start     1/a", "complete  1/b", "2 tasks in", ": 2 complete\n", "run 1 on the daemon at " + d.socket} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := states(d.queue(t)); got["1/a"] != "complete" || got["1/b"] != "complete" || len(got) != 2 {
		t.Errorf("the daemon's tasks: %v; want 1/a and 1/b complete", got)
	}
	if got := readFile(t, filepath.Join(dir, "b.out")); got != "from-a\n" {
		t.Errorf("b.out = %q: b did not run in the workflow's folder after a", got)
	}
	if exists(filepath.Join(dir, ".gpusched")) {
		t.Errorf("a run through the daemon made a run directory beside the workflow")
	}
}

// A task that fails: exit 1, and the summary names it with its exit code
// and the end of its log, read from the daemon.
func TestRunDaemonFailure(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: ok
    args: ['true']
  - id: bad
    retries: 0
    args: `+sh("echo the-last-words; exit 3")+`
  - id: after
    dependencies: [bad]
    args: ['true']
`)
	r := d.gs(t, dir, nil, "run", "--daemon", "--socket", d.socket, wf)
	r.want(t, 1)
	for _, want := range []string{"failed  1/bad: exit code 3 after 1 attempt(s); gpusched logs 1/bad", "    | the-last-words", "blocked 1/after: by 1/bad", "1 complete, 1 failed, 1 blocked"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := states(d.queue(t)); got["1/ok"] != "complete" || got["1/bad"] != "failed" || got["1/after"] != "blocked" {
		t.Errorf("the daemon's tasks: %v", got)
	}
}

// An invalid workflow, or a flag that means nothing through the daemon:
// exit 2 with the one-line error run gives in this process, and nothing
// is queued.
func TestRunDaemonInvalid(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: a
    dependencies: [nope]
    args: ['true']
`)
	local := d.gs(t, dir, nil, "run", "--local", wf)
	local.want(t, 2)
	r := d.gs(t, dir, nil, "run", "--daemon", "--socket", d.socket, wf)
	r.want(t, 2)
	if got, want := oneLineError(t, r), oneLineError(t, local); got != want {
		t.Errorf("through the daemon: %q\nin this process:  %q", got, want)
	}
	good := writeFile(t, filepath.Join(dir, "good.yaml"), "tasks:\n  - id: a\n    args: ['true']\n")
	r = d.gs(t, dir, nil, "run", "--daemon", "--socket", d.socket, "--run-dir", filepath.Join(dir, "rd"), good)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "--run-dir") || !strings.Contains(msg, "--local") {
		t.Errorf("--run-dir through the daemon: %q", msg)
	}
	if q := d.queue(t); len(q) != 0 {
		t.Errorf("the daemon queued %d tasks; want none", len(q))
	}
}

// With $GPUSCHED_SOCKET set, run goes through that daemon and says so;
// with --local it runs in this process, in its run directory, and warns
// that GPU budgets are not shared.
func TestRunRoutesThroughSocketEnv(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    args: ['true']\n")
	env := []string{"GPUSCHED_SOCKET=" + d.socket}

	r := d.gs(t, dir, env, "run", wf)
	r.want(t, 0)
	if want := "gpusched: running through the daemon at " + d.socket + " (--local to run in this process)\n"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr does not begin with %q:\n%s", want, r.stderr)
	}
	if got := states(d.queue(t)); got["1/a"] != "complete" || len(got) != 1 {
		t.Errorf("the daemon's tasks: %v; want 1/a complete", got)
	}

	runDir := filepath.Join(dir, "rd")
	r = d.gs(t, dir, env, "run", "--local", "--run-dir", runDir, wf)
	r.want(t, 0)
	if want := "gpusched: --local: the gpusched daemon at " + d.socket + " is up; GPU budgets are not shared with its tasks\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	if strings.Count(r.stderr, "GPU budgets are not shared") != 1 {
		t.Errorf("the warning is not said once:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "running through the daemon") {
		t.Errorf("--local went through the daemon:\n%s", r.stderr)
	}
	if !exists(filepath.Join(runDir, "state.db")) {
		t.Errorf("--local made no run directory at %s", runDir)
	}
	if n := len(d.queue(t)); n != 1 {
		t.Errorf("the daemon has %d tasks after the --local run; want 1 (the first run's)", n)
	}
}

// SIGINT to "run --daemon" cancels that run's running task, and exits 1;
// another run's task on the same daemon keeps running.
func TestRunDaemonSIGINT(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	other := d.gs(t, dir, nil, "submit", "--socket", d.socket, "--", sleeperBin, "-sleep", "1m")
	other.want(t, 0)
	otherID := strings.TrimSpace(other.stdout)
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: slow\n    args: "+sleeper("-sleep", "1m")+"\n")
	run := startBackground(t, func(ctx context.Context) *exec.Cmd {
		return d.command(ctx, dir, nil, "run", "--daemon", "--socket", d.socket, wf)
	})
	waitFor(t, 30*time.Second, "both tasks to run", func() bool {
		s := states(d.queue(t))
		return s[otherID] == "running" && s["2/slow"] == "running"
	})
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := run.wait(t)
	r.want(t, 1)
	s := states(d.queue(t))
	if s["2/slow"] != "cancelled" || s[otherID] != "running" {
		t.Errorf("after SIGINT: 2/slow %s, %s %s; want cancelled and running\nstderr:\n%s", s["2/slow"], otherID, s[otherID], r.stderr)
	}
	if !strings.Contains(r.stderr, "cancelling the tasks of run 2 on the daemon") && !strings.Contains(r.stdout, "cancelling the tasks of run 2 on the daemon") {
		t.Errorf("run does not say it cancels run 2:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "1 cancelled") {
		t.Errorf("the summary does not count the cancelled task:\n%s", r.stdout)
	}
}
