package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
)

// startActivated starts gpusched daemon as systemd would with socket
// activation: the listening socket ln as descriptor 3, LISTEN_FDS=1 and
// LISTEN_PID the daemon's own PID (a shell sets it to its PID, then execs
// the daemon in its place).
func (w *world) startActivated(t *testing.T, ln *net.UnixListener, args ...string) *daemon {
	t.Helper()
	w.n++
	path := ln.Addr().String()
	d := &daemon{socket: path, exited: make(chan struct{}), log: filepath.Join(w.dir, fmt.Sprintf("daemon-%d.log", w.n))}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, gpuschedBin, "daemon"}, args...)...)
	d.cmd.Env = append(w.env, "LISTEN_FDS=1", "LISTEN_FDNAMES=gpusched.socket")
	d.cmd.Stdout, d.cmd.Stderr, d.cmd.ExtraFiles = logf, logf, []*os.File{f}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	f.Close()
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { w.stopAll(d) })
	// Connections queue on ln from the start; the first answer says the
	// daemon took it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		c, err := client.Dial(ctx, path)
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	select {
	case err := <-dialed:
		if err != nil {
			b, _ := os.ReadFile(d.log)
			t.Fatalf("activated daemon does not answer on %s: %v\n%s", path, err, b)
		}
	case <-d.exited:
		b, _ := os.ReadFile(d.log)
		t.Fatalf("activated daemon exited: %s", b)
	}
	return d
}

// metricsAddr reads from a daemon's log the address its metrics listener
// took ("metrics on http://ADDR/metrics").
func metricsAddr(t *testing.T, d *daemon) string {
	t.Helper()
	re := regexp.MustCompile(`metrics on http://(\S+)/metrics`)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f, err := os.Open(d.log)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				f.Close()
				return m[1]
			}
		}
		f.Close()
	}
	b, _ := os.ReadFile(d.log)
	t.Fatalf("the daemon never said where its metrics are:\n%s", b)
	return ""
}

// What the systemd units rely on. Socket activation: the daemon serves on
// the socket it is passed (descriptor 3), and leaves it in place when it
// exits, so that clients queue on it across a restart. KillMode=process:
// SIGTERM to the daemon alone (systemctl stop or restart) leaves its
// running task running, and the next daemon, activated on the same
// socket, adopts it; the task runs once. --metrics-listen serves the
// metrics on TCP.
func TestSocketActivationAndSIGTERMLeavesTasksRunning(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(w.dir, "act.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	d := w.startActivated(t, ln, "-j", "1", "--metrics-listen", "127.0.0.1:0")
	if _, err := os.Stat(w.socket); err == nil {
		t.Errorf("an activated daemon listens on its default socket %s too", w.socket)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, gate := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "go")
	long := fmt.Sprintf(`echo A >> %s; while [ ! -e %s ]; do sleep 0.05; done; echo A-end >> %s`, out, gate, out)
	if _, err := c.Submit(ctx, client.Command{Args: []string{"sh", "-c", long}, Env: map[string]string{"PATH": os.Getenv("PATH")}, Dir: w.dir}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "1", "running")
	waitFile(t, out)

	resp, err := http.Get("http://" + metricsAddr(t, d) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `gpusched_tasks{state="running",user=`) {
		t.Errorf("--metrics-listen: %s, %q; want a running task", resp.Status, body)
	}

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the passed socket after the daemon exited: %v; want it left in place", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "A\n" {
		t.Fatalf("out after SIGTERM: %q", b)
	}

	w.startActivated(t, ln, "-j", "1")
	c2, err := client.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if ti := waitState(t, c2, "1", "running"); ti.Attempts != 1 {
		t.Errorf("task 1 after SIGTERM and a new daemon: %d attempts, want its first, adopted", ti.Attempts)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ti := waitState(t, c2, "1", "complete"); ti.Attempts != 1 {
		t.Errorf("task 1 completed after %d attempts, want 1", ti.Attempts)
	}
	if b, _ := os.ReadFile(out); string(b) != "A\nA-end\n" {
		t.Errorf("out: %q, want the task's one run", b)
	}
}
