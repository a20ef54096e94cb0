package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
)

// gpusched logs -f goes on across a restart of the daemon (kill -9, the
// task adopted): every line once, and it exits 0 when the task completes.
func TestFollowedLogGoesOnAcrossARestart(t *testing.T) {
	w := newWorld(t)
	d := w.start(t)
	c := w.client(t)
	gate := filepath.Join(w.dir, "go")
	script := fmt.Sprintf(`i=0; while [ ! -e %s ]; do i=$((i+1)); echo line $i; sleep 0.2; done; echo end`, gate)
	if _, err := c.Submit(context.Background(), client.Command{Args: []string{"sh", "-c", script},
		Env: map[string]string{"PATH": os.Getenv("PATH")}, Dir: w.dir}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "1", "running")
	outPath := filepath.Join(w.dir, "followed")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	follower := exec.Command(gpuschedBin, "logs", "-f", "1")
	follower.Env, follower.Stdout, follower.Stderr = w.env, out, out
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	exited, done := make(chan error, 1), make(chan struct{})
	go func() { exited <- follower.Wait(); close(done) }()
	t.Cleanup(func() {
		follower.Process.Kill() // if it is still following
		<-done
	})
	printed := func() string { b, _ := os.ReadFile(outPath); return string(b) }
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok(printed()) {
			if time.Now().After(deadline) {
				t.Fatalf("the follower never printed %s: %q", what, printed())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("line 2", func(s string) bool { return strings.Contains(s, "line 2\n") })
	d.kill9(t)
	before := strings.Count(printed(), "\n")
	w.start(t)
	// Lines written after the restart reach the follower: it reconnected.
	waitFor("lines after the restart", func(s string) bool { return strings.Count(s, "\n") >= before+3 })
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("the follower: %v: %q", err, printed())
	}
	lines := strings.Split(strings.TrimSuffix(printed(), "\n"), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "end" {
		t.Fatalf("followed log: %q, want numbered lines then end", printed())
	}
	for i, l := range lines[:len(lines)-1] {
		if l != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("followed log line %d: %q, want each line once, in order: %q", i+1, l, printed())
		}
	}
}
