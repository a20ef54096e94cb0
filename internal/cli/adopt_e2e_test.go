package cli_test

// End-to-end tests of adoption: every local attempt runs under the run
// directory's supervisor (internal/supervise), so a scheduler killed with
// SIGKILL leaves its attempts running and supervised, and the next
// "gpusched run" adopts them instead of starting them again. The real
// binary, real processes, a real supervisor.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

// adoptAttemptJSON is an attempt of "status --json" with the fields these
// tests look at.
type adoptAttemptJSON struct {
	Number      int       `json:"number"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	ExitCode    *int      `json:"exit_code"`
	TimedOut    bool      `json:"timed_out"`
	Interrupted bool      `json:"interrupted"`
	Adopted     bool      `json:"adopted"`
	EndReason   string    `json:"end_reason"`
	PID         int       `json:"pid"`
	GPU         *int      `json:"gpu"`
}

type adoptTaskJSON struct {
	ID        string             `json:"id"`
	State     string             `json:"state"`
	Attempts  int                `json:"attempts"`
	ExitCode  *int               `json:"exit_code"`
	BlockedBy string             `json:"blocked_by"`
	Error     string             `json:"error"`
	History   []adoptAttemptJSON `json:"history"`
}

// adoptStatus runs "gpusched status --json --run-dir runDir" and returns
// its tasks by id.
func adoptStatus(t *testing.T, runDir string) map[string]adoptTaskJSON {
	t.Helper()
	r := gs(t, "", "status", "--json", "--run-dir", runDir)
	r.want(t, 0)
	var s struct {
		Tasks []adoptTaskJSON `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json output is not JSON: %v\n%s", err, r.stdout)
	}
	m := map[string]adoptTaskJSON{}
	for _, tk := range s.Tasks {
		m[tk.ID] = tk
	}
	return m
}

// adoptTask returns task id from a status, failing when it is missing or
// its history does not hold one entry per attempt.
func adoptTask(t *testing.T, s map[string]adoptTaskJSON, id string) adoptTaskJSON {
	t.Helper()
	tk, ok := s[id]
	if !ok {
		t.Fatalf("status has no task %q", id)
	}
	if len(tk.History) != tk.Attempts {
		t.Fatalf("task %s: %d attempts but %d in history: %+v", id, tk.Attempts, len(tk.History), tk.History)
	}
	return tk
}

