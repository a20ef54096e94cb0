package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate, run and plan print every problem of an invalid workflow, one
// line each, in file order, and exit 2 without running anything.
func TestInvalidWorkflowReportsEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	wf := writeFile(t, filepath.Join(dir, "bad.yaml"), `tasks:
  - id: prepare
    args: [touch, `+q(marker)+`]
    priorty: 1
  - id: train
    args: [echo, "a\0b"]
    dependencies: [prepare, prepar]
  - id: eval
    args: [x]
    env: {SEED: "1\0"}
    resources: {device: tpu}
  - id: prepare
    args: [x]
`)
	want := []string{
		wf + `:4: task "prepare": unknown key "priorty" (did you mean "priority"?)`,
		wf + `:6: task "train": args[1]: "a\x00b" has a NUL byte, which a command line cannot hold`,
		wf + `:7: task "train": dependencies: depends on "prepar", which is not defined (did you mean "prepare"?)`,
		wf + `:10: task "eval": env: the value of "SEED" has a NUL byte, which an environment cannot hold`,
		wf + `:11: task "eval": resources.device: must be "cpu" or "cuda", not "tpu"`,
		wf + `:12: task "prepare": id: defined twice (first on line 2)`,
	}
	for _, args := range [][]string{{"validate", wf}, {"run", wf}, {"plan", wf}, {"run", "--dry-run", wf}} {
		r := gs(t, dir, args...)
		r.want(t, 2)
		var got []string
		for _, line := range strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n") {
			got = append(got, strings.TrimPrefix(line, "gpusched: "))
			if !strings.HasPrefix(line, "gpusched: ") {
				t.Errorf("%v: line %q lacks the prefix", args, line)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: stderr:\n%s\nwant:\n%s", args, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if r.stdout != "" {
			t.Errorf("%v: stdout %q, want nothing", args, r.stdout)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("a task ran: %s exists (%v)", marker, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".gpusched")); !os.IsNotExist(err) {
		t.Errorf("a run directory was made for an invalid workflow (%v)", err)
	}
}
