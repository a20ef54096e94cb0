package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// earlyN is the size of resumedBatch: a streamed batch.
const earlyN = 2000

// resumedBatch returns earlyN tasks in two chains, each task depending on
// the one two before it; t01000 starts a third chain of its own (no
// dependency) with priority 5, the others have 0. earlierRows has them
// all complete with definition "v1"; resumedBatch changes t00001's and
// t01000's ("v2"): both run again with what depends on them, while the
// even chain before t01000 stays complete. t01000 is the task decide
// starts first, once the tasks up to it are admitted.
func resumedBatch(t *testing.T, earlier func(id string) (*store.Row, bool)) Submission {
	t.Helper()
	specs := make([]*task.Spec, earlyN)
	for i := range specs {
		s := spec(fmt.Sprintf("t%05d", i))
		if i >= 2 && i != 1000 {
			s.Dependencies = []string{fmt.Sprintf("t%05d", i-2)}
		}
		if i == 1000 {
			s.Priority = 5
		}
		specs[i] = s
	}
	sub := submission(t, specs)
	sub.Fingerprint = make([]string, earlyN)
	sub.Resume = make([]Resume, earlyN)
	for i, s := range specs {
		sub.Fingerprint[i] = "v1"
		if i == 1 || i == 1000 {
			sub.Fingerprint[i] = "v2"
		}
		// As the scheduler judges a task that completed before.
		if r, ok := earlier(s.ID); ok {
			sub.Resume[i] = Resume{Intact: r.Fingerprint == sub.Fingerprint[i], Why: "definition changed"}
		}
	}
	return sub
}

// earlierRows writes resumedBatch's tasks as an earlier run left them.
func earlierRows(t *testing.T, st store.Store) {
	t.Helper()
	b := &store.Batch{}
	at := time.Unix(1_600_000_000, 0)
	for i := range earlyN {
		id := fmt.Sprintf("t%05d", i)
		b.Tasks = append(b.Tasks, store.TaskWrite{ID: id, Seq: int64(i), Kind: task.DefaultKind, Spec: []byte(`{}`),
			Fingerprint: "v1", State: task.Complete, Submitted: at})
		b.Attempts = append(b.Attempts, store.AttemptWrite{TaskID: id, Attempt: task.Attempt{Number: 1, Start: at, End: at, ExitCode: new(int)}})
	}
	if err := st.Apply(b); err != nil {
		t.Fatal(err)
	}
}

