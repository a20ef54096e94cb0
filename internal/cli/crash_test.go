package cli_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashWorkflow writes a workflow of n short tasks in a random DAG. Each
// task logs "start ID ATTEMPT PID" and "end ID ATTEMPT" to exec.log, leaves
// a long background child in its process group (so an attempt whose
// scheduler is killed leaves processes behind), writes its artifact, and
// has an on_complete command that logs "event ID EVENT".
func crashWorkflow(t *testing.T, dir string, n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	b.WriteString("scheduling:\n  max_parallel_tasks: 8\n  kill_grace: 1s\ntasks:\n")
	for i := range n {
		id := fmt.Sprintf("t%03d", i)
		fmt.Fprintf(&b, "  - id: %s\n", id)
		if i > 0 {
			deps := map[string]bool{}
			for range r.IntN(3) {
				deps[fmt.Sprintf("t%03d", r.IntN(i))] = true
			}
			if len(deps) > 0 {
				var ds []string
				for d := range deps {
					ds = append(ds, d)
				}
				fmt.Fprintf(&b, "    dependencies: [%s]\n", strings.Join(ds, ", "))
			}
		}
		sleep := fmt.Sprintf("0.%02d", 1+r.IntN(8))
		// The background sleep outlives the task's shell on purpose: gpusched
		// kills it when the shell exits, and a resumed gpusched kills it
		// when the shell's scheduler died.
		script := fmt.Sprintf(`echo "start $GPUSCHED_TASK_ID $GPUSCHED_ATTEMPT $$" >> exec.log; sleep 300 & echo "child $!" >> pids.log; sleep %s; mkdir -p out; echo $GPUSCHED_ATTEMPT > out/$GPUSCHED_TASK_ID; echo "end $GPUSCHED_TASK_ID $GPUSCHED_ATTEMPT" >> exec.log`, sleep)
		fmt.Fprintf(&b, "    args: %s\n", sh(script))
		fmt.Fprintf(&b, "    artifacts: [out/%s]\n", id)
		fmt.Fprintf(&b, "    on_complete: %s\n", sh(`echo "event $GPUSCHED_TASK_ID $GPUSCHED_EVENT_ID" >> events.log`))
	}
	return writeFile(t, filepath.Join(dir, "crash.yaml"), b.String())
}

func readExecLog(t *testing.T, dir string) (lines []string) {
	b, _ := os.ReadFile(filepath.Join(dir, "exec.log"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestCrashSafety kills the real binary with SIGKILL at random moments
// while it runs a few hundred tasks, resumes it each time, and checks: every
// task ends complete; a task completed before a kill never runs again; only
// tasks recorded running at a kill run more than once; no process of a
// killed attempt survives the resume; every completion event is delivered
// at least once. It also copies the state database, stopped in the middle
// of a run (a crash-consistent image), and resumes from the copy.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: kills and resumes gpusched many times")
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			crashOneSeed(t, seed)
		})
	}
}

