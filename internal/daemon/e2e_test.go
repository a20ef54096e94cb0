package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/testbin"
)

// End-to-end tests: the real gpusched binary as daemon and as client, on
// short socket paths in temporary folders.

var gpuschedBin string

func TestMain(m *testing.M) {
	gpuschedBin = testbin.MustBuild("cmd/gpusched")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// world is a user's environment: XDG folders of its own, so that the
// default socket and state directory are the test's.
type world struct {
	dir    string
	socket string // the per-user socket
	state  string // the per-user state directory
	env    []string
	n      int // daemons started
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir, err := os.MkdirTemp("", "gse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &world{dir: dir, socket: filepath.Join(dir, "r", "gpusched", "gpusched.sock"), state: filepath.Join(dir, "st", "gpusched")}
	if err := os.Mkdir(filepath.Join(dir, "r"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GPUSCHED_SOCKET" && !strings.HasPrefix(k, "XDG_") {
			w.env = append(w.env, kv)
		}
	}
	w.env = append(w.env, "XDG_RUNTIME_DIR="+filepath.Join(dir, "r"), "XDG_STATE_HOME="+filepath.Join(dir, "st"))
	return w
}

// daemon is a daemon process started by a test.
type daemon struct {
	socket string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// start starts gpusched daemon with args, and waits until it answers on
// the world's socket. It is killed (its tasks too) when the test ends.
// flags gives what a test's tasks use to wait for it: file names a flag
// file in the world's folder, touch raises one, until is the shell loop
// that waits for one (to start a script with), sh runs a script.
func (w *world) flags(t *testing.T) (file func(string) string, touch func(string), until func(string) string, sh func(string) []string) {
	file = func(name string) string { return filepath.Join(w.dir, name) }
	touch = func(name string) {
		t.Helper()
		if err := os.WriteFile(file(name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	until = func(name string) string { return "until [ -e " + file(name) + " ]; do sleep 0.02; done; " }
	sh = func(script string) []string { return []string{"sh", "-c", script} }
	return file, touch, until, sh
}

func (w *world) start(t *testing.T, args ...string) *daemon {
	t.Helper()
	w.n++
	d := &daemon{socket: w.socket, exited: make(chan struct{}), log: filepath.Join(w.dir, fmt.Sprintf("daemon-%d.log", w.n))}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(gpuschedBin, append([]string{"daemon"}, args...)...)
	d.cmd.Env, d.cmd.Stdout, d.cmd.Stderr = w.env, logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { w.stopAll(d) })
	w.waitUp(t, d)
	return d
}

// waitUp waits until a daemon answers on the world's socket.
func (w *world) waitUp(t *testing.T, d *daemon) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := client.Dial(context.Background(), w.socket)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-d.exited:
			b, _ := os.ReadFile(d.log)
			t.Fatalf("daemon exited: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon does not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopAll stops a daemon and its tasks, whatever state it is in.
func (w *world) stopAll(d *daemon) {
	select {
	case <-d.exited:
	default:
		if c, err := client.Dial(context.Background(), d.socket); err == nil {
			c.Shutdown(context.Background(), true)
			c.Close()
		}
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
}

// kill9 kills a daemon as a crash would.
func (d *daemon) kill9(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
}

// gs runs the gpusched command in the world, from folder dir, with extra
// environment variables.
func (w *world) gs(t *testing.T, dir string, extra []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(gpuschedBin, args...)
	cmd.Env, cmd.Dir = append(slices.Clone(w.env), extra...), dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func (w *world) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), w.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitState polls the queue until task id is in state.
func waitState(t *testing.T, c *client.Client, id, state string) client.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := c.Queue(context.Background(), client.QueueOptions{IDs: []string{id}})
		if err == nil && len(q) == 1 && q[0].State == state {
			return q[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %+v (%v), want %s", id, q, err, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// submit, queue, wait, logs, cancel and stop through the command line,
// the daemon started by the first submit.
func TestCommandLineRoundTrip(t *testing.T) {
	w := newWorld(t)
	work := filepath.Join(w.dir, "work")
	os.Mkdir(work, 0o755)
	out, errOut, code := w.gs(t, work, []string{"ONLY_HERE=1"}, "submit", "--", "sh", "-c", `echo "hi $ONLY_HERE $(pwd)"`)
	if code != 0 || out != "1\n" || !strings.Contains(errOut, "started a daemon") {
		t.Fatalf("first submit: %q %q %d", out, errOut, code)
	}
	var d *daemon
	t.Cleanup(func() {
		if _, _, code := w.gs(t, "/", nil, "daemon", "stop", "--kill-tasks"); code != 0 {
			t.Errorf("daemon stop --kill-tasks: exit %d", code)
		}
	})
	_ = d
	out, _, code = w.gs(t, work, nil, "submit", "--after", "1", "--json", "--", "sh", "-c", "echo two; exit 4")
	var js struct{ ID, Run string }
	if json.Unmarshal([]byte(out), &js) != nil || js.ID != "2" || js.Run != "2" || code != 0 {
		t.Fatalf("submit --json: %q %d", out, code)
	}
	_, errOut, code = w.gs(t, work, nil, "wait", "1", "2")
	if code != 1 || !strings.Contains(errOut, "task 2 failed (exit code 4)") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("wait 1 2: %q, exit %d", errOut, code)
	}
	out, _, _ = w.gs(t, "/", nil, "logs", "1")
	if want := "hi 1 " + work + "\n"; out != want {
		t.Errorf("logs 1: %q, want %q (the submitter's environment and folder)", out, want)
	}

	// A workflow: a run whose tasks are RUN/TASK, dirs relative to it.
	wf := filepath.Join(work, "wf.yaml")
	os.WriteFile(wf, []byte("tasks:\n  - id: a\n    args: [sh, -c, 'echo a > a.txt']\n  - id: b\n    dependencies: [a]\n    args: [cat, a.txt]\n"), 0o644)
	out, _, code = w.gs(t, "/", nil, "submit", wf)
	if code != 0 || out != "3\n" {
		t.Fatalf("submit wf.yaml: %q %d", out, code)
	}
	if _, errOut, code := w.gs(t, "/", nil, "wait", "3"); code != 0 {
		t.Fatalf("wait 3: %s", errOut)
	}
	if out, _, _ := w.gs(t, "/", nil, "logs", "3/b"); out != "a\n" {
		t.Errorf("logs 3/b: %q", out)
	}

	// Cancel a running task; its dependent is blocked.
	if out, _, _ = w.gs(t, "/", nil, "submit", "--name", "long", "--", "sleep", "60"); out != "4\n" {
		t.Fatalf("submit sleep 60: %q, want 4", out)
	}
	w.gs(t, "/", nil, "submit", "--after", "4", "--", "true")
	c := w.client(t)
	waitState(t, c, "4", "running")
	out, errOut, code = w.gs(t, "/", nil, "queue")
	if code != 0 || !strings.Contains(out, "sleep 60") || !strings.Contains(out, "pending: after 4") {
		t.Errorf("queue:\n%s%s", out, errOut)
	}
	out, _, code = w.gs(t, "/", nil, "cancel", "4")
	if code != 0 || out != "4\n" {
		t.Errorf("cancel 4: %q %d", out, code)
	}
	_, errOut, code = w.gs(t, "/", nil, "wait", "5")
	if code != 1 || !strings.Contains(errOut, "task 5 blocked by 4") {
		t.Errorf("wait 5: %q %d", errOut, code)
	}
	out, _, _ = w.gs(t, "/", nil, "queue", "--all", "--json")
	var q client.Queue
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range q.Tasks {
		got = append(got, tk.ID+"="+tk.State)
	}
	if want := "1=complete 2=failed 3/a=complete 3/b=complete 4=cancelled 5=blocked"; strings.Join(got, " ") != want {
		t.Errorf("queue --all --json: %s, want %s", strings.Join(got, " "), want)
	}
	// Errors name the task or run, on one line; a bad id is invalid input.
	_, errOut, code = w.gs(t, "/", nil, "cancel", "9")
	if code != 2 || errOut != "gpusched: cancel 9: no run 9\n" {
		t.Errorf("cancel 9: %q %d", errOut, code)
	}
	_, errOut, code = w.gs(t, "/", nil, "logs", "3")
	if code != 2 || !strings.Contains(errOut, "run 3 has 2 tasks: name one (3/a, 3/b...)") {
		t.Errorf("logs 3: %q %d", errOut, code)
	}
	// The daemon refuses a second daemon on its state directory at once.
	_, errOut, code = w.gs(t, "/", nil, "daemon", "--socket", filepath.Join(w.dir, "other.sock"))
	if code != 1 || !strings.Contains(errOut, "is in use by a gpusched daemon (pid ") {
		t.Errorf("second daemon: %q %d", errOut, code)
	}
}

// 100 submitters at once, 100 tasks each: every task runs exactly once,
// and the queue shows them all.
func TestConcurrentSubmitters(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 tasks")
	}
	w := newWorld(t)
	w.start(t, "-j", "8")
	out := filepath.Join(w.dir, "out")
	const submitters, each = 100, 100
	runs := make([][]string, submitters)
	errs := make(chan error, submitters)
	var wg sync.WaitGroup
	for i := range submitters {
		wg.Go(func() {
			c, err := client.Dial(context.Background(), w.socket)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for j := range each {
				s, err := c.Submit(context.Background(), client.Command{Args: []string{"/bin/sh", "-c", `echo "$0" >> ` + out, fmt.Sprintf("%d-%d", i, j)},
					Env: map[string]string{}, Dir: w.dir})
				if err != nil {
					errs <- err
					return
				}
				runs[i] = append(runs[i], s.Run)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r...)
	}
	c := w.client(t)
	ended, err := c.Wait(context.Background(), ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ended {
		if e.State != "complete" {
			t.Fatalf("task %s: %s", e.ID, e.State)
		}
	}
	b, _ := os.ReadFile(out)
	lines := strings.Fields(string(b))
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	if len(lines) != submitters*each || len(seen) != submitters*each {
		t.Fatalf("%d lines, %d distinct, want %d of each", len(lines), len(seen), submitters*each)
	}
	q, err := c.Queue(context.Background(), client.QueueOptions{All: true})
	if err != nil || len(q) != submitters*each || len(ended) != submitters*each {
		t.Fatalf("queue --all: %d tasks (%v), wait: %d", len(q), err, len(ended))
	}
}

// A daemon killed with kill -9 mid-run: its running task is adopted by the
// next one and finishes once; the pending ones run after the restart; a
// client waiting meanwhile reconnects and sees them end.
func TestKill9AdoptsAndGoesOn(t *testing.T) {
	w := newWorld(t)
	d := w.start(t, "-j", "1")
	c := w.client(t)
	out, gate := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "go")
	long := fmt.Sprintf(`echo A >> %s; while [ ! -e %s ]; do sleep 0.05; done; echo A-end >> %s`, out, gate, out)
	env := map[string]string{"PATH": os.Getenv("PATH")}
	for _, script := range []string{long, "echo B >> " + out, "echo C >> " + out} {
		if _, err := c.Submit(context.Background(), client.Command{Args: []string{"sh", "-c", script}, Env: env, Dir: w.dir}); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, c, "1", "running")
	waitFile(t, out)
	type result struct {
		tasks []client.TaskInfo
		err   error
	}
	waited := make(chan result, 1)
	go func() {
		f, err := client.Dial(context.Background(), w.socket)
		if err != nil {
			waited <- result{nil, err}
			return
		}
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		tasks, err := f.Wait(ctx, []string{"1", "2", "3"}, nil)
		waited <- result{tasks, err}
	}()
	time.Sleep(100 * time.Millisecond) // the wait is following (not needed for correctness)
	d.kill9(t)
	w.start(t, "-j", "1")
	c2 := w.client(t)
	if ti := waitState(t, c2, "1", "running"); ti.Attempts != 1 {
		t.Errorf("task 1 after the restart: %d attempts, want its first, adopted", ti.Attempts)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-waited
	if r.err != nil {
		t.Fatalf("wait across the restart: %v", r.err)
	}
	var states []string
	for _, tk := range r.tasks {
		states = append(states, tk.ID+"="+tk.State+"/"+strconv.Itoa(tk.Attempts))
	}
	slices.Sort(states)
	if want := "1=complete/1 2=complete/1 3=complete/1"; strings.Join(states, " ") != want {
		t.Errorf("after the restart: %v, want %s", states, want)
	}
	b, _ := os.ReadFile(out)
	if string(b) != "A\nA-end\nB\nC\n" {
		t.Errorf("out: %q, want each task once, in order", b)
	}
}

// A client killed while following a task's log: the task goes on.
func TestClientKilledWhileFollowing(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	c := w.client(t)
	gate := filepath.Join(w.dir, "go")
	s, err := c.Submit(context.Background(), client.Command{Args: []string{"sh", "-c", "echo started; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo done"},
		Env: map[string]string{"PATH": os.Getenv("PATH")}, Dir: w.dir})
	if err != nil {
		t.Fatal(err)
	}
	follower := exec.Command(gpuschedBin, "logs", "-f", s.Run)
	follower.Env = w.env
	stdout, _ := follower.StdoutPipe()
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("started\n"))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "started\n" {
		t.Fatalf("follower read %q, %v", line, err)
	}
	follower.Process.Kill()
	follower.Wait()
	os.WriteFile(gate, nil, 0o644)
	tasks, err := c.Wait(context.Background(), []string{s.Run}, nil)
	if err != nil || len(tasks) != 1 || tasks[0].State != "complete" {
		t.Fatalf("after the follower died: %+v, %v", tasks, err)
	}
	var log strings.Builder
	if _, err := c.Logs(context.Background(), s.Run, client.LogOptions{}, &log); err != nil || log.String() != "started\ndone\n" {
		t.Errorf("log %q, %v", log.String(), err)
	}
}

// The owner of a request is who the kernel says is on the other end of
// the socket. As root, the test connects as nobody (uid 65534).
func TestOtherUserOverTheSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	const nobody = 65534
	w := newWorld(t)
	open := filepath.Join(w.dir, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(w.dir, 0o755)
	bin := filepath.Join(open, "gpusched")
	b, _ := os.ReadFile(gpuschedBin)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "HOME=/"}, "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	for _, system := range []bool{false, true} {
		sock := filepath.Join(open, fmt.Sprintf("s%v", system))
		args := []string{"--socket", sock, "--state-dir", filepath.Join(w.dir, fmt.Sprintf("state-%v", system))}
		if system {
			args = append(args, "--system")
		}
		w.socket = sock
		w.start(t, args...)
		os.Chmod(sock, 0o666) // let nobody connect (the system socket's group would)
		c := w.client(t)
		if _, err := c.Submit(context.Background(), client.Command{Args: []string{"sleep", "30"}, Name: "secret"}); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := asNobody("queue", "--socket", sock)
		if !system {
			if code != 1 || !strings.Contains(errOut, "this is root's own gpusched daemon") {
				t.Errorf("nobody on root's own daemon: %q %d", errOut, code)
			}
			continue
		}
		out, _, code := asNobody("queue", "--json", "--socket", sock)
		var q client.Queue
		if err := json.Unmarshal([]byte(out), &q); err != nil || code != 0 || len(q.Tasks) != 1 || q.Tasks[0].Owner != "root" || q.Tasks[0].Command != nil {
			t.Errorf("nobody's queue of the system daemon: %q %d: want root's task, without its command", out, code)
		}
		for _, args := range [][]string{{"cancel", "1"}, {"logs", "1"}, {"pause", "1"}, {"pause", "--stop", "1"}, {"resume", "1"}, {"retry", "1"}} {
			_, errOut, code := asNobody(append(args, "--socket", sock)...)
			if code != 1 || !strings.Contains(errOut, "task 1 belongs to root: only they and root may") {
				t.Errorf("nobody %v: %q %d", args, errOut, code)
			}
		}
		// Without ids, pause is of nobody's own tasks: none.
		if out, errOut, code := asNobody("pause", "--socket", sock); out != "" || code != 0 {
			t.Errorf("nobody pauses all of theirs: %q %q %d, want nothing paused", out, errOut, code)
		}
		if q, err := c.Queue(context.Background(), client.QueueOptions{IDs: []string{"1"}}); err != nil || len(q) != 1 || q[0].Paused {
			t.Errorf("root's task after nobody's pauses: %+v, %v; want not paused", q, err)
		}
		out, errOut, code = asNobody("submit", "--socket", sock, "--", "true")
		if code != 0 || strings.TrimSpace(out) != "2" {
			t.Errorf("nobody submits to the system daemon: %q %q %d, want run 2", out, errOut, code)
		}
		_, errOut, code = asNobody("daemon", "stop", "--socket", sock)
		if code != 1 || !strings.Contains(errOut, "only root may stop this daemon") {
			t.Errorf("nobody stops the system daemon: %q %d", errOut, code)
		}
	}
}

// A client of another API version says what runs where.
func TestCommandLineVersionSkew(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(w.dir, "fake")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		json.NewEncoder(rw).Encode(client.Version{Build: "v9", APIMin: 5, APIMax: 6, PID: 4242})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	_, errOut, code := w.gs(t, "/", nil, "queue", "--socket", path)
	if code != 1 || !strings.Contains(errOut, "serves API versions 5 to 6, and this client speaks 1") || !strings.Contains(errOut, "this is gpusched ") {
		t.Errorf("queue on a daemon of another version: %q %d", errOut, code)
	}
}

// A daemon stopped without --kill-tasks leaves its running task to the
// next, which also shows what had finished, waits for it at once, and
// takes a task after a completed one but not after a failed one. A
// followed log goes on across a retry.
func TestRestartKeepsHistory(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	c := w.client(t)
	ctx := context.Background()
	env := map[string]string{"PATH": os.Getenv("PATH")}
	gate, marker := filepath.Join(w.dir, "go"), filepath.Join(w.dir, "marker")
	retries := 1
	for _, cmd := range []client.Command{
		{Args: []string{"true"}},
		{Args: []string{"false"}},
		{Args: []string{"sh", "-c", "while [ ! -e " + gate + " ]; do sleep 0.05; done"}},
		{Args: []string{"sh", "-c", "if [ -e " + marker + " ]; then echo second; else touch " + marker + "; echo first; exit 1; fi"}, Retries: &retries},
	} {
		cmd.Env, cmd.Dir = env, w.dir
		if _, err := c.Submit(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	if state, err := c.Logs(ctx, "4", client.LogOptions{Follow: true}, &log); err != nil || state != "complete" || log.String() != "first\n--- attempt 2 ---\nsecond\n" {
		t.Errorf("logs -f across a retry: %q, %q, %v", log.String(), state, err)
	}
	c.Wait(ctx, []string{"1", "2"}, nil)
	waitState(t, c, "3", "running")
	if _, _, code := w.gs(t, "/", nil, "daemon", "stop"); code != 0 {
		t.Fatal("daemon stop failed")
	}
	w.start(t)
	c = w.client(t)
	q, err := c.Queue(ctx, client.QueueOptions{All: true})
	var got []string
	for _, tk := range q {
		got = append(got, tk.ID+"="+tk.State)
	}
	if err != nil || strings.Join(got, " ") != "1=complete 2=failed 3=running 4=complete" {
		t.Errorf("queue after the restart: %v %v", got, err)
	}
	if _, err := c.Submit(ctx, client.Command{Args: []string{"true"}, After: []string{"1", "3"}, Env: env}); err != nil {
		t.Errorf("after a task completed before the restart: %v", err)
	}
	if _, err := c.Submit(ctx, client.Command{Args: []string{"true"}, After: []string{"2"}, Env: env}); err == nil || !strings.Contains(err.Error(), "task 2 failed") {
		t.Errorf("after a task failed before the restart: %v", err)
	}
	os.WriteFile(gate, nil, 0o644)
	ended, err := c.Wait(ctx, []string{"1", "2", "3", "5"}, nil)
	states := map[string]string{}
	for _, e := range ended {
		states[e.ID] = e.State
	}
	if err != nil || states["1"] != "complete" || states["2"] != "failed" || states["3"] != "complete" || states["5"] != "complete" {
		t.Errorf("wait after the restart: %v %v", states, err)
	}
}
