package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
)

// procState is the state letter of process pid (R, S, T...), or 0 when it
// cannot be read.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// waitProcState polls until process pid is in state (want) or not in it.
func waitProcState(t *testing.T, pid int, state byte, want bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for (procState(pid) == state) != want {
		if time.Now().After(deadline) {
			t.Fatalf("process %d in state %c, want %c: %v", pid, procState(pid), state, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Pause, resume and retry through the command line: a paused run does not
// start, also after the daemon is killed and started again, while runs
// submitted after it do; pause --stop stops a running task's processes
// and resume lets them go on; retry runs a failed task and the task it
// blocked again.
func TestPauseResumeRetry(t *testing.T) {
	w := newWorld(t)
	d := w.start(t, "-j", "2")
	c := w.client(t)
	env := map[string]string{"PATH": os.Getenv("PATH")}
	gate := filepath.Join(w.dir, "gate")
	submit := func(cmd client.Command) string {
		t.Helper()
		cmd.Env, cmd.Dir = env, w.dir
		s, err := c.Submit(context.Background(), cmd)
		if err != nil {
			t.Fatal(err)
		}
		return s.Run
	}
	gs := func(args ...string) string {
		t.Helper()
		out, errOut, code := w.gs(t, "/", nil, args...)
		if code != 0 {
			t.Fatalf("gpusched %s: %q %q %d", strings.Join(args, " "), out, errOut, code)
		}
		return out
	}

	// Run 2 waits for run 1, which waits for the gate; run 2 is paused.
	submit(client.Command{Args: []string{"sh", "-c", "while [ ! -e " + gate + " ]; do sleep 0.05; done"}})
	submit(client.Command{Args: []string{"true"}, After: []string{"1"}})
	if out := gs("pause", "2"); out != "2\n" {
		t.Fatalf("pause 2 printed %q", out)
	}
	os.WriteFile(gate, nil, 0o644)
	if tasks, err := c.Wait(context.Background(), []string{"1"}, nil); err != nil || tasks[0].State != "complete" {
		t.Fatalf("run 1: %+v, %v", tasks, err)
	}
	// Killed and started again, the daemon keeps it paused.
	d.kill9(t)
	w.start(t, "-j", "2")
	c = w.client(t)
	three := submit(client.Command{Args: []string{"true"}})
	if tasks, err := c.Wait(context.Background(), []string{three}, nil); err != nil || tasks[0].State != "complete" {
		t.Fatalf("run %s, submitted after the pause: %+v, %v", three, tasks, err)
	}
	q, err := c.Queue(context.Background(), client.QueueOptions{IDs: []string{"2"}})
	if err != nil || len(q) != 1 || q[0].State != "pending" || q[0].WaitingKind != "paused" || q[0].Waiting != "paused" || q[0].Attempts != 0 {
		t.Fatalf("paused run 2 after run 1 completed and a restart: %+v, %v; want pending, waiting paused, never started", q, err)
	}
	if out := gs("queue"); !strings.Contains(out, "paused") {
		t.Errorf("gpusched queue does not say run 2 is paused:\n%s", out)
	}
	if out := gs("resume"); out != "2\n" {
		t.Errorf("resume (all of mine) printed %q, want 2", out)
	}
	if tasks, err := c.Wait(context.Background(), []string{"2"}, nil); err != nil || tasks[0].State != "complete" {
		t.Fatalf("run 2 after resume: %+v, %v", tasks, err)
	}

	// pause --stop stops a running task; resume lets it go on.
	pidFile, gate2 := filepath.Join(w.dir, "pid"), filepath.Join(w.dir, "gate2")
	sleeper := submit(client.Command{Args: []string{"sh", "-c", "echo $$ > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile +
		"; while [ ! -e " + gate2 + " ]; do sleep 0.05; done"}})
	waitFile(t, pidFile)
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sleeper, "running")
	if out := gs("pause", "--stop", sleeper); out != sleeper+"\n" {
		t.Errorf("pause --stop printed %q", out)
	}
	waitProcState(t, pid, 'T', true)
	if q, _ := c.Queue(context.Background(), client.QueueOptions{IDs: []string{sleeper}}); len(q) != 1 || q[0].State != "running" || !q[0].Paused {
		t.Errorf("stopped task in the queue: %+v, want running and paused", q)
	}
	if out := gs("resume", sleeper); out != sleeper+"\n" {
		t.Errorf("resume printed %q", out)
	}
	waitProcState(t, pid, 'T', false)
	os.WriteFile(gate2, nil, 0o644)
	if tasks, err := c.Wait(context.Background(), []string{sleeper}, nil); err != nil || tasks[0].State != "complete" || tasks[0].Attempts != 1 {
		t.Fatalf("resumed task: %+v, %v; want complete after its one attempt", tasks, err)
	}

	// retry: a failed task and the task it blocked run again.
	// failing waits for gate3, so that it has not failed yet when after is
	// submitted (a task after a failed one is refused).
	flag, gate3 := filepath.Join(w.dir, "flag"), filepath.Join(w.dir, "gate3")
	none := 0
	failing := submit(client.Command{Args: []string{"sh", "-c", "while [ ! -e " + gate3 + " ]; do sleep 0.05; done; test -e " + flag}, Retries: &none})
	after := submit(client.Command{Args: []string{"true"}, After: []string{failing}})
	os.WriteFile(gate3, nil, 0o644)
	tasks, err := c.Wait(context.Background(), []string{failing, after}, nil)
	if err != nil || len(tasks) != 2 {
		t.Fatal(tasks, err)
	}
	states := tasks[0].State + " " + tasks[1].State
	if states != "failed blocked" && states != "blocked failed" {
		t.Fatalf("before the retry: %s", states)
	}
	_, errOut, code := w.gs(t, "/", nil, "retry", three)
	if code != 1 || !strings.Contains(errOut, "task "+three+": it is complete") {
		t.Errorf("retry of a complete task: %q %d", errOut, code)
	}
	os.WriteFile(flag, nil, 0o644)
	if out := gs("retry", failing); out != failing+"\n"+after+"\n" {
		t.Errorf("retry %s printed %q, want it and %s", failing, out, after)
	}
	tasks, err = c.Wait(context.Background(), []string{failing, after}, nil)
	if err != nil || len(tasks) != 2 || tasks[0].State != "complete" || tasks[1].State != "complete" {
		t.Fatalf("after the retry: %+v, %v; want both complete", tasks, err)
	}
}
