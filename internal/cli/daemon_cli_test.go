package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/workflow"
)

// The daemon's ids, as logs tells them from a run directory's tasks.
func TestIsDaemonID(t *testing.T) {
	for id, want := range map[string]bool{
		"12": true, "13/train": true, "1/a.b": true,
		"train": false, "12a": false, "/a": false, "1/": false, "1/a/b": false, "": false,
	} {
		if got := isDaemonID(id); got != want {
			t.Errorf("isDaemonID(%q) = %v", id, got)
		}
	}
}

func TestIsWorkflowFile(t *testing.T) {
	for arg, want := range map[string]bool{"wf.yaml": true, "a/B.YML": true, "python": false, "x.yaml.bak": false} {
		if got := isWorkflowFile(arg); got != want {
			t.Errorf("isWorkflowFile(%q) = %v", arg, got)
		}
	}
}

// The queue's table: the owner's command, another's run name; why a
// pending task waits; times of running and finished tasks.
func TestWriteQueue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	started, ended := now.Add(-90*time.Second), now.Add(-30*time.Second)
	card := 1
	var b strings.Builder
	writeQueue(&b, []client.TaskInfo{
		{ID: "12", Owner: "alice", State: "running", GPU: &card, Started: &started, Command: []string{"python", "train.py", "--note", "a b"}},
		{ID: "13", Owner: "bob", State: "pending", Waiting: "after 12", Name: "eval"},
		{ID: "14/a", Owner: "alice", State: "complete", Started: &started, Ended: &ended, Command: []string{"true"}},
		{ID: "15", Owner: "alice", State: "running", Paused: true, Started: &started, Command: []string{"sleep", "9"}},
	}, now)
	want := `ID    OWNER  STATE                              CARD  TIME   COMMAND
12    alice  running                            1     1m30s  python train.py --note "a b"
13    bob    pending: after 12                  -     -      (eval)
14/a  alice  complete                           -     1m00s  true
15    alice  running (paused: no retry starts)  -     1m30s  sleep 9
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeQueue(&b, nil, now)
	if b.String() != "no tasks\n" {
		t.Errorf("empty queue: %q", b.String())
	}
}

// wait's error names the tasks that did not complete, on one line.
func TestUnfinished(t *testing.T) {
	code := 3
	if err := unfinished([]client.TaskInfo{{ID: "1", State: "complete"}}); err != nil {
		t.Errorf("all complete: %v", err)
	}
	var tasks []client.TaskInfo
	tasks = append(tasks, client.TaskInfo{ID: "1", State: "failed", ExitCode: &code}, client.TaskInfo{ID: "2/b", State: "blocked", BlockedBy: "2/a"},
		client.TaskInfo{ID: "3", State: "cancelled", Error: "cancelled\nbefore it started"})
	for i := range 4 {
		tasks = append(tasks, client.TaskInfo{ID: "x" + string(rune('0'+i)), State: "failed"})
	}
	err := unfinished(tasks)
	want := "7 of 7 tasks did not complete: task 1 failed (exit code 3), task 2/b blocked by 2/a, task 3 cancelled (cancelled before it started), task x0 failed, task x1 failed, and 2 more"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// A workflow's tasks become the daemon's; other kinds and executors are
// refused, naming the task.
func TestDaemonTasks(t *testing.T) {
	yaml := "tasks:\n  - id: a\n    args: [echo]\n    retries: 0\n    timeout: 1m\n    resources: {device: cuda, memory_mib: 100}\n" +
		"  - id: b\n    args: ['true']\n    dependencies: [a]\n"
	w, err := workflow.ParseWith("/w/wf.yaml", []byte(yaml), workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := daemonTasks(w)
	if err != nil {
		t.Fatal(err)
	}
	if a := tasks[0]; a.ID != "a" || a.GPUMiB != 100 || a.Retries == nil || *a.Retries != -1 || time.Duration(a.Timeout) != time.Minute || a.Dir != "/w" {
		t.Errorf("a: %+v", a)
	}
	if b := tasks[1]; b.Retries != nil || strings.Join(b.Dependencies, ",") != "a" {
		t.Errorf("b: %+v", b)
	}
	w2, err := workflow.ParseWith("/w/wf.yaml", []byte("tasks:\n  - {id: a, args: [x]}\n  - {id: b, args: [x]}\n"+
		"  - {id: c, args: [x], dependencies: [a, {id: b, on: failure}, {id: a2, on: success}]}\n  - {id: a2, args: [x]}\n"), workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cond, err := daemonTasks(w2)
	if err != nil {
		t.Fatal(err)
	}
	if c := cond[2]; len(c.DependencyOn) != 1 || c.DependencyOn["b"] != "failure" || strings.Join(c.Dependencies, ",") != "a,b,a2" {
		t.Errorf("c: dependencies %q on %v; want b on failure alone", c.Dependencies, c.DependencyOn)
	}
	w.Tasks[1].Executor = "slurm"
	if _, err := daemonTasks(w); err == nil || !strings.Contains(err.Error(), `"b"`) || exitCode(err) != ExitInvalid {
		t.Errorf("another executor: %v", err)
	}
}

// The queue's table shows every card of a task on several, a dependency's
// condition as the daemon gives it, a task not needed, and, in a NOTE
// column, a learned GPU or host memory budget and a Slurm job, as
// gpusched status says them.
func TestWriteQueueNotes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	started := now.Add(-90 * time.Second)
	first := 2
	var b strings.Builder
	writeQueue(&b, []client.TaskInfo{
		{ID: "12", Owner: "alice", State: "running", GPU: &first, GPUs: []int{2, 1}, Started: &started, Command: []string{"train"},
			GPUMiB: 12544, GPUMiBSource: "history", GPUBudget: "memory_mib auto: 12544 MiB (peak 11000 MiB in 3 attempts + margin)"},
		{ID: "13", Owner: "alice", State: "pending", Waiting: "after 12 (any outcome)", Command: []string{"report"}},
		{ID: "14", Owner: "alice", State: "running", Started: &started, Command: []string{"remote"},
			Job: &client.Job{System: "Slurm", ID: "4242", State: "PENDING", Reason: "Priority", Queued: true}},
		{ID: "15", Owner: "alice", State: "blocked", NotNeeded: true, BlockedBy: "12", Command: []string{"cleanup"}},
		{ID: "16", Owner: "alice", State: "pending", Command: []string{"prep"},
			MemoryMiBHost: 768, MemoryMiBHostSource: "history", HostBudget: "memory_mib_host auto: 768 MiB (peak 41 MiB in 2 attempts + margin)"},
	}, now)
	want := `ID  OWNER  STATE                               CARD  TIME   NOTE                                                                COMMAND
