package slurm

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
)

func TestParseSacct(t *testing.T) {
	out := "41|COMPLETED|0:0|vm\n" +
		"42|CANCELLED by 1000|0:15|node[01-02]\n" +
		"43|OUT_OF_MEMORY|0:125|gpu7\n" +
		"44|PENDING|0:0|None assigned\n\n"
	jobs, err := parseSacct([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []jobState{
		{ID: "41", State: "COMPLETED", Exit: "0:0", Node: "vm"},
		{ID: "42", State: "CANCELLED", Exit: "0:15", Node: "node[01-02]"},
		{ID: "43", State: "OUT_OF_MEMORY", Exit: "0:125", Node: "gpu7"},
		{ID: "44", State: "PENDING", Exit: "0:0"},
	}
	if len(jobs) != len(want) {
		t.Fatalf("jobs = %+v, want %+v", jobs, want)
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, jobs[i], want[i])
		}
	}
	for _, bad := range []string{"41|COMPLETED|0:0", "41|COMPLETED|0:0|vm|extra", "|COMPLETED|0:0|vm"} {
		if _, err := parseSacct([]byte(bad)); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
}

func TestAccountingDisabled(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&CommandError{Name: "sacct", Err: errors.New("exit status 1"), Stderr: "Slurm accounting storage is disabled"}, true},
		{&CommandError{Name: "sacct", Err: &exec.Error{Name: "sacct", Err: exec.ErrNotFound}}, true},
		{&CommandError{Name: "sacct", Err: errors.New("exit status 1"), Stderr: "sacct: error: Problem talking to the database: Connection refused"}, false},
		{&CommandError{Name: "sacct", Err: errors.New("signal: killed")}, false},
	} {
		if got := accountingDisabled(tc.err); got != tc.want {
			t.Errorf("%v: disabled = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// forgottenJobs runs one job per admin action on f (each a sleeper that
// would run an hour), under an executor that dies (Close) once they run;
// then the cluster's administrator acts on each (fake-slurm admin
// ACTION ID, then forget: MinJobAge went by), and none wrote a result
// file. It returns the orphans, for a new scheduler to recover.
func forgottenJobs(t *testing.T, f *fake, cfg Config, actions ...string) ([]executor.Orphan, []string) {
	t.Helper()
	old := New(cfg)
	var orphans []executor.Orphan
	var ids []string
	var dones []<-chan executor.Result
	for range actions {
		j := executortest.NewJob(t, sleeper, "-sleep", "1h")
		rec := newRecorder()
		dones = append(dones, start(old, context.Background(), j, rec))
		await(t, rec.started, "the job runs")
		rec.mu.Lock()
		orphans = append(orphans, executor.Orphan{Job: j, Handle: rec.handles[0]})
		rec.mu.Unlock()
		ids = append(ids, rec.id(t))
	}
	old.Close()
	for _, d := range dones {
		await(t, d, "the scheduler died")
	}
	for i, a := range actions {
		if a != "" {
			f.admin(t, a, ids[i])
		}
		f.admin(t, "forget", ids[i])
	}
	return orphans, ids
}

// waitAll recovers orphans on ex and waits for each of them.
func waitAll(t *testing.T, ex *Executor, orphans []executor.Orphan) []executor.Result {
	t.Helper()
	recs := ex.Recover(orphans)
	chans := make([]chan executor.Result, len(recs))
	for i, rec := range recs {
		if rec.Wait == nil {
			t.Fatalf("orphan %d: recovery %+v, want it adopted (no result file)", i, rec.Result)
		}
		chans[i] = make(chan executor.Result, 1)
		go func() { chans[i] <- rec.Wait(context.Background()) }()
	}
	out := make([]executor.Result, len(recs))
	for i, c := range chans {
		out[i] = await(t, c, "recovery")
	}
	return out
}

// sacctCalls returns the --jobs lists of f's sacct calls.
func sacctCalls(f *fake) [][]string {
	var out [][]string
	for _, c := range f.calls() {
		if !strings.HasPrefix(c, "sacct ") {
			continue
		}
		for _, a := range strings.Fields(c) {
			if ids, ok := strings.CutPrefix(a, "--jobs="); ok {
				out = append(out, strings.Split(ids, ","))
			}
		}
	}
	return out
}

// TestAccountingOn: jobs that ended while no scheduler watched, and that
// the controller has forgotten since, are recorded from accounting, all
// asked about in one sacct call: out of memory (charged), node failure
// (not charged). A job accounting still thinks runs (its node died with
// it) is lost after the grace. A job sacct said had ended is not asked
// about again.
func TestAccountingOn(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "accounting", "")
	cfg := testConfig(f)
	cfg.PollMin = 300 * time.Millisecond // the three follows land in one round
	orphans, ids := forgottenJobs(t, f, cfg, "oom", "nodefail", "vanish")
	ex := newExecutor(t, cfg)
	res := waitAll(t, ex, orphans)
	if r := res[0]; r.Reason != executor.Signalled || r.Signal != syscall.SIGKILL || !r.Reason.Charged() ||
		r.Err == nil || !strings.Contains(r.Err.Error(), "OUT_OF_MEMORY") {
		t.Errorf("out of memory: result = %+v, want signalled SIGKILL, charged, saying OUT_OF_MEMORY", r)
	}
	if r := res[1]; r.Reason != executor.NodeFailure || r.Reason.Charged() {
		t.Errorf("node failure: result = %+v, want node failure, not charged", r)
	}
	if r := res[2]; r.Reason != executor.Lost || r.Err == nil || !strings.Contains(r.Err.Error(), "left Slurm") {
		t.Errorf("vanished: result = %+v, want lost, saying it left Slurm", r)
	}
	calls := sacctCalls(f)
	if len(calls) == 0 || strings.Join(slices.Sorted(slices.Values(calls[0])), ",") != strings.Join(slices.Sorted(slices.Values(ids)), ",") {
		t.Fatalf("sacct calls %q: want the first to ask about %v at once", calls, ids)
	}
	asked := map[string]int{}
	for _, c := range calls {
		for _, id := range c {
			asked[id]++
		}
	}
	if asked[ids[0]] != 1 || asked[ids[1]] != 1 {
		t.Errorf("sacct calls %q: the jobs it said had ended were asked about again", calls)
	}
	if got := ex.tracker().acct.state.Load(); got != acctOn {
		t.Errorf("accounting state %d, want on", got)
	}
}

// TestAccountingOff: where accounting is off, the first need of it
// finds out, and sacct is never called again; the jobs are lost after
// the grace, as without accounting.
func TestAccountingOff(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := testConfig(f)
	orphans, _ := forgottenJobs(t, f, cfg, "oom", "oom")
	ex := newExecutor(t, cfg)
	for i, o := range orphans { // one after the other: two needs
		if r := waitAll(t, ex, []executor.Orphan{o})[0]; r.Reason != executor.Lost {
			t.Errorf("job %d: result = %+v, want lost", i, r)
		}
	}
	if n := f.count("sacct"); n != 1 {
		t.Errorf("%d sacct calls, want 1: the check, never repeated", n)
	}
	if got := ex.tracker().acct.state.Load(); got != acctOff {
		t.Errorf("accounting state %d, want off", got)
	}
}

// TestAccountingUnanswered: sacct that fails otherwise (slurmdbd does
// not answer) leaves accounting undecided, and it is asked again.
func TestAccountingUnanswered(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.set(t, "accounting", "")
	cfg := testConfig(f)
	cfg.LostGrace = 3 * time.Second // the second call comes before it ends
	orphans, _ := forgottenJobs(t, f, cfg, "nodefail")
	f.set(t, "slurmdbd-down", "1")
	ex := newExecutor(t, cfg)
	r := waitAll(t, ex, orphans)[0]
	if r.Reason != executor.NodeFailure {
		t.Errorf("result = %+v, want node failure", r)
	}
	if n := f.count("sacct"); n != 2 {
		t.Errorf("%d sacct calls, want 2: one unanswered, then one answered", n)
	}
}
