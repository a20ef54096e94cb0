package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sweepFlow is a sweep over n with the values given, gathered by a glob.
func sweepFlow(values string) string {
	return `defaults:
  retries: 0
tasks:
  - id: train-${n}
    matrix: {n: [` + values + `]}
    args: [sh, -c, "echo train-${n} >> ran; mkdir -p out; echo ${n} > out/${n}.txt"]
    artifacts: ["out/${n}.txt"]
  - id: aggregate
    dependencies: ["train-*"]
    args: [sh, -c, "echo aggregate >> ran; cat out/*.txt > all.txt"]
    artifacts: [all.txt]
`
}

// planRows returns plan's table as "TASK ACTION WHY" rows, one per task.
func planRows(t *testing.T, stdout string) []string {
	t.Helper()
	var rows []string
	for _, line := range strings.Split(stdout, "\n")[1:] {
		if line == "" {
			break
		}
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	return rows
}

// Adding a value to a matrix runs the new task and what gathers it, and
// keeps the others: expansion gives stable ids and definitions, so resume
// sees ordinary tasks. plan shows the expanded tasks.
func TestSweepAddValueRunsOnlyTheNewVariant(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "sweep.yaml"), sweepFlow("1, 2"))
	r := gs(t, "", "plan", wf)
	r.want(t, 0)
	want := []string{"train-1 run never ran", "train-2 run never ran", "aggregate run never ran"}
	if got := planRows(t, r.stdout); !slices.Equal(got, want) {
		t.Errorf("plan before any run:\n%s\nwant rows %q", r.stdout, want)
	}
	gs(t, "", "run", wf).want(t, 0)
	if got := sortedLines(readFile(t, filepath.Join(dir, "ran"))); !slices.Equal(got, []string{"aggregate", "train-1", "train-2"}) {
		t.Fatalf("first run ran %q", got)
	}
	os.Remove(filepath.Join(dir, "ran"))

	writeFile(t, wf, sweepFlow("1, 2, 3"))
	r = gs(t, "", "plan", wf)
	r.want(t, 0)
	want = []string{"train-1 keep complete, kept", "train-2 keep complete, kept", "train-3 run never ran",
		"aggregate run upstream train-3 reruns"}
	if got := planRows(t, r.stdout); !slices.Equal(got, want) {
		t.Errorf("plan after adding a value:\n%s\nwant rows %q", r.stdout, want)
	}
	r = gs(t, "", "plan", "--json", wf)
	r.want(t, 0)
	var p struct {
		Tasks []struct {
			ID  string `json:"id"`
			Run bool   `json:"run"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || len(p.Tasks) != 4 ||
		p.Tasks[2].ID != "train-3" || !p.Tasks[2].Run || p.Tasks[1].Run {
		t.Errorf("plan --json: %s (%v)", r.stdout, err)
	}
	gs(t, "", "run", wf).want(t, 0)
	if got := readFile(t, filepath.Join(dir, "ran")); got != "train-3\naggregate\n" {
		t.Errorf("the second run ran %q, want exactly train-3 then aggregate", got)
	}
	if got := readFile(t, filepath.Join(dir, "all.txt")); got != "1\n2\n3\n" {
		t.Errorf("all.txt = %q: the aggregate did not see the new variant", got)
	}
	os.Remove(filepath.Join(dir, "ran"))
	gs(t, "", "run", wf).want(t, 0)
	if exists(filepath.Join(dir, "ran")) {
		t.Errorf("a third run of the same sweep ran %q", readFile(t, filepath.Join(dir, "ran")))
	}
}

// validate names the line of each problem of a sweep, a glob or the
// defaults, and says nothing else: a shell's ${HOME} in a task without a
// matrix is no problem.
func TestSweepValidateNamesLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "bad.yaml"), `defaults:
  timeout: soon
tasks:
  - id: train-${lr}
    matrix: {lr: ["1e-3", "1e-4"]}
    args: [train, "${lrr}"]
  - id: aggregate
    dependencies: ["trian-*"]
    args: [x]
  - id: report
    args: [sh, -c, "echo ${HOME}"]
`)
	r := gs(t, dir, "validate", wf)
	r.want(t, 2)
	want := []string{
		wf + `:2: defaults: timeout: "soon" is not a duration; use Go syntax such as 90s, 30m or 2h`,
		wf + `:6: task "train-${lr}": args[1]: ${lrr}: the matrix has no variable lrr (it has lr); did you mean ${lr}?`,
		wf + `:8: task "aggregate": dependencies[0]: "trian-*" matches no task`,
	}
	got := strings.Split(strings.TrimSuffix(strings.ReplaceAll(r.stderr, "gpusched: ", ""), "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
