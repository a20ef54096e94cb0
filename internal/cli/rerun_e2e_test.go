package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rerunFlow writes a workflow whose tasks read inputs and append their id
// to dir/ran: prepare reads data/*.csv, train params.json and prepare's
// output, evaluate train's model; other reads nothing of theirs.
func rerunFlow(t *testing.T, dir string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, "params.json"), `{"lr": 1}`)
	writeFile(t, filepath.Join(dir, "data", "a.csv"), "1\n")
	return writeFile(t, filepath.Join(dir, "flow.yaml"), `
tasks:
  - id: prepare
    args: `+sh("echo prepare >> ran; mkdir -p out; cat data/*.csv > out/data.txt")+`
    inputs: ["data/*.csv"]
    artifacts: [out/data.txt]
  - id: train
    dependencies: [prepare]
    args: `+sh("echo train >> ran; cat params.json out/data.txt > out/model.pt")+`
    inputs: [params.json]
    artifacts: [out/model.pt]
  - id: evaluate
    dependencies: [train]
    args: `+sh("echo evaluate >> ran; wc -c < out/model.pt > out/eval.txt")+`
    artifacts: [out/eval.txt]
  - id: other
    args: `+sh("echo other >> ran")+`
`)
}

// ran returns the tasks that ran since the last call, in order, and
// forgets them.
func ranTasks(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ran")
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	return strings.Join(strings.Fields(string(b)), " ")
}

// combined runs gpusched with stdout and stderr in one stream, so that
// the order of what it says on each is kept.
func combined(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, "", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gpusched %s did not finish within a minute:\n%s", strings.Join(args, " "), out.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// Editing an input reruns its task and everything downstream, with the
// reason in plan and in run's output; the other tasks are kept.
func TestInputChangeReruns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := rerunFlow(t, dir)
	gs(t, "", "run", "--no-progress", wf).want(t, 0)
	ranTasks(t, dir)

	writeFile(t, filepath.Join(dir, "params.json"), `{"lr": 2}`)
	r := gs(t, "", "plan", wf)
	r.want(t, 0)
	for _, want := range []string{
		"prepare   keep    complete, kept",
		"train     run     input changed: params.json",
		"evaluate  run     upstream train reruns",
		"other     keep    complete, kept",
		"2 of 4 tasks would run",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}
	r = gs(t, "", "run", "--no-progress", wf)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "start     train (attempt 2; runs again: input changed: params.json)") {
		t.Errorf("run does not say why train runs again:\n%s", r.stdout)
	}
	if got := ranTasks(t, dir); got != "train evaluate" {
		t.Errorf("ran %q, want train then evaluate", got)
	}

	writeFile(t, filepath.Join(dir, "data", "b.csv"), "2\n")
	r = gs(t, "", "plan", wf)
	if !strings.Contains(r.stdout, "prepare   run     input added: data/b.csv") {
		t.Errorf("plan after adding a file a glob finds:\n%s", r.stdout)
	}
	gs(t, "", "run", "--no-progress", wf).want(t, 0)
	if got := ranTasks(t, dir); got != "prepare train evaluate" {
		t.Errorf("ran %q", got)
	}
}

// --force, --only and --from choose what runs, in plan and in run;
// unknown ids and stale dependencies are refused before anything runs.
func TestForceOnlyFromFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := rerunFlow(t, dir)
	gs(t, "", "run", "--no-progress", wf).want(t, 0)
	ranTasks(t, dir)

	tests := []struct {
		flags []string
		plan  []string
		ran   string
	}{
		{[]string{"--force", "train"}, []string{"train     run     forced", "evaluate  run     upstream train reruns", "other     keep"}, "train evaluate"},
		{[]string{"--force", "tr*,oth?r"}, []string{"train     run     forced", "other     run     forced"}, ""},
		{[]string{"--only", "evaluate"}, []string{"evaluate  run     forced", "other     skip    not selected", "1 of 4 tasks would run"}, "evaluate"},
		{[]string{"--from", "train"}, []string{"prepare   keep", "train     run     forced", "evaluate  run     forced", "other     skip    not selected"}, "train evaluate"},
	}
	for _, tt := range tests {
		r := gs(t, "", append([]string{"plan", wf}, tt.flags...)...)
		r.want(t, 0)
		for _, want := range tt.plan {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("plan %v lacks %q:\n%s", tt.flags, want, r.stdout)
			}
		}
		if tt.ran == "" {
			continue
		}
		gs(t, "", append([]string{"run", "--no-progress", wf}, tt.flags...)...).want(t, 0)
		if got := ranTasks(t, dir); got != tt.ran {
			t.Errorf("run %v ran %q, want %q", tt.flags, got, tt.ran)
		}
	}

	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--force", "nope,tr*,zz?"}, `--force: no task of the workflow matches "nope", "zz?"`},
		{[]string{"--only", "["}, `--only: "[" is not a valid glob`},
		{[]string{"--force", "train", "--from", "prepare"}, "--force cannot be combined with --only or --from"},
	} {
		for _, cmd := range []string{"plan", "run"} {
			r := gs(t, "", append([]string{cmd, wf}, tt.flags...)...)
			r.want(t, 2)
			if msg := oneLineError(t, r); !strings.Contains(msg, tt.want) {
				t.Errorf("%s %v: %q, want it to say %q", cmd, tt.flags, msg, tt.want)
			}
		}
	}
	// A dependency that would run again: nothing runs, and the message
	// names it and why.
	writeFile(t, filepath.Join(dir, "data", "a.csv"), "changed\n")
	for _, cmd := range []string{"plan", "run"} {
		r := gs(t, "", cmd, wf, "--only", "train")
		r.want(t, 2)
		if msg := oneLineError(t, r); !strings.Contains(msg, `"prepare" (input changed: data/a.csv)`) {
			t.Errorf("%s --only train with a stale prepare: %q", cmd, msg)
		}
	}
	if got := ranTasks(t, dir); got != "" {
		t.Errorf("a refused run ran %q", got)
	}
}

