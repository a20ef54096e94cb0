package cli_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// startOrder is the tasks in the order their attempts started, from
// --events output.
func startOrder(t *testing.T, stdout string) []string {
	t.Helper()
	var ids []string
	for _, ev := range parseEvents(t, stdout) {
		if ev.Event == "started" {
			ids = append(ids, ev.Task)
		}
	}
	return ids
}

// scheduling.order: longest_first through "gpusched run", one task at a
// time. With no history, a task's timeout is its estimate and a task
// without one goes first; priority wins over both. It is the default of
// "gpusched run"; scheduling.order: submitted, or --order submitted over
// the file's key, is the file's order.
func TestRunOrderLongestFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tasks := "tasks:\n" +
		"  - {id: a, args: [true], timeout: 1m}\n" +
		"  - {id: b, args: [true], timeout: 1h}\n" +
		"  - {id: c, args: [true]}\n" +
		"  - {id: d, args: [true], timeout: 10m}\n" +
		"  - {id: e, args: [true], timeout: 1s, priority: 1}\n"
	longest := writeFile(t, filepath.Join(dir, "longest.yaml"), "scheduling:\n  order: longest_first\n"+tasks)
	r := gs(t, "", "run", longest, "-j", "1", "--events", "-")
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"e", "c", "b", "d", "a"}; !slices.Equal(got, want) {
		t.Errorf("longest_first: started %v, want %v", got, want)
	}

	plain := writeFile(t, filepath.Join(dir, "plain.yaml"), tasks)
	r = gs(t, "", "run", plain, "-j", "1", "--events", "-")
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"e", "c", "b", "d", "a"}; !slices.Equal(got, want) {
		t.Errorf("default order: started %v, want %v", got, want)
	}
	submitted := writeFile(t, filepath.Join(dir, "submitted.yaml"), "scheduling:\n  order: submitted\n"+tasks)
	r = gs(t, "", "run", submitted, "-j", "1", "--events", "-")
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"e", "a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("order: submitted: started %v, want %v", got, want)
	}
	r = gs(t, "", "run", submitted, "-j", "1", "--events", "-", "--order", "longest_first", "--run-dir", filepath.Join(dir, "flag"))
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"e", "c", "b", "d", "a"}; !slices.Equal(got, want) {
		t.Errorf("--order longest_first: started %v, want %v", got, want)
	}
	r = gs(t, "", "run", longest, "-j", "1", "--events", "-", "--order", "submitted", "--run-dir", filepath.Join(dir, "again"))
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"e", "a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("--order submitted: started %v, want %v", got, want)
	}
}

// With history in the run directory, the estimate is how long the
// task's earlier attempts ran: failed tasks run again, longest first.
func TestRunOrderLearnsFromHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "scheduling:\n  order: longest_first\ntasks:\n"+
		"  - {id: quick, args: [sh, -c, 'exit 1']}\n"+
		"  - {id: slow, args: [sh, -c, 'sleep 1.5; exit 1']}\n")
	r := gs(t, "", "run", wf, "-j", "1", "--events", "-")
	r.want(t, 1)
	if got, want := startOrder(t, r.stdout), []string{"quick", "slow"}; !slices.Equal(got, want) {
		t.Errorf("first run (no history, no timeouts: submission order): started %v, want %v", got, want)
	}
	r = gs(t, "", "run", wf, "-j", "1", "--events", "-")
	r.want(t, 1)
	if got, want := startOrder(t, r.stdout), []string{"slow", "quick"}; !slices.Equal(got, want) {
		t.Errorf("second run: started %v, want %v", got, want)
	}
}

// The default order counts what waits for a task: a short task that
// gates a long one starts before a task longer than it alone.
func TestRunOrderCountsWhatWaits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tasks := "tasks:\n" +
		"  - {id: long, args: [true], timeout: 1h}\n" +
		"  - {id: gate, args: [true], timeout: 1m}\n" +
		"  - {id: after, args: [true], timeout: 2h, dependencies: [gate]}\n" +
		"  - {id: short, args: [true], timeout: 2m}\n"
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), tasks)
	r := gs(t, "", "run", wf, "-j", "1", "--events", "-")
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"gate", "after", "long", "short"}; !slices.Equal(got, want) {
		t.Errorf("default order: started %v, want %v", got, want)
	}
	r = gs(t, "", "run", wf, "-j", "1", "--events", "-", "--order", "submitted", "--run-dir", filepath.Join(dir, "submitted"))
	r.want(t, 0)
	if got, want := startOrder(t, r.stdout), []string{"long", "gate", "after", "short"}; !slices.Equal(got, want) {
		t.Errorf("--order submitted: started %v, want %v", got, want)
	}
}

// An invalid order is invalid input, said on one line naming where.
func TestRunOrderInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - {id: a, args: [true]}\n")
	r := gs(t, "", "run", wf, "--order", "shortest_first")
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "--order") || !strings.Contains(msg, `"shortest_first"`) {
		t.Errorf("error %q does not name --order and the value", msg)
	}
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "scheduling:\n  order: random\ntasks:\n  - {id: a, args: [true]}\n")
	r = gs(t, "", "run", bad)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "bad.yaml:2") || !strings.Contains(msg, "scheduling.order") {
		t.Errorf("error %q does not name the file's line and scheduling.order", msg)
	}
	if exists(filepath.Join(dir, ".gpusched")) {
		t.Error("a run directory was created")
	}
}
