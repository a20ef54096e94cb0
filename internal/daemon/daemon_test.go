package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpusched "github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// shortDir is a temporary folder with a short path: a socket's path must
// fit in 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testDaemon is a daemon running in the test's process.
type testDaemon struct {
	*Daemon
	socket string
	client *client.Client
}

// newTestDaemon starts a daemon in this process on a fresh state
// directory; it is stopped, its tasks killed, when the test ends.
func newTestDaemon(t *testing.T, cfg Config) *testDaemon {
	t.Helper()
	dir := shortDir(t)
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "s")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(dir, "state")
	}
	cfg.Log = io.Discard
	d, sock, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx, sock) }()
	t.Cleanup(func() {
		cancel()
		<-done
		d.sched.Close()
		d.runs.close()
	})
	c, err := client.Dial(context.Background(), cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &testDaemon{Daemon: d, socket: cfg.Socket, client: c}
}

// as sends a request to the daemon's handler as peer p, with no socket:
// the seam for users a test cannot be.
func (d *testDaemon) as(t *testing.T, p peer, method, target string, body any) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req := httptest.NewRequest(method, target, r)
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, p))
	rec := httptest.NewRecorder()
	d.handler().ServeHTTP(rec, req)
	return rec
}

func errorOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e client.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || strings.Count(rec.Body.String(), "\n") != 1 {
		t.Fatalf("status %d, body %q: want a one-line JSON error", rec.Code, rec.Body)
	}
	return e.Error
}

func cmd(args ...string) client.Command {
	return client.Command{Args: args, Env: map[string]string{"PATH": os.Getenv("PATH")}, Dir: "/"}
}