// A completed task whose artifact was edited by hand and that runs again
// is said in plan, and by run before anything runs; --keep-edited keeps
// it, and says so.
func TestEditedArtifactWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := rerunFlow(t, dir)
	gs(t, "", "run", "--no-progress", wf).want(t, 0)
	ranTasks(t, dir)
	model := filepath.Join(dir, "out", "model.pt")
	writeFile(t, model, "hand-tuned\n")
	writeFile(t, filepath.Join(dir, "params.json"), `{"lr": 3}`)

	warning := `warning: out/model.pt was changed after task "train" completed, and "train" runs again (input changed: params.json): the change will be overwritten; give --keep-edited to keep "train" as it is`
	r := gs(t, "", "plan", wf)
	r.want(t, 0)
	if !strings.Contains(r.stdout, "train     run     input changed: params.json") || !strings.Contains(r.stdout, warning) {
		t.Errorf("plan does not warn of the edited model:\n%s", r.stdout)
	}

	r = gs(t, "", "plan", wf, "--keep-edited")
	if !strings.Contains(r.stdout, "train     keep    complete, kept with its edited artifacts (it would run: input changed: params.json)") ||
		!strings.Contains(r.stdout, "evaluate  keep") {
		t.Errorf("plan --keep-edited:\n%s", r.stdout)
	}
	out, code := combined(t, "run", "--no-progress", "--keep-edited", wf)
	if code != 0 || !strings.Contains(out, `gpusched: out/model.pt was changed after task "train" completed; --keep-edited keeps "train" as it is`) {
		t.Errorf("run --keep-edited (exit %d):\n%s", code, out)
	}
	if got := ranTasks(t, dir); got != "" {
		t.Errorf("run --keep-edited ran %q", got)
	}
	if got := readFile(t, model); got != "hand-tuned\n" {
		t.Errorf("--keep-edited, yet the model is %q", got)
	}

	out, code = combined(t, "run", "--no-progress", wf)
	w, start := strings.Index(out, "gpusched: "+warning), strings.Index(out, "start     train")
	if code != 0 || w < 0 || start < 0 || w > start {
		t.Errorf("run (exit %d) must warn before train starts:\n%s", code, out)
	}
	if got := ranTasks(t, dir); got != "train evaluate" {
		t.Errorf("ran %q", got)
	}
	if got := readFile(t, model); got == "hand-tuned\n" {
		t.Error("train ran, yet the model is still the edited one")
	}
}

// Through a daemon every run is new, so the flags that choose what runs
// again mean nothing there: each is refused, naming itself and --local,
// and nothing is queued.
func TestRerunFlagsRefusedThroughDaemon(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t)
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "wf.yaml"), "tasks:\n  - id: a\n    args: ['true']\n")
	for _, flags := range [][]string{{"--force", "a"}, {"--only", "a"}, {"--from", "a"}, {"--keep-edited"}} {
		r := d.gs(t, dir, nil, append([]string{"run", "--daemon", "--socket", d.socket, wf}, flags...)...)
		r.want(t, 2)
		if msg := oneLineError(t, r); !strings.Contains(msg, flags[0]) || !strings.Contains(msg, "--local") {
			t.Errorf("%s through the daemon: %q", flags[0], msg)
		}
	}
	if q := d.queue(t); len(q) != 0 {
		t.Errorf("the daemon queued %d tasks; want none", len(q))
	}
}
