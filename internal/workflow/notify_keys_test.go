package workflow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/workflow"
)

// The notification keys: a task's on_failure, and scheduling's
// on_run_end (run in the workflow's folder) and webhook.
func TestNotificationKeys(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse("/flows/sweep.yaml", []byte(`
scheduling:
  on_run_end: [sh, report.sh]
  webhook: https://hooks.example.com/services/T0/B1/secret
tasks:
  - id: train
    args: [python3, train.py]
    on_failure: [sh, -c, 'echo "$GPUSCHED_TASK_ID failed" >> failures.log']
`))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Scheduling
	if !slices.Equal(s.OnRunEnd, []string{"sh", "report.sh"}) || s.OnRunEndDir != "/flows" || s.Webhook != "https://hooks.example.com/services/T0/B1/secret" {
		t.Errorf("scheduling = on_run_end %q in %q, webhook %q", s.OnRunEnd, s.OnRunEndDir, s.Webhook)
	}
	if got := w.Tasks[0].OnFailure; len(got) != 3 || got[0] != "sh" {
		t.Errorf("on_failure = %q", got)
	}
}

// Each mistake in them is one line naming the file, the line and the
// field; a webhook's URL is shown without its path, which often holds a
// secret.
func TestNotificationKeyErrors(t *testing.T) {
	t.Parallel()
	task := "tasks:\n  - id: a\n    args: [x]\n"
	tests := []struct{ doc, want string }{
		{"scheduling:\n  webhook: ftp://files.example.com/s3cret\n" + task,
			`/f.yaml:2: scheduling.webhook: "ftp://files.example.com/…" is not an http or https URL`},
		{"scheduling:\n  webhook: hooks.example.com/s3cret\n" + task,
			`/f.yaml:2: scheduling.webhook: "hooks.example.com/…" is not an http or https URL`},
		{"scheduling:\n  webhook: \"https://exa mple.com/s3cret\"\n" + task,
			`/f.yaml:2: scheduling.webhook: "https://exa mple.com/…" is not a URL: invalid character " " in host name`},
		{"scheduling:\n  webhook: [a]\n" + task, `/f.yaml:2: scheduling.webhook must be a single value, not a list`},
		{"scheduling:\n  on_run_end: []\n" + task, `/f.yaml:2: scheduling.on_run_end is empty: give a command`},
		{"scheduling:\n  on_run_end: sh\n" + task, `/f.yaml:2: scheduling.on_run_end must be a list`},
		{"scheduling:\n  max_parallel_tasks: 2\n  on_run_end: [\"\", x]\n" + task, `/f.yaml:3: scheduling.on_run_end: empty command`},
		{task + "    on_failure: []\n", `/f.yaml:4: task "a": on_failure is empty: give a command`},
		{task + "    on_failure: [\" \"]\n", `/f.yaml:4: task "a": on_failure: empty command`},
		{task + "    on_failure: [sh, \"a\\0\"]\n", `/f.yaml:4: task "a": on_failure[1]: "a\x00" has a NUL byte`},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cret\"") || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%q:\n got %v\nwant one line starting %s", tt.doc, err, tt.want)
		}
	}
}

// on_failure is an ordinary task key: defaults: gives it to the tasks
// that have none, and a sweep's ${name} is substituted in it.
func TestOnFailureInDefaultsAndSweeps(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse("/flows/sweep.yaml", []byte(`
defaults:
  on_failure: [notify, default]
tasks:
  - id: train-${seed}
    matrix: {seed: [1, 2]}
    args: [train, "${seed}"]
    on_failure: [notify, "seed ${seed}"]
  - id: report
    args: [report]
`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, tk := range w.Tasks {
		got[tk.ID] = tk.OnFailure
	}
	want := map[string][]string{"train-1": {"notify", "seed 1"}, "train-2": {"notify", "seed 2"}, "report": {"notify", "default"}}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("%s: on_failure %q, want %q", id, got[id], w)
		}
	}
}
