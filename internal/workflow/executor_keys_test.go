package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// executors returns each task's executor, by id.
func executors(w *workflow.Workflow) map[string]string {
	out := map[string]string{}
	for _, t := range w.Tasks {
		out[t.ID] = t.Executor
	}
	return out
}

// scheduling.executor is the executor of the tasks that name none; a
// task's own executor key wins; Options.Executor (--executor) takes the
// place of scheduling.executor, and a task's own key still wins over it.
func TestExecutorPrecedence(t *testing.T) {
	t.Parallel()
	const doc = `tasks:
  - id: plain
    args: [x]
  - id: own
    args: [x]
    executor: local
scheduling:
  executor: local
`
	tests := []struct {
		name     string
		doc      string
		opts     workflow.Options
		workflow string
		want     map[string]string
	}{
		{"none anywhere", "tasks:\n  - id: plain\n    args: [x]\n", workflow.Options{}, "", map[string]string{"plain": ""}},
		{"file default, after the tasks", doc, workflow.Options{}, "local", map[string]string{"plain": "local", "own": "local"}},
		{"options without a file default", "tasks:\n  - id: plain\n    args: [x]\n", workflow.Options{Executor: "local"}, "local", map[string]string{"plain": "local"}},
		{"options over the file default", doc, workflow.Options{Executor: "local", ExecutorFrom: "--executor"}, "local", map[string]string{"plain": "local", "own": "local"}},
	}
	for _, tt := range tests {
		w, err := workflow.ParseWith("/f.yaml", []byte(tt.doc), tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if w.Executor != tt.workflow {
			t.Errorf("%s: Workflow.Executor = %q, want %q", tt.name, w.Executor, tt.workflow)
		}
		if got := executors(w); !equalMaps(got, tt.want) {
			t.Errorf("%s: executors %v, want %v", tt.name, got, tt.want)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Only local and slurm exist: which of the tasks take another executor
// decides where the error is said. A task's own key is blamed at its line,
// once per task; the file's default once, at its line; a name that cannot
// be an executor's is said as such, once.
func TestExecutorErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"unknown, a task's own", "tasks:\n  - id: a\n    args: [x]\n    executor: slurmm\n",
			[]string{`/f.yaml:4: task "a": executor: unknown executor "slurmm" (known: local, slurm)`}},
		{"unknown, two tasks' own", "tasks:\n  - id: a\n    args: [x]\n    executor: slurmm\n  - id: b\n    executor: slurmm\n    args: [x]\n",
			[]string{`/f.yaml:4: task "a": executor: unknown executor "slurmm" (known: local, slurm)`,
				`/f.yaml:6: task "b": executor: unknown executor "slurmm" (known: local, slurm)`}},
		{"unknown, the file's default, said once", "scheduling:\n  executor: slurmm\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n  - id: c\n    args: [x]\n    executor: local\n",
			[]string{`/f.yaml:2: scheduling.executor: unknown executor "slurmm" (known: local, slurm)`}},
		{"unknown, beside another problem", "tasks:\n  - id: a\n    args: [x]\n    priorty: 1\n  - id: b\n    args: [x]\n    executor: kubernetes\n",
			[]string{`/f.yaml:4: task "a": unknown key "priorty" (did you mean "priority"?)`,
				`/f.yaml:7: task "b": executor: unknown executor "kubernetes" (known: local, slurm)`}},
		{"unknown default beside another problem", "scheduling:\n  executor: kubernetes\ntasks:\n  - id: a\n    args: [x]\n    timeout: soon\n  - id: b\n    args: [x]\n",
			[]string{`/f.yaml:2: scheduling.executor: unknown executor "kubernetes" (known: local, slurm)`,
				`/f.yaml:6: task "a": timeout: "soon" is not a duration; use Go syntax such as 90s, 30m or 2h`}},
		{"not a name, a task's own", "tasks:\n  - id: a\n    args: [x]\n    executor: Slurm\n",
			[]string{`/f.yaml:4: task "a": executor: "Slurm" is not an executor name: use a lowercase letter, then lowercase letters, digits, _ and -`}},
		{"not a name, the file's default", "scheduling:\n  executor: my.cluster\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n",
			[]string{`/f.yaml:2: scheduling.executor: "my.cluster" is not an executor name: use a lowercase letter, then lowercase letters, digits, _ and -`}},
		{"empty", "tasks:\n  - id: a\n    args: [x]\n    executor:\n",
			[]string{`/f.yaml:4: task "a": executor is empty: name an executor, e.g. local`}},
		{"empty default", "scheduling:\n  executor: \"\"\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`/f.yaml:2: scheduling.executor is empty: name an executor, e.g. local`}},
		{"a list", "tasks:\n  - id: a\n    args: [x]\n    executor: [local, slurm]\n",
			[]string{`/f.yaml:4: task "a": executor must be a single value, not a list`}},
		{"at the top", "executor: local\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`/f.yaml:1: workflow: unknown key "executor" (the default executor of a workflow's tasks goes under "scheduling:")`}},
		{"misspelt", "tasks:\n  - id: a\n    args: [x]\n    executer: local\n",
			[]string{`/f.yaml:4: task "a": unknown key "executer" (did you mean "executor"?)`}},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil {
			t.Errorf("%s: Parse succeeded", tt.name)
			continue
		}
		if got := err.Error(); got != strings.Join(tt.want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, strings.Join(tt.want, "\n"))
		}
		var list *workflow.ErrorList
		if !errors.As(err, &list) || len(list.Errs) != len(tt.want) {
			t.Errorf("%s: %T is not a list of %d problems", tt.name, err, len(tt.want))
		}
	}
}

// An unknown executor is an invalid task whichever way it is found (the
// fast check of a file with no other problem, or the search for all of
// them), as the scheduler's own check says.
func TestUnknownExecutorIsAnInvalidTask(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		"tasks:\n  - id: a\n    args: [x]\n    executor: slurmm\n",
		"tasks:\n  - id: a\n    args: [x]\n    executor: slurmm\n  - id: b\n    args: [x]\n    priorty: 1\n",
		"scheduling:\n  executor: slurmm\ntasks:\n  - id: a\n    args: [x]\n",
	} {
		_, err := workflow.Parse("/f.yaml", []byte(doc))
		var te *gpusched.TaskError
		if !errors.Is(err, gpusched.ErrInvalidTask) || !errors.As(err, &te) || te.Field != "executor" || te.TaskID != "a" {
			t.Errorf("%q: Parse() = %v, want an invalid task a on field executor", doc, err)
		}
	}
	err := gpusched.ValidateTasks([]gpusched.TaskSpec{{ID: "a", Payload: []string{"x"}, Executor: "slurmm"}})
	var te *gpusched.TaskError
	if !errors.As(err, &te) || te.Reason != `unknown executor "slurmm" (known: local, slurm)` {
		t.Errorf("ValidateTasks() = %v: the messages above quote its reason", err)
	}
}

// Options.Executor is judged once, before the file, and whether or not a
// task takes it; the message names where it came from.
func TestOptionsExecutorErrors(t *testing.T) {
	t.Parallel()
	const doc = "tasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n    executor: local\n"
	const owned = "tasks:\n  - id: a\n    args: [x]\n    executor: local\n"
	tests := []struct {
		doc  string
		opts workflow.Options
		want string
	}{
		{doc, workflow.Options{Executor: "slurmm", ExecutorFrom: "--executor"}, `/f.yaml: --executor: unknown executor "slurmm" (known: local, slurm)`},
		{owned, workflow.Options{Executor: "slurmm", ExecutorFrom: "--executor"}, `/f.yaml: --executor: unknown executor "slurmm" (known: local, slurm)`},
		{doc, workflow.Options{Executor: "Slurm"}, `/f.yaml: the default executor: "Slurm" is not an executor name: use a lowercase letter, then lowercase letters, digits, _ and -`},
		{"tasks: [", workflow.Options{Executor: "slurmm", ExecutorFrom: "--executor"}, `/f.yaml: --executor: unknown executor "slurmm" (known: local, slurm)`},
	}
	for _, tt := range tests {
		_, err := workflow.ParseWith("/f.yaml", []byte(tt.doc), tt.opts)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%+v on %q:\n got %v\nwant %s", tt.opts, tt.doc, err, tt.want)
		}
	}
}
