package executortest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// runGroup: the job leads a process group of its own; stopping it
// signals the whole group, SIGTERM then SIGKILL after the grace, or
// SIGKILL at once on KillNow; what it leaves at its exit is killed.
func runGroup(t *testing.T, h Harness) {
	t.Run("OwnGroup", func(t *testing.T) {
		t.Parallel()
		pidfile, gate := filepath.Join(t.TempDir(), "pids"), filepath.Join(t.TempDir(), "go")
		j := h.job(t, "-pidfile", pidfile, "-wait", gate, "-exit", "0")
		a := start(t, h.New(t), context.Background(), j)
		run := a.running(t)
		pid := waitPIDs(t, pidfile, 1)[0]
		st, ok := procfs.Read(pid)
		if run.PID != pid || !ok || st.PGID != pid {
			t.Errorf("Running.PID = %d, the command is %d in group %d: want it the leader of a group of its own", run.PID, pid, st.PGID)
		}
		writeFileAt(t, gate, "")
		if r := a.result(t, "it was let go on"); r.Reason != executor.Exited {
			t.Errorf("result = %+v", r)
		}
	})

	t.Run("TermThenKillWholeGroup", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := h.job(t, "-ignore-term", "-grandchild", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = 300 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		a := start(t, h.New(t), ctx, j)
		pids := waitPIDs(t, pidfile, 2)
		cancelled := time.Now()
		cancel()
		r := a.result(t, "cancel")
		wantReason(t, r, executor.Cancelled)
		if r.Signal != syscall.SIGKILL {
			t.Errorf("signal = %v, want SIGKILL for a job that ignores SIGTERM", r.Signal)
		}
		if d := time.Since(cancelled); d < j.KillGrace {
			t.Errorf("job killed %v after the cancel, before its kill grace %v", d, j.KillGrace)
		}
		for _, pid := range pids {
			waitGone(t, pid)
		}
	})

	t.Run("LeftoversKilledAtExit", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := h.job(t, "-grandchild", "-pidfile", pidfile, "-exit", "0")
		r := h.New(t).Execute(context.Background(), j, executor.Hooks{})
		wantReason(t, r, executor.Exited)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		pids := waitPIDs(t, pidfile, 2)
		waitGone(t, pids[1])
	})

	t.Run("KillNowDuringGraceEscaped", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, termfile := filepath.Join(dir, "pids"), filepath.Join(dir, "term")
		// The escaped grandchild notes its SIGTERM and exits: then the job
		// is in its grace period, which only KillNow can cut short.
		j := h.job(t, "-ignore-term", "-grandchild", "-escape", "setsid", "-polite", termfile, "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		killNow := make(chan struct{})
		j.KillNow = killNow
		ctx, cancel := context.WithCancel(context.Background())
		a := start(t, h.New(t), ctx, j)
		pids := waitPIDs(t, pidfile, 2)
		cancel()
		waitLine(t, termfile, fmt.Sprint("TERM ", pids[1]))
		waitGone(t, pids[1])
		close(killNow)
		r := a.result(t, "KillNow was closed")
		wantReason(t, r, executor.Cancelled)
		if !r.Started || r.Err != nil || r.Signal != syscall.SIGKILL {
			t.Errorf("result = %+v, want killed by SIGKILL", r)
		}
		waitGone(t, pids[0])
	})

	t.Run("KillNowEscaped", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		j := h.job(t, "-ignore-term", "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-sleep", "1h")
		j.KillGrace = time.Hour
		killNow := make(chan struct{})
		j.KillNow = killNow
		a := start(t, h.New(t), context.Background(), j)
		pids := waitPIDs(t, pidfile, 2)
		close(killNow)
		r := a.result(t, "KillNow was closed")
		wantReason(t, r, executor.Cancelled)
		if !r.Started || r.Err != nil || r.Signal != syscall.SIGKILL {
			t.Errorf("result = %+v, want killed by SIGKILL", r)
		}
		for _, pid := range pids {
			waitGone(t, pid)
		}
	})
}

// ending is how a job in the escape tests comes to its end.
type ending struct {
	name string
	// args make the sleeper end this way once it has started its
	// grandchild: exit, or wait to be stopped (ignoring SIGTERM).
	args []string
	// cancel: the test cancels the job's context once its processes are
	// known; timeout: its Job.Timeout stops it. Neither: it exits.
	cancel, timeout bool
	want            executor.EndReason
}