12  alice  running                             2,1   1m30s  memory_mib auto: 12544 MiB (peak 11000 MiB in 3 attempts + margin)  train
13  alice  pending: after 12 (any outcome)     -     -      -                                                                   report
14  alice  running                             -     1m30s  Slurm job 4242 PENDING (Priority)                                   remote
15  alice  blocked: not needed (12 completed)  -     -      -                                                                   cleanup
16  alice  pending                             -     -      memory_mib_host auto: 768 MiB (peak 41 MiB in 2 attempts + margin)  prep
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// --resource NAME=N, of daemon and submit: counts by name, each given
// once, at least 1 unit; anything else is refused naming the flag.
func TestResourceFlags(t *testing.T) {
	got, err := resourceFlags("--resource", []string{"licenses=2", " db = 10"})
	if err != nil || len(got) != 2 || got["licenses"] != 2 || got["db"] != 10 {
		t.Errorf("resourceFlags: %v, %v", got, err)
	}
	if got, err := resourceFlags("--resource", nil); got != nil || err != nil {
		t.Errorf("no flag: %v, %v", got, err)
	}
	for _, bad := range [][]string{{"licenses"}, {"=2"}, {"licenses=two"}, {"licenses=0"}, {"a=1", "a=2"}} {
		if _, err := resourceFlags("--resource", bad); err == nil || !strings.Contains(err.Error(), "--resource") || exitCode(err) != ExitInvalid {
			t.Errorf("resourceFlags(%q): %v, want an input error naming --resource", bad, err)
		}
	}
}