// supervisorPID returns the PID in runDir/supervisor.lock, 0 when there is
// none.
func supervisorPID(runDir string) int {
	b, err := os.ReadFile(filepath.Join(runDir, "supervisor.lock"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// countLines returns how many lines of file are exactly line.
func countLines(t *testing.T, file, line string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(readFile(t, file), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// killLeftovers makes sure nothing a test started outlives it: the process
// groups of pids and the run directory's supervisor.
func killLeftovers(t *testing.T, runDir string, pids *[]int) {
	t.Cleanup(func() {
		for _, p := range *pids {
			_ = syscall.Kill(-p, syscall.SIGKILL)
		}
		if p := supervisorPID(runDir); p > 0 && alive(p) {
			_ = syscall.Kill(p, syscall.SIGTERM) // it stops its attempts
		}
	})
}

// killScheduler kills a background "gpusched run" with SIGKILL and waits
// for it.
func killScheduler(t *testing.T, b *backgroundRun) {
	t.Helper()
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.done
}

// A task still running when its scheduler is killed (SIGKILL) runs on
// under its supervisor; plan says it would be adopted; the next run adopts
// it (never starts it again) and records its real end: exit code 3, after
// which its dependent is blocked.
func TestAdoptAfterKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	starts := filepath.Join(dir, "starts")
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: slow
    retries: 0
    args: `+sh("echo $$ >> "+q(pidfile)+"; echo start >> "+q(starts)+"; sleep 8; exit 3")+`
  - id: after
    dependencies: [slow]
    args: `+sh("echo after-ran >> "+q(starts))+`
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startRun(t, wf, "--run-dir", runDir)
	pids = readPIDs(t, pidfile, 1)
	waitFor(t, 10*time.Second, "slow to be recorded running", func() bool {
		tk := adoptStatus(t, runDir)["slow"]
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == pids[0]
	})
	killScheduler(t, run)
	if !alive(pids[0]) {
		t.Fatalf("slow's process %d died with its scheduler; the supervisor should keep it running", pids[0])
	}

	p := gs(t, "", "plan", wf, "--run-dir", runDir)
	p.want(t, 0)
	var slowLine string
	for _, l := range strings.Split(p.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "slow" {
			slowLine = l
		}
	}
	if f := strings.Fields(slowLine); len(f) < 2 || f[1] != "adopt" || !strings.Contains(slowLine, "adopt (running since ") {
		t.Errorf("plan's line for slow = %q; want ACTION adopt and why \"adopt (running since ...)\"\n%s", slowLine, p.stdout)
	}

	r := gs(t, "", "run", wf, "--run-dir", runDir)
	r.want(t, 1)
	if !strings.Contains(r.stdout, "adopted   slow (attempt 1, running since ") {
		t.Errorf("run's output does not say slow was adopted:\n%s", r.stdout)
	}
	if n := countLines(t, starts, "start"); n != 1 {
		t.Errorf("slow started %d times, want once (adopted, not started again):\n%s", n, readFile(t, starts))
	}
	if n := countLines(t, starts, "after-ran"); n != 0 {
		t.Errorf("after ran although slow failed")
	}
	s := adoptStatus(t, runDir)
	slow := adoptTask(t, s, "slow")
	if slow.State != "failed" || slow.Attempts != 1 || intp(slow.ExitCode) != "3" {
		t.Errorf("slow: state %s, attempts %d, exit_code %s; want failed, 1, 3", slow.State, slow.Attempts, intp(slow.ExitCode))
	}
	if len(slow.History) == 1 {
		a := slow.History[0]
		if !a.Adopted || a.EndReason != "exited" || a.PID != pids[0] || intp(a.ExitCode) != "3" {
			t.Errorf("slow's attempt: adopted %v, end_reason %q, pid %d, exit_code %s; want true, exited, %d, 3",
				a.Adopted, a.EndReason, a.PID, intp(a.ExitCode), pids[0])
		}
	}
	after := adoptTask(t, s, "after")
	if after.State != "blocked" || after.Attempts != 0 || after.BlockedBy != "slow" {
		t.Errorf("after: state %s, attempts %d, blocked_by %q; want blocked by slow, never run", after.State, after.Attempts, after.BlockedBy)
	}
}

// An adopted GPU task holds its card's memory from the moment the next
// scheduler starts: a task that would not fit beside it waits for its end.
// The adopted job asks for 6000 MiB of a 10000 MiB card but takes only
// 1000, so nvidia-smi alone would let the 6000 MiB waiter in at once: only
// the adopted task's reservation keeps it off.
func TestAdoptGPU(t *testing.T) {
	t.Parallel()
	m := newFakeMachine(t, fakegpu.State{Cards: []fakegpu.Card{gpuCard(0, 10000)}})
	runDir := filepath.Join(m.dir, "rd")
	wf, _ := m.workflow(`
scheduling:
  max_parallel_tasks: 4
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: held
    resources: {device: cuda, memory_mib: 6000}
    args: ` + m.job("--mem", "1000", "--duration", "5s") + `
  - id: waiter
    resources: {device: cuda, memory_mib: 6000}
    args: ` + m.job("--mem", "6000", "--duration", "100ms") + `
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startGPURun(t, m.env, wf, "--run-dir", runDir)
	var heldPID int
	waitFor(t, 15*time.Second, "held's job to take its memory", func() bool {
		for _, e := range m.events() {
			if e.Kind == fakegpu.EventStart {
				heldPID = e.PID
				return true
			}
		}
		return false
	})
	pids = append(pids, heldPID)
	waitFor(t, 10*time.Second, "held to be recorded running with its PID", func() bool {
		tk := adoptStatus(t, runDir)["held"]
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID > 0
	})
	killScheduler(t, run)
	if !alive(heldPID) {
		t.Fatalf("held's job %d died with its scheduler", heldPID)
	}
	if w := adoptStatus(t, runDir)["waiter"]; w.Attempts != 0 {
		t.Fatalf("waiter started beside held before the kill: %+v", w)
	}

	r := gpuGS(t, m.env, "run", wf, "--run-dir", runDir)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "adopted   held (attempt 1, running since ") {
		t.Errorf("run's output does not say held was adopted:\n%s", r.stdout)
	}
	m.checkNoOvercommit(0)

	s := adoptStatus(t, runDir)
	held := adoptTask(t, s, "held")
	waiter := adoptTask(t, s, "waiter")
	if held.State != "complete" || held.Attempts != 1 || waiter.State != "complete" || waiter.Attempts != 1 {
		t.Fatalf("held: %s after %d attempts, waiter: %s after %d; want both complete after 1 (errors %q, %q)",
			held.State, held.Attempts, waiter.State, waiter.Attempts, held.Error, waiter.Error)
	}
	h, w := held.History[0], waiter.History[0]
	if !h.Adopted || h.PID != heldPID {
		t.Errorf("held's attempt: adopted %v, pid %d; want adopted, pid %d", h.Adopted, h.PID, heldPID)
	}
	if w.Start.Before(h.End) {
		t.Errorf("waiter started at %s, before the adopted held ended at %s: the adopted task's 6000 MiB were not held",
			w.Start.Format(time.StampMilli), h.End.Format(time.StampMilli))
	}
	// The fake jobs' own record, in the order they took and gave back memory.
	heldEnd, waiterStart := -1, -1
	for i, e := range m.events() {
		switch {
		case e.PID == h.PID && e.Kind == fakegpu.EventEnd:
			heldEnd = i
		case e.PID == w.PID && e.Kind == fakegpu.EventStart:
			waiterStart = i
		}
	}
	if heldEnd < 0 || waiterStart < heldEnd {
		t.Errorf("waiter's job took its memory (event %d) before held's job gave its back (event %d)", waiterStart, heldEnd)
	}
}

// A task that ends while no scheduler runs is recorded from the result its
// supervisor wrote: complete, one attempt, adopted, never started again.
func TestEndedWhileNoScheduler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	starts := filepath.Join(dir, "starts")
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: short
    args: `+sh("echo $$ >> "+q(pidfile)+"; echo start >> "+q(starts)+"; sleep 1.5")+`
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startRun(t, wf, "--run-dir", runDir)
	pids = readPIDs(t, pidfile, 1)
	waitFor(t, 10*time.Second, "short to be recorded running", func() bool {
		tk := adoptStatus(t, runDir)["short"]
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == pids[0]
	})
	killScheduler(t, run)
	if !alive(pids[0]) {
		t.Fatalf("short's process %d died with its scheduler", pids[0])
	}
	results := filepath.Join(runDir, "supervisor.results")
	waitFor(t, 10*time.Second, "the supervisor to record short's end", func() bool {
		b, _ := os.ReadFile(results)
		return !alive(pids[0]) && strings.Count(string(b), "\n") >= 1
	})
	if tk := adoptStatus(t, runDir)["short"]; tk.State != "running" {
		t.Errorf("before the next run, status says short is %s; the database still holds it running", tk.State)
	}

	r := gs(t, "", "run", wf, "--run-dir", runDir)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "adopted   short (attempt 1 ended while no scheduler ran") {
		t.Errorf("run's output does not say short's end was recorded:\n%s", r.stdout)
	}
	if n := countLines(t, starts, "start"); n != 1 {
		t.Errorf("short started %d times, want once", n)
	}
	short := adoptTask(t, adoptStatus(t, runDir), "short")
	if short.State != "complete" || short.Attempts != 1 || intp(short.ExitCode) != "0" {
		t.Errorf("short: state %s, attempts %d, exit_code %s; want complete, 1, 0", short.State, short.Attempts, intp(short.ExitCode))
	}
	if len(short.History) == 1 {
		if a := short.History[0]; !a.Adopted || a.EndReason != "exited" || a.Interrupted {
			t.Errorf("short's attempt: adopted %v, end_reason %q, interrupted %v; want true, exited, false", a.Adopted, a.EndReason, a.Interrupted)
		}
	}
}

// When the supervisor dies too (kill -9 of both), nobody watches the
// attempt: the next run kills its process (found by its token) before it
// runs the task again, and records the first attempt interrupted.
func TestSupervisorKilledToo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	pidfile := filepath.Join(dir, "pids")
	// Attempt 2 fails if attempt 1's process still lives when it starts.
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
tasks:
  - id: job
    retries: 0
    args: `+sh(`echo $$ >> `+q(pidfile)+`
if [ "$GPUSCHED_ATTEMPT" = 1 ]; then exec `+q(sleeperBin)+` -sleep 1h; fi
first=$(head -n 1 `+q(pidfile)+`)
st=$(cut -d' ' -f3 /proc/$first/stat 2>/dev/null)
if [ -n "$st" ] && [ "$st" != Z ]; then echo "attempt 1 ($first) still runs: $st"; exit 9; fi
echo second`)+`
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startRun(t, wf, "--run-dir", runDir)
	pids = readPIDs(t, pidfile, 1)
	orphan := pids[0]
	waitFor(t, 10*time.Second, "job to be recorded running", func() bool {
		tk := adoptStatus(t, runDir)["job"]
		return tk.State == "running" && len(tk.History) == 1 && tk.History[0].PID == orphan
	})
	sup := supervisorPID(runDir)
	if sup <= 0 || !alive(sup) {
		t.Fatalf("no live supervisor in %s (pid %d)", filepath.Join(runDir, "supervisor.lock"), sup)
	}
	killScheduler(t, run)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the supervisor to die", func() bool { return !alive(sup) })
	if !alive(orphan) {
		t.Fatalf("job's process %d died with its scheduler and supervisor; this test needs it to outlive them", orphan)
	}

	r := gs(t, "", "run", wf, "--run-dir", runDir)
	r.want(t, 0)
	if alive(orphan) {
		t.Errorf("attempt 1's process %d still runs after the next run re-ran the task", orphan)
	}
	job := adoptTask(t, adoptStatus(t, runDir), "job")
	if job.State != "complete" || job.Attempts != 2 || intp(job.ExitCode) != "0" {
		t.Errorf("job: state %s, attempts %d, exit_code %s; want complete, 2, 0 (error %q)", job.State, job.Attempts, intp(job.ExitCode), job.Error)
	}
	if len(job.History) == 2 {
		a1, a2 := job.History[0], job.History[1]
		if !a1.Interrupted && a1.EndReason != "lost" {
			t.Errorf("attempt 1: interrupted %v, end_reason %q; want interrupted or lost", a1.Interrupted, a1.EndReason)
		}
		if a2.Interrupted || a2.Adopted || a2.EndReason != "exited" {
			t.Errorf("attempt 2: interrupted %v, adopted %v, end_reason %q; want false, false, exited", a2.Interrupted, a2.Adopted, a2.EndReason)
		}
	}
	if lg := gs(t, "", "logs", wf, "job", "--run-dir", runDir); lg.stdout != "second\n" {
		t.Errorf("logs of attempt 2: %q", lg.stdout)
	}
}

// The supervisor enforces a task's timeout while no scheduler runs; the
// next run records the attempt timed out and, with no retries, failed.
func TestSupervisorEnforcesTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "rd")
	pidfile := filepath.Join(dir, "pids")
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), `
scheduling:
  kill_grace: 300ms
tasks:
  - id: hang
    timeout: 2s
    retries: 0
    args: `+sleeper("-pidfile", pidfile, "-sleep", "60s")+`
`)
	var pids []int
	killLeftovers(t, runDir, &pids)
	run := startRun(t, wf, "--run-dir", runDir)
	pids = readPIDs(t, pidfile, 1)
	killScheduler(t, run)
	if !alive(pids[0]) {
		t.Fatalf("hang's process %d died with its scheduler", pids[0])
	}
	// 2s of timeout and 300ms of grace; no scheduler runs, so only the
	// supervisor can stop it (the limit leaves room for a loaded machine;
	// the end_reason below says it was the timeout).
	waitFor(t, 10*time.Second, "the supervisor to stop hang at its 2s timeout", func() bool { return !alive(pids[0]) })

	r := gs(t, "", "run", wf, "--run-dir", runDir)
	r.want(t, 1)
	hang := adoptTask(t, adoptStatus(t, runDir), "hang")
	if hang.State != "failed" || hang.Attempts != 1 {
		t.Errorf("hang: state %s, attempts %d; want failed after 1 (error %q)", hang.State, hang.Attempts, hang.Error)
	}
	if len(hang.History) >= 1 {
		if a := hang.History[0]; !a.TimedOut && a.EndReason != "timed-out" {
			t.Errorf("hang's attempt: timed_out %v, end_reason %q; want a timeout", a.TimedOut, a.EndReason)
		}
	}
	if n := len(readPIDsNow(pidfile)); n != 1 {
		t.Errorf("hang started %d times, want once (retries: 0)", n)
	}
}

// readPIDsNow returns the PIDs in file, one a line, as it is now.
func readPIDsNow(file string) []int {
	b, _ := os.ReadFile(file)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}