var endings = []ending{
	{name: "Exit", args: []string{"-exit", "0"}, want: executor.Exited},
	{name: "Cancel", args: []string{"-ignore-term", "-sleep", "1h"}, cancel: true, want: executor.Cancelled},
	{name: "Timeout", args: []string{"-ignore-term", "-sleep", "1h"}, timeout: true, want: executor.TimedOut},
}

// runEscaped: processes that left the job's group are gone after its end,
// however it ended; processes that only look like the job's are not.
func runEscaped(t *testing.T, h Harness) {
	// run runs j until e ends it, and checks that none of the processes
	// listed in pidfile (want of them) is left.
	run := func(t *testing.T, j executor.Job, e ending, pidfile string, want int) {
		t.Helper()
		j.KillGrace = 200 * time.Millisecond
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(j.LogPath)
				t.Logf("the job's log:\n%s", b)
			}
		})
		if !e.timeout {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a := start(t, h.New(t), ctx, j)
			pids := waitPIDs(t, pidfile, want)
			if e.cancel {
				cancel()
			}
			r := a.result(t, "its end")
			wantReason(t, r, e.want)
			if !r.Started || r.Err != nil {
				t.Errorf("result = %+v", r)
			}
			for _, pid := range pids {
				waitGone(t, pid)
			}
			return
		}
		// A timeout cannot wait for the processes to be known.
		untilReady(t, 500*time.Millisecond, func(timeout time.Duration, last bool) bool {
			j.Timeout = timeout
			os.Remove(pidfile)
			r := start(t, h.New(t), context.Background(), j).result(t, "its timeout")
			pids := readPIDs(pidfile)
			for _, pid := range pids {
				waitGone(t, pid)
			}
			if len(pids) < want && !last {
				return false
			}
			wantReason(t, r, e.want)
			if !r.Started || r.Err != nil {
				t.Errorf("result = %+v", r)
			}
			if len(pids) < want {
				t.Errorf("the job's processes %v, want %d", pids, want)
			}
			return true
		})
	}

	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			for _, how := range []string{"setsid", "pgid"} {
				t.Run("Sleeper-"+how, func(t *testing.T) {
					t.Parallel()
					pidfile := filepath.Join(t.TempDir(), "pids")
					j := h.job(t, append([]string{"-grandchild", "-escape", how, "-pidfile", pidfile}, e.args...)...)
					run(t, j, e, pidfile, 2)
				})
			}
			t.Run("BashSetM", func(t *testing.T) {
				t.Parallel()
				bash := need(t, "bash")
				pidfile := filepath.Join(t.TempDir(), "pids")
				end := "exit 0"
				if e.cancel || e.timeout {
					end = "trap '' TERM; sleep 1000"
				}
				j := h.job(t)
				j.Args = []string{bash, "-c", `set -m
sleep 1000 & echo $! >>"$1"
"$2" -ignore-term -sleep 1h & echo $! >>"$1"
echo $$ >>"$1"
` + end, "bash", pidfile, h.Sleeper}
				run(t, j, e, pidfile, 3)
			})
			t.Run("Python", func(t *testing.T) {
				t.Parallel()
				python := need(t, "python3")
				pidfile := filepath.Join(t.TempDir(), "pids")
				j := h.job(t)
				j.Args = []string{python, "-c", `import os, signal, subprocess, sys, time
ps = [subprocess.Popen(["sleep", "1000"], start_new_session=True),
      subprocess.Popen([sys.argv[2], "-ignore-term", "-sleep", "1h"], start_new_session=True)]
if sys.version_info >= (3, 11):
    ps.append(subprocess.Popen(["sleep", "1000"], process_group=0))
else:
    ps.append(subprocess.Popen(["sleep", "1000"], preexec_fn=lambda: os.setpgid(0, 0)))
with open(sys.argv[1], "a") as f:
    f.write("".join(f"{p.pid}\n" for p in ps) + f"{os.getpid()}\n")
if sys.argv[3] == "stay":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(1000)
`, pidfile, h.Sleeper, map[bool]string{true: "stay", false: "exit"}[e.cancel || e.timeout]}
				run(t, j, e, pidfile, 4)
			})
		})
	}

	t.Run("OthersSpared", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, gofile := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
		j := h.job(t, "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-wait", gofile, "-exit", "0")
		a := start(t, h.New(t), context.Background(), j)
		pids := waitPIDs(t, pidfile, 2)
		// Started after the job's leader, as its own processes are, but
		// not by it: the token in another variable, inside another
		// variable's value, or another attempt's token.
		decoys := map[string][]string{
			"another variable":  {"OTHER_TOKEN=" + j.Token},
			"inside a value":    {"X=" + executor.TokenVar + "=" + j.Token},
			"another attempt's": {executor.TokenVar + "=" + j.Token + "0"},
			"a prefix of it":    {executor.TokenVar + "=" + j.Token[:len(j.Token)-1]},
		}
		alive := map[string]int{}
		for name, env := range decoys {
			alive[name] = startDecoy(t, h.Sleeper, env)
		}
		writeFileAt(t, gofile, "")
		if r := a.result(t, "it was let go on"); r.Reason != executor.Exited || r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		waitGone(t, pids[1])
		for name, pid := range alive {
			if !procfs.Alive(pid) {
				t.Errorf("a process with %s token was killed", name)
			}
		}
	})
}