func crashOneSeed(t *testing.T, seed uint64) {
	const n = 200
	dir := t.TempDir()
	wf := crashWorkflow(t, dir, n, seed)
	rd := filepath.Join(dir, "run")
	r := rand.New(rand.NewPCG(seed, 99))

	runningAtKill := map[string]int{} // task -> kills at which the database had it running
	completeAt := []map[string]bool{} // per kill: tasks complete then
	linesAt := []int{}                // per kill: exec.log lines then
	snapshot := ""

	for kill := 0; kill < 4; kill++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := command(ctx, dir, "run", wf, "--run-dir", rd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of lines more in exec.log (tasks that
		// started or ended), which is a random point of the run's progress
		// whatever the machine's speed; or once this run has ended.
		before, more := len(readExecLog(t, dir)), 1+r.IntN(40)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		waitFor(t, time.Minute, "the run to make progress", func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			return len(readExecLog(t, dir)) >= before+more
		})
		// The scheduler is the child of the run directory's supervisor,
		// started for the gpusched run this test started (its front); it
		// exits as soon as its front dies.
		sched := schedulerPID(rd)
		if kill == 1 && snapshot == "" {
			// A crash-consistent image: the scheduler frozen, its files copied.
			snapshot = filepath.Join(dir, "snapshot")
			copyStateFrozen(t, sched, rd, snapshot)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		cancel()
		waitFor(t, 10*time.Second, "the scheduler to exit with its front", func() bool { return sched <= 0 || !alive(sched) })

		s := status(t, "--run-dir", rd)
		done := map[string]bool{}
		for _, tk := range s.Tasks {
			switch tk.State {
			case "complete":
				done[tk.ID] = true
			case "running":
				runningAtKill[tk.ID]++
			}
		}
		completeAt = append(completeAt, done)
		linesAt = append(linesAt, len(readExecLog(t, dir)))
		if len(done) == n {
			break
		}
	}
	res := gs(t, dir, "run", wf, "--run-dir", rd)
	res.want(t, 0)

	// Every task complete.
	final := status(t, "--run-dir", rd)
	for _, tk := range final.Tasks {
		if tk.State != "complete" {
			t.Errorf("%s is %s after the final run", tk.ID, tk.State)
		}
	}
	if len(final.Tasks) != n {
		t.Fatalf("%d tasks in status, want %d", len(final.Tasks), n)
	}

	lines := readExecLog(t, dir)
	starts := map[string]int{}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "start" {
			continue
		}
		starts[f[1]]++
		// A task complete at a kill must not start after that kill.
		for k, done := range completeAt {
			if i >= linesAt[k] && done[f[1]] {
				t.Errorf("%s started again (line %d) although it was complete at kill %d", f[1], i+1, k+1)
			}
		}
	}
	for i := range n {
		id := fmt.Sprintf("t%03d", i)
		if starts[id] < 1 {
			t.Errorf("%s never started", id)
		}
		if starts[id] > 1+runningAtKill[id] {
			t.Errorf("%s started %d times but was running at only %d kill(s)", id, starts[id], runningAtKill[id])
		}
	}

	// No process of a killed attempt is left.
	for _, pid := range recordedPIDs(t, dir) {
		if alive(pid) {
			t.Errorf("process %d of an attempt is still alive", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	// Every completion event delivered at least once.
	ev, _ := os.ReadFile(filepath.Join(dir, "events.log"))
	got := map[string]bool{}
	for _, l := range strings.Split(string(ev), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			got[f[1]] = true
		}
	}
	for i := range n {
		if id := fmt.Sprintf("t%03d", i); !got[id] {
			t.Errorf("the completion event of %s was never delivered", id)
		}
	}
	kills := len(completeAt)
	twice := 0
	for _, c := range starts {
		if c > 1 {
			twice++
		}
	}
	t.Logf("seed %d: %d kills, %d tasks ran more than once", seed, kills, twice)

	// The frozen copy opens and resumes to the end.
	if snapshot != "" {
		st := status(t, "--run-dir", snapshot)
		if len(st.Tasks) == 0 {
			t.Errorf("the snapshot has no tasks")
		}
		res := gs(t, dir, "run", wf, "--run-dir", snapshot)
		res.want(t, 0)
		for _, tk := range status(t, "--run-dir", snapshot).Tasks {
			if tk.State != "complete" {
				t.Errorf("snapshot run: %s is %s", tk.ID, tk.State)
			}
		}
	}
}

// copyStateFrozen stops the scheduler, copies its state database files (as
// a power cut would leave them), and lets it go on.
func copyStateFrozen(t *testing.T, pid int, from, to string) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"state.db", "state.db-wal", "state.db-shm"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			if name == "state.db" {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// recordedPIDs returns the PIDs of every attempt's shell and background
// child, from exec.log and pids.log.
func recordedPIDs(t *testing.T, dir string) []int {
	var pids []int
	for _, name := range []string{"exec.log", "pids.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			var s string
			switch {
			case len(f) == 4 && f[0] == "start":
				s = f[3]
			case len(f) == 2 && f[0] == "child":
				s = f[1]
			default:
				continue
			}
			if pid, err := strconv.Atoi(s); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