// A resumed batch whose caller runs it next starts its first task once
// the rows up to it are committed, before the others are written; the
// task is the one a Run after the whole batch starts first; the rest is
// committed before Submit returns. Without RunNext nothing starts before
// Run.
func TestEarlyStartBeforeTheRestIsCommitted(t *testing.T) {
	type atStart struct {
		newRows int        // rows written by this submission (seq >= earlyN)
		t01000  task.State // the task started
		t01001  task.State // after it: as the earlier run left it
		t00999  task.State // before it: as the submission judged it
	}
	stateOf := func(rows []store.Row, id string) task.State {
		for _, r := range rows {
			if r.ID == id {
				return r.State
			}
		}
		return 0
	}
	newRows := func(rows []store.Row) int {
		k := 0
		for _, r := range rows {
			if r.Seq >= earlyN {
				k++
			}
		}
		return k
	}
	run := func(runNext bool) (first string, seen *atStart, rows []store.Row, r *fakeRunner) {
		st := store.NewMemory()
		earlierRows(t, st)
		r = &fakeRunner{store: st, script: map[string][]step{}}
		var mu sync.Mutex
		var started []string
		e, err := Open(Config{MaxParallel: 1, Store: &streams{streaming: streaming{st}}, Runner: r, LogDir: "/logs",
			Observer: func(ev Event) {
				if ev.Kind == Started {
					mu.Lock()
					started = append(started, ev.TaskID)
					mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		testHookStartedEarly = func() {
			rows, err := st.Load()
			if err != nil {
				t.Error(err)
			}
			seen = &atStart{newRows(rows), stateOf(rows, "t01000"), stateOf(rows, "t01001"), stateOf(rows, "t00999")}
		}
		defer func() { testHookStartedEarly = nil }()
		sub := resumedBatch(t, e.Earlier)
		sub.RunNext = runNext
		if err := e.Submit(sub); err != nil {
			t.Fatal(err)
		}
		rows, err = st.Load()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(started) > 0 {
			first = started[0]
		}
		mu.Unlock()
		if runNext {
			return first, seen, rows, r
		}
		if first != "" || seen != nil {
			t.Fatalf("without RunNext, %q started before Run", first)
		}
		// The first start of a Run after the whole batch.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go e.Run(ctx)
		for first == "" {
			mu.Lock()
			if len(started) > 0 {
				first = started[0]
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
		return first, nil, rows, r
	}
	want, _, _, _ := run(false)
	first, seen, rows, r := run(true)
	if first != want || want != "t01000" {
		t.Fatalf("started early: %q; a Run after the batch starts %q first (want t01000 both)", first, want)
	}
	if seen == nil {
		t.Fatal("no early start")
	}
	// The prefix: t00000..t01000, and t01000 running in it.
	if want := (atStart{1001, task.Running, task.Complete, task.Pending}); *seen != want {
		t.Errorf("committed at the start: %+v; want %+v", *seen, want)
	}
	if n := newRows(rows); n != earlyN {
		t.Errorf("%d rows of the submission committed when it returned; want %d", n, earlyN)
	}
	for id, want := range map[string]task.State{"t01000": task.Running, "t01001": task.Pending, "t01002": task.Pending, "t00998": task.Complete, "t00999": task.Pending} {
		if got := stateOf(rows, id); got != want {
			t.Errorf("%s is %s once submitted; want %s", id, got, want)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 || !slices.Equal(r.starts, []string{"t01000#2"}) {
		t.Errorf("starts %v, problems %v; want t01000#2 alone, committed first", r.starts, r.problems)
	}
}

// A batch that could still be refused, or that is out of dependency order,
// starts nothing early.
func TestEarlyStartNotForARefusableBatch(t *testing.T) {
	cases := map[string]struct {
		change  func(sub *Submission)
		refused bool
	}{
		"duplicate": {func(sub *Submission) {
			sub.Specs = append(sub.Specs, spec("t01500"))
			sub.JSON = append(sub.JSON, []byte(`{}`))
		}, true},
		"out of order":       {func(sub *Submission) { sub.Specs[1500].Dependencies = []string{"t01701"} }, false},
		"unknown dependency": {func(sub *Submission) { sub.Specs[1700].Dependencies = []string{"nowhere"} }, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			st := store.NewMemory()
			earlierRows(t, st)
			r := &fakeRunner{store: st, script: map[string][]step{}}
			e, err := Open(Config{MaxParallel: 1, Store: &streams{streaming: streaming{st}}, Runner: r, LogDir: "/logs"})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			sub := resumedBatch(t, e.Earlier)
			sub.RunNext = true
			c.change(&sub)
			if err := e.Submit(sub); (err != nil) != c.refused {
				t.Fatalf("submitted: %v; want refused %v", err, c.refused)
			}
			rows, _ := st.Load()
			for _, row := range rows {
				if row.Seq >= earlyN && c.refused || row.State == task.Running {
					t.Fatalf("row %s is %s, seq %d: the batch was written, or started early", row.ID, row.State, row.Seq)
				}
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.starts) > 0 {
				t.Fatalf("started %v", r.starts)
			}
		})
	}
}

// earlyCrashEnv names the database that TestEarlyStartCrash's helper
// process resumes, and is killed in, between the two transactions.
const earlyCrashEnv = "GPUSCHED_TEST_EARLY_CRASH_DB"

// A scheduler killed (SIGKILL) once an early start is committed, before
// the rest of its batch is: the next resume judges every task as a
// resume of the state before the first would, no task kept complete
// downstream of one that runs again.
func TestEarlyStartCrash(t *testing.T) {
	if path := os.Getenv(earlyCrashEnv); path != "" {
		crashAfterEarlyStart(t, path)
		return
	}
	dir := t.TempDir()
	before, crashed := filepath.Join(dir, "before.db"), filepath.Join(dir, "crashed.db")
	for _, path := range []string{before, crashed} {
		st, err := store.OpenSQLite(path, dir)
		if err != nil {
			t.Fatal(err)
		}
		earlierRows(t, st)
		st.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEarlyStartCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), earlyCrashEnv+"="+crashed)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was not killed at the early start: %v\n%s", err, out)
	}
	// What the crash left: the prefix (t00000..t01000) rewritten, t01000
	// running; the rest as before.
	st, err := store.OpenSQLite(crashed, dir)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Load()
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]task.State{}
	for _, r := range rows {
		left[r.ID] = r.State
	}
	for id, want := range map[string]task.State{"t01000": task.Running, "t00999": task.Pending, "t01001": task.Complete, "t01002": task.Complete} {
		if left[id] != want {
			t.Fatalf("after the crash %s is %s; want %s", id, left[id], want)
		}
	}
	resume := func(path string) map[string]task.Record {
		st, err := store.OpenSQLite(path, dir)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(Config{MaxParallel: 1, Store: st, Runner: &fakeRunner{script: map[string][]step{}}, LogDir: "/logs"})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if err := e.Submit(resumedBatch(t, e.Earlier)); err != nil {
			t.Fatal(err)
		}
		recs := map[string]task.Record{}
		for _, r := range e.Records() {
			recs[r.ID] = r
		}
		return recs
	}
	want, got := resume(before), resume(crashed)
	if len(got) != earlyN || len(want) != earlyN {
		t.Fatalf("%d and %d tasks resumed; want %d", len(got), len(want), earlyN)
	}
	var wrong []string
	for i := range earlyN {
		id := fmt.Sprintf("t%05d", i)
		g, w := got[id], want[id]
		if g.State != w.State {
			wrong = append(wrong, fmt.Sprintf("%s %s (want %s)", id, g.State, w.State))
		}
		if g.State == task.Complete && i >= 2 && i != 1000 {
			if d := got[fmt.Sprintf("t%05d", i-2)]; d.State != task.Complete {
				wrong = append(wrong, fmt.Sprintf("%s kept complete, its dependency %s", id, d.State))
			}
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("resumed after the crash, unlike a resume of the state before it:\n%s", strings.Join(wrong[:min(len(wrong), 20)], "\n"))
	}
	if got["t01000"].State != task.Pending || got["t01002"].State != task.Pending || got["t00998"].State != task.Complete {
		t.Fatalf("t01000 %s, t01002 %s, t00998 %s; want pending, pending, complete", got["t01000"].State, got["t01002"].State, got["t00998"].State)
	}
}

// crashAfterEarlyStart is TestEarlyStartCrash's helper process: it
// resumes the database at path, and dies by SIGKILL once the early start
// is committed.
func crashAfterEarlyStart(t *testing.T, path string) {
	st, err := store.OpenSQLite(path, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{MaxParallel: 1, Store: st, Runner: &fakeRunner{script: map[string][]step{}}, LogDir: "/logs"})
	if err != nil {
		t.Fatal(err)
	}
	testHookStartedEarly = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	sub := resumedBatch(t, e.Earlier)
	sub.RunNext = true
	e.Submit(sub)
	t.Fatal("not killed: no early start")
}