// runCgroup: where the executor gives an attempt a cgroup of its own, a
// process that left the group and cleared its environment (out of the
// token's reach) is stopped with the attempt, and the cgroup removed.
func runCgroup(t *testing.T, h Harness) {
	t.Run("EnvClearingEscapee", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidfile, gate := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
		j := h.job(t, "-grandchild", "-escape", "setsid", "-clear-env", "-pidfile", pidfile, "-wait", gate, "-exit", "0")
		a := start(t, h.New(t), context.Background(), j)
		run := a.running(t)
		pids := waitPIDs(t, pidfile, 2)
		t.Cleanup(func() {
			if Alive(pids[1]) {
				syscall.Kill(pids[1], syscall.SIGKILL)
			}
		})
		cg := ownCgroup(run.PID, pids)
		writeFileAt(t, gate, "")
		r := a.result(t, "it was let go on")
		if cg == "" {
			t.Skip("the attempt has no cgroup of its own (not asked for, or the machine allows none)")
		}
		wantReason(t, r, executor.Exited)
		waitGone(t, pids[1])
		if _, err := os.Stat(cg); !os.IsNotExist(err) {
			t.Errorf("the attempt's cgroup %s is still there (%v)", cg, err)
		}
	})
}

// ownCgroup returns the folder of leader's cgroup when it holds nothing
// but members: a cgroup of the attempt's own. Else "".
func ownCgroup(leader int, members []int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(leader) + "/cgroup")
	if err != nil {
		return ""
	}
	var rel string
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			rel = p
		}
	}
	mount := cgroup2Mount()
	if rel == "" || mount == "" {
		return ""
	}
	dir := filepath.Join(mount, rel)
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return ""
	}
	in := pidsIn(string(procs))
	if !slices.Contains(in, leader) {
		return ""
	}
	for _, pid := range in {
		if !slices.Contains(members, pid) {
			return ""
		}
	}
	return dir
}

// cgroup2Mount returns where the cgroup2 hierarchy is mounted, or "".
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if fields := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(fields) >= 5 && fields[3] == "/" {
			return fields[4]
		}
	}
	return ""
}

// runRecoverLocal: after a restart, nothing of an attempt is left running
// once it is reported (Lost) or adopted and ended, including processes
// that left its group; an adopted one keeps its PID.
func runRecoverLocal(t *testing.T, h Harness) {
	for _, saved := range []bool{true, false} {
		t.Run(map[bool]string{true: "Escaped", false: "EscapedNoHandle"}[saved], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidfile, gate := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
			j := h.job(t, "-grandchild", "-escape", "setsid", "-pidfile", pidfile, "-wait", gate, "-exit", "3")
			o, _, ex := h.crashed(t, j)
			pids := waitPIDs(t, pidfile, 2)
			if !saved {
				o.Handle = executor.Handle{}
			}
			rec := recoverOne(t, ex, o)
			if !h.Adopts || !saved && !h.FindsByToken {
				wantLost(t, rec)
				for _, pid := range pids {
					waitGone(t, pid)
				}
				return
			}
			wantAdopted(t, ex, rec)
			if rec.Running.PID != pids[0] {
				t.Errorf("adopted attempt's PID = %d, want %d", rec.Running.PID, pids[0])
			}
			writeFileAt(t, gate, "")
			r := wait(t, rec, context.Background(), "it was let go on")
			wantReason(t, r, executor.Exited)
			if r.ExitCode != 3 {
				t.Errorf("result = %+v, want exited with 3", r)
			}
			for _, pid := range pids {
				waitGone(t, pid)
			}
		})
	}
}