// Ids: a command run is its number, a workflow's tasks RUN/TASK; every id
// printed is accepted, a run's id means all its tasks, and dependencies
// across runs follow --after.
func TestIDsAndRoundTrip(t *testing.T) {
	d := newTestDaemon(t, Config{})
	ctx := context.Background()
	dir := shortDir(t)
	one, err := d.client.Submit(ctx, cmd("sh", "-c", "echo one >> "+dir+"/out"))
	if err != nil {
		t.Fatal(err)
	}
	if one.Run != "1" || len(one.Tasks) != 1 || one.Tasks[0] != "1" {
		t.Fatalf("command run: %+v, want run 1 with task 1", one)
	}
	wf, err := d.client.SubmitWorkflow(ctx, client.Workflow{Name: "wf.yaml", Dir: dir, Env: map[string]string{"PATH": os.Getenv("PATH")},
		Tasks: []client.Task{
			{ID: "a", Command: []string{"sh", "-c", "echo a >> out"}, After: []string{"1"}},
			{ID: "b", Command: []string{"sh", "-c", "echo b >> out; exit 3"}, Dependencies: []string{"a"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if wf.Run != "2" || strings.Join(wf.Tasks, " ") != "2/a 2/b" {
		t.Fatalf("workflow run: %+v", wf)
	}
	ended, err := d.client.Wait(ctx, []string{"2", "1/cmd"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range ended {
		states[e.ID] = e.State
	}
	if len(states) != 3 || states["1"] != "complete" || states["2/a"] != "complete" || states["2/b"] != "failed" {
		t.Fatalf("ended %v", states)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); string(b) != "one\na\nb\n" {
		t.Errorf("out holds %q, want one, a, b in dependency order", b)
	}
	var log strings.Builder
	state, err := d.client.Logs(ctx, "2/b", client.LogOptions{}, &log)
	if err != nil || state != "failed" || log.String() != "" {
		t.Errorf("logs 2/b: %q, %q, %v", log.String(), state, err)
	}
	q, err := d.client.Queue(ctx, client.QueueOptions{IDs: []string{"2/b"}})
	if err != nil || len(q) != 1 || *q[0].ExitCode != 3 || q[0].Run != "2" || q[0].Name != "wf.yaml" {
		t.Errorf("queue 2/b: %+v, %v", q, err)
	}
	for _, bad := range []string{"x", "0", "1/a/b", "3", "2/zz", "-1"} {
		_, err := d.client.Queue(ctx, client.QueueOptions{IDs: []string{bad}})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status/100 != 4 {
			t.Errorf("id %q: %v, want a 4xx", bad, err)
		}
	}
	if _, err := d.client.Submit(ctx, client.Command{Args: []string{"true"}, After: []string{"9"}}); err == nil || !strings.Contains(err.Error(), "no run 9") {
		t.Errorf("after an unknown run: %v", err)
	}
}

// A submission with a key made twice makes one run.
func TestSubmitKey(t *testing.T) {
	d := newTestDaemon(t, Config{})
	ctx := context.Background()
	a, err := d.client.Submit(ctx, client.Command{Args: []string{"true"}, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.client.Submit(ctx, client.Command{Args: []string{"true"}, Key: "k"})
	if err != nil || b.Run != a.Run {
		t.Fatalf("same key again: %+v, %v; want run %s", b, err, a.Run)
	}
	runs, _ := d.client.Runs(ctx)
	if len(runs) != 1 {
		t.Errorf("%d runs, want 1", len(runs))
	}
}

// Only a task's owner and root may cancel it or read its command and
// logs; everyone sees its name, owner and state. (Other users are
// injected at the handler: see TestOtherUserOverTheSocket for a real one.)
func TestOwnership(t *testing.T) {
	d := newTestDaemon(t, Config{})
	d.cfg.System, d.runAsAnyone = true, true
	alice, bob, root := peer{uid: 1000}, peer{uid: 1001}, peer{uid: 0}
	rec := d.as(t, alice, "POST", "/v1/runs", client.RunRequest{Kind: client.KindCommand, Name: "secret-job",
		Tasks: []client.Task{{Command: []string{"sleep", "30"}}}})
	if rec.Code != 200 {
		t.Fatalf("alice submits: %d %s", rec.Code, rec.Body)
	}
	rec = d.as(t, bob, "GET", "/v1/tasks", nil)
	var q client.Queue
	if err := json.Unmarshal(rec.Body.Bytes(), &q); err != nil || len(q.Tasks) != 1 {
		t.Fatalf("bob's queue: %s", rec.Body)
	}
	if tk := q.Tasks[0]; tk.UID != 1000 || tk.Name != "secret-job" || tk.Command != nil || tk.Dir != "" {
		t.Errorf("bob sees %+v: want the name and owner, not the command", tk)
	}
	for _, c := range []struct{ method, target string }{{"POST", "/v1/cancel"}, {"GET", "/v1/logs?id=1"}} {
		var body any
		if c.method == "POST" {
			body = client.CancelRequest{IDs: []string{"1"}}
		}
		rec = d.as(t, bob, c.method, c.target, body)
		if msg := errorOf(t, rec); rec.Code != 403 || !strings.Contains(msg, "task 1 belongs to") {
			t.Errorf("bob %s %s: %d %s", c.method, c.target, rec.Code, msg)
		}
	}
	rec = d.as(t, bob, "POST", "/v1/shutdown", nil)
	if rec.Code != 403 {
		t.Errorf("bob stops the system daemon: %d", rec.Code)
	}
	rec = d.as(t, alice, "GET", "/v1/tasks", nil)
	_ = json.Unmarshal(rec.Body.Bytes(), &q)
	if len(q.Tasks) != 1 || strings.Join(q.Tasks[0].Command, " ") != "sleep 30" {
		t.Errorf("alice sees %+v: want her command", q.Tasks)
	}
	rec = d.as(t, root, "POST", "/v1/cancel", client.CancelRequest{IDs: []string{"1"}})
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"1"`) {
		t.Errorf("root cancels: %d %s", rec.Code, rec.Body)
	}
	// A daemon that is not root takes tasks from its own user only: it
	// cannot run them as anyone else.
	d.runAsAnyone, d.uid = false, 4321
	rec = d.as(t, alice, "POST", "/v1/runs", client.RunRequest{Kind: client.KindCommand, Tasks: []client.Task{{Command: []string{"true"}}}})
	if msg := errorOf(t, rec); rec.Code != 403 || !strings.Contains(msg, "not root, so it cannot run tasks as") {
		t.Errorf("alice submits to a daemon that cannot run as her: %d %s", rec.Code, msg)
	}
}

// A per-user daemon serves its own user alone; root may ask its version
// and stop it, nothing else.
func TestPerUserDaemonServesItsUser(t *testing.T) {
	d := newTestDaemon(t, Config{})
	d.uid = 1000 // as if alice ran it
	for _, c := range []struct {
		p      peer
		method string
		target string
		want   int
	}{
		{peer{uid: 1001}, "GET", "/v1/tasks", 403},
		{peer{uid: 1001}, "GET", "/v1/version", 200},
		{peer{uid: 1001}, "POST", "/v1/shutdown", 403},
		{peer{uid: 0}, "GET", "/v1/tasks", 403},
		{peer{uid: 1000}, "GET", "/v1/tasks", 200},
		{peer{err: errors.New("no credentials")}, "GET", "/v1/version", 403},
	} {
		if rec := d.as(t, c.p, c.method, c.target, nil); rec.Code != c.want {
			t.Errorf("uid %d %s %s: %d, want %d (%s)", c.p.uid, c.method, c.target, rec.Code, c.want, rec.Body)
		}
	}
}

// Bad requests get a clear one-line error each; the daemon goes on.
func TestBadRequests(t *testing.T) {
	d := newTestDaemon(t, Config{})
	me := peer{uid: os.Getuid()}
	for _, c := range []struct {
		name, method, target, body string
		status                     int
		want                       string
	}{
		{"malformed", "POST", "/v1/runs", `{"kind": "command", "tasks": [`, 400, "malformed JSON"},
		{"not JSON", "POST", "/v1/runs", `kind=command`, 400, "malformed JSON"},
		{"unknown field", "POST", "/v1/runs", `{"kind": "command", "tasks": [{"command": ["true"], "colour": 2}]}`, 400, `unknown field "colour"`},
		{"cards of a CPU task", "POST", "/v1/runs", `{"kind": "command", "tasks": [{"command": ["true"], "gpus": 2}]}`, 400, `task "cmd": gpus is for GPU tasks`},
		{"too many cards", "POST", "/v1/runs", `{"kind": "command", "tasks": [{"command": ["true"], "gpu_mib": 10, "gpus": 65}]}`, 400, "resources.gpus"},
		{"two values", "POST", "/v1/cancel", `{"ids": ["1"]} {}`, 400, "more than one JSON value"},
		{"wrong type", "POST", "/v1/cancel", `{"ids": "1"}`, 400, `field "ids"`},
		{"empty", "POST", "/v1/wait", ``, 400, "empty"},
		{"oversized", "POST", "/v1/runs", `{"name": "` + strings.Repeat("x", MaxBody) + `"}`, 413, "larger than"},
		{"unknown route", "GET", "/v1/nothing", ``, 404, "no route GET /v1/nothing"},
		{"unversioned", "GET", "/tasks", ``, 404, "no route"},
		{"wrong method", "DELETE", "/v1/tasks", ``, 405, "takes GET"},
		{"bad kind", "POST", "/v1/runs", `{"kind": "batch", "tasks": []}`, 400, `kind "batch"`},
		{"relative dir", "POST", "/v1/runs", `{"kind": "command", "dir": "x", "tasks": [{"command": ["true"]}]}`, 400, "absolute"},
		{"empty argv", "POST", "/v1/runs", `{"kind": "command", "tasks": [{"command": []}]}`, 400, "empty command"},
		{"bad state", "GET", "/v1/tasks?state=done", ``, 400, `state "done"`},
		{"budget and auto", "POST", "/v1/runs", `{"kind": "command", "tasks": [{"command": ["true"], "gpu_mib": 100, "gpu_mib_auto": true}]}`, 400, "gpu_mib and gpu_mib_auto: give one"},
		{"max without auto", "POST", "/v1/runs", `{"kind": "command", "tasks": [{"command": ["true"], "gpu_mib": 100, "gpu_mib_max": 200}]}`, 400, "goes with gpu_mib_auto"},
	} {
		req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, me))
		rec := httptest.NewRecorder()
		d.handler().ServeHTTP(rec, req)
		if msg := errorOf(t, rec); rec.Code != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %q; want %d with %q", c.name, rec.Code, msg, c.status, c.want)
		}
	}
	if runs, _ := d.client.Runs(context.Background()); len(runs) != 0 {
		t.Errorf("bad requests made runs: %+v", runs)
	}
	if _, err := d.client.Version(context.Background()); err != nil {
		t.Errorf("the daemon after bad requests: %v", err)
	}
}

// A connection that sends half a request and hangs is dropped after the
// read timeout; meanwhile other clients are served.
func TestHalfRequestDoesNotHoldTheDaemon(t *testing.T) {
	d := newTestDaemon(t, Config{Timeouts: Timeouts{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond}})
	for _, c := range []struct{ half, want string }{
		// Headers that never end: the connection is closed (no request
		// to answer).
		{"POST /v1/runs HTTP/1.1\r\nHost: x\r\n", ""},
		// A body that never ends: a 408 with its reason, then closed.
		{"POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"kind\": \"comm", `408 Request Timeout`},
	} {
		conn, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, c.half); err != nil {
			t.Fatal(err)
		}
		// Others are served while it hangs.
		if _, err := d.client.Submit(context.Background(), cmd("true")); err != nil {
			t.Fatalf("another client while one hangs: %v", err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatalf("the hanging connection was not closed: %v", err)
		}
		if c.want == "" && len(resp) > 0 || !strings.Contains(string(resp), c.want) || c.want != "" && !strings.Contains(string(resp), `{"error":"request body: not sent in time"}`) {
			t.Errorf("the hanging connection got %q, want %q", resp, c.want)
		}
	}
}

// A second daemon on the same state directory refuses at once, naming the
// first one's PID; one on the same socket never takes it over.
func TestOneDaemonPerStateDirAndSocket(t *testing.T) {
	d := newTestDaemon(t, Config{})
	dir := shortDir(t)
	_, _, err := start(Config{StateDir: d.cfg.StateDir, Socket: filepath.Join(dir, "other"), Log: io.Discard})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("second daemon on the state directory: %v", err)
	}
	_, _, err = start(Config{StateDir: filepath.Join(dir, "state2"), Socket: d.socket, Log: io.Discard})
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "socket") {
		t.Fatalf("second daemon on the socket: %v", err)
	}
	if _, err := d.client.Version(context.Background()); err != nil {
		t.Errorf("the first daemon after both: %v", err)
	}
}

// A socket left by a dead daemon is removed; one something else answers
// on is not taken over.
func TestStaleAndLiveSockets(t *testing.T) {
	dir := shortDir(t)
	stale := filepath.Join(dir, "stale")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays; nothing listens
	d := newTestDaemon(t, Config{Socket: stale})
	if _, err := d.client.Version(context.Background()); err != nil {
		t.Fatalf("daemon on a stale socket: %v", err)
	}

	live := filepath.Join(dir, "live")
	other, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, _, err = start(Config{StateDir: filepath.Join(dir, "state"), Socket: live, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "answers on") {
		t.Fatalf("daemon on a live socket: %v", err)
	}
	if c, err := net.Dial("unix", live); err != nil {
		t.Errorf("the live socket was taken: %v", err)
	} else {
		c.Close()
	}
	notSocket := filepath.Join(dir, "file")
	os.WriteFile(notSocket, nil, 0o600)
	if _, _, err := start(Config{StateDir: filepath.Join(dir, "state3"), Socket: notSocket, Log: io.Discard}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("daemon on a plain file: %v", err)
	}
}

// A client of another API version is told what runs where and how to
// restart it.
func TestVersionSkew(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "fake")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(client.Version{Build: "v9.0.0", APIMin: 2, APIMax: 3, PID: 4242})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	_, err = client.Dial(context.Background(), path)
	var ve *client.VersionError
	if !errors.As(err, &ve) {
		t.Fatalf("Dial: %v, want a VersionError", err)
	}
	for _, want := range []string{path, "pid 4242", "v9.0.0", "2 to 3", "speaks 1", "gpusched daemon stop"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// Streams are newline-delimited JSON: the events after a given one,
// replayed in order; one never published is refused.
func TestEventsStream(t *testing.T) {
	d := newTestDaemon(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.client.Submit(ctx, cmd("true")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Wait(ctx, []string{"1"}, nil); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	err := d.client.Events(ctx, 1, func(ev client.Event) bool {
		kinds = append(kinds, fmt.Sprint(ev.Seq, " ", ev.Task, " ", ev.Kind))
		return ev.Kind != "complete"
	})
	if err != nil || strings.Join(kinds, ",") != "2 1 complete" {
		t.Errorf("events after 1: %v, %v", kinds, err)
	}
	err = d.client.Events(ctx, 99, func(client.Event) bool { return false })
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusGone {
		t.Errorf("events after 99: %v, want 410", err)
	}
}

// The queue says why a waiting task waits as the engine decided it (a free
// slot here), and a task after another as the daemon names it.
func TestQueueSaysTheEnginesReason(t *testing.T) {
	d := newTestDaemon(t, Config{Scheduling: gpusched.Scheduling{MaxParallelTasks: 1}})
	ctx := context.Background()
	long, err := d.client.Submit(ctx, cmd("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Submit(ctx, cmd("true")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Submit(ctx, client.Command{Args: []string{"true"}, After: []string{long.Run}, Dir: "/"}); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"2": {"slot", "waiting for a free slot"}, "3": {"dependencies", "after 1"}}
	var q []client.TaskInfo
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if q, err = d.client.Queue(ctx, client.QueueOptions{}); err != nil {
			t.Fatal(err)
		}
		ok := len(q) == 3
		for _, ti := range q {
			if w, in := want[ti.ID]; in && (ti.WaitingKind != w[0] || ti.Waiting != w[1]) {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue: %+v; want 2 waiting for a slot, 3 after 1", q)
		}
	}
	if q[0].ID != "1" || q[0].State != "running" || q[0].Waiting != "" || q[0].WaitingKind != "" {
		t.Errorf("task 1: %+v; want running, not waiting", q[0])
	}
}
