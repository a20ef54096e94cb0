package cli_test

// End-to-end tests of how commands name a workflow and a run: "-" for
// standard input, workflows that are not files in a folder of their own,
// and the one run under ./.gpusched.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gsIn runs gpusched in dir with stdin, to the end.
func gsIn(t *testing.T, dir string, stdin *os.File, input string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, dir, args...)
	switch {
	case stdin != nil:
		cmd.Stdin = stdin
	default:
		cmd.Stdin = strings.NewReader(input)
	}
	return finish(t, ctx, cmd, args)
}

const pwdWorkflow = `
tasks:
  - id: here
    args: [pwd]
  - id: below
    dir: sub
    args: [pwd]
`

// "run -" reads the workflow from standard input: its run directory is
// ./.gpusched/stdin and its tasks' relative dirs are relative to the
// current folder. status, logs and plan find it with "-"; status alone
// finds it as the only run.
func TestRunFromStdin(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(cwd, ".gpusched", "stdin")
	r := gsIn(t, cwd, nil, pwdWorkflow, "run", "-")
	r.want(t, 0)
	if !strings.Contains(r.stdout, "2 tasks in ") || !strings.Contains(r.stdout, "run directory: "+runDir+"\n") {
		t.Errorf("run -:\n%s", r.stdout)
	}
	for task, want := range map[string]string{"here": cwd, "below": filepath.Join(cwd, "sub")} {
		if lg := gs(t, cwd, "logs", "-", task); lg.code != 0 || lg.stdout != want+"\n" {
			t.Errorf("logs - %s: exit %d, %q; want %q", task, lg.code, lg.stdout, want+"\n")
		}
	}
	for _, args := range [][]string{{"status", "-"}, {"status"}, {"status", "--run-dir", runDir}} {
		st := gs(t, cwd, args...)
		st.want(t, 0)
		if !strings.HasPrefix(st.stdout, "2 tasks: 2 complete\n") {
			t.Errorf("%v:\n%s", args, st.stdout)
		}
	}
	plan := gsIn(t, cwd, nil, pwdWorkflow, "plan", "-")
	plan.want(t, 0)
	if !strings.Contains(plan.stdout, "0 of 2 tasks would run (run directory "+runDir+")") {
		t.Errorf("plan -:\n%s", plan.stdout)
	}
	gsIn(t, cwd, nil, pwdWorkflow, "validate", "-").want(t, 0)

	// The same workflow through /dev/stdin, the shell redirecting a file
	// to it: the same run (nothing runs again), not one under /dev.
	f, err := os.Open(writeFile(t, filepath.Join(t.TempDir(), "elsewhere.yaml"), pwdWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r = gsIn(t, cwd, f, "", "run", "/dev/stdin")
	r.want(t, 0)
	if !strings.Contains(r.stdout, "2 kept") || !strings.Contains(r.stdout, "run directory: "+runDir+"\n") {
		t.Errorf("run /dev/stdin:\n%s", r.stdout)
	}

	// Invalid input on stdin: exit 2, the message names <stdin> and the line.
	r = gsIn(t, cwd, nil, "tasks:\n  - id: a\n    args: [true]\n    dependecies: []\n", "run", "-")
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.HasPrefix(msg, `gpusched: <stdin>:4: task "a": unknown key "dependecies"`) {
		t.Errorf("invalid workflow on stdin: %q", msg)
	}
}

// A workflow from a process substitution (bash's <(...) is /dev/fd/63; here
// /dev/fd/3) has its run directory under the current folder, and its tasks
// run there.
func TestRunFromFileDescriptor(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer pw.Close()
		_, _ = pw.WriteString(pwdWorkflow)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, cwd, "run", "/dev/fd/3")
	cmd.ExtraFiles = []*os.File{pr} // fd 3
	r := finish(t, ctx, cmd, cmd.Args[1:])
	pr.Close()
	r.want(t, 0)
	runDir := filepath.Join(cwd, ".gpusched", "fd-3")
	if !strings.Contains(r.stdout, "run directory: "+runDir+"\n") {
		t.Errorf("run /dev/fd/3:\n%s", r.stdout)
	}
	if lg := gs(t, "", "logs", "--run-dir", runDir, "below"); lg.stdout != filepath.Join(cwd, "sub")+"\n" {
		t.Errorf("the task with dir: sub ran in %q, want %s/sub", lg.stdout, cwd)
	}
}

// Without a workflow or --run-dir, status, logs and report take the one run
// under ./.gpusched; with none or several, they say so (listing them), exit 2.
func TestFindsTheOnlyRun(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	a := writeFile(t, filepath.Join(cwd, "a.yaml"), "tasks:\n  - id: hello\n    args: "+sleeper("-print", "from a")+"\n")
	b := writeFile(t, filepath.Join(cwd, "b.yaml"), "tasks:\n  - id: hello\n    args: "+sleeper("-print", "from b")+"\n")

	r := gs(t, cwd, "status")
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, "none under ./.gpusched") || !strings.Contains(msg, "--run-dir") {
		t.Errorf("status with no run: %q", msg)
	}

	gs(t, cwd, "run", a).want(t, 0)
	st := gs(t, cwd, "status")
	st.want(t, 0)
	if !strings.HasPrefix(st.stdout, "1 tasks: 1 complete\n") {
		t.Errorf("status of the only run:\n%s", st.stdout)
	}
	if lg := gs(t, cwd, "logs", "hello"); lg.code != 0 || lg.stdout != "from a\n" {
		t.Errorf("logs hello: exit %d, %q", lg.code, lg.stdout)
	}
	rep := gs(t, cwd, "report", "-o", "-")
	if rep.code != 0 || !strings.Contains(rep.stdout, "<html") {
		t.Errorf("report of the only run: exit %d, stderr %q", rep.code, rep.stderr)
	}

	gs(t, cwd, "run", b).want(t, 0)
	for _, args := range [][]string{{"status"}, {"logs", "hello"}, {"report"}} {
		r := gs(t, cwd, args...)
		r.want(t, 2)
		if msg := oneLineError(t, r); !strings.Contains(msg, "./.gpusched holds 2: .gpusched/a, .gpusched/b;") {
			t.Errorf("%v with two runs: %q", args, msg)
		}
	}
	// Naming one still works.
	if lg := gs(t, cwd, "logs", b, "hello"); lg.stdout != "from b\n" {
		t.Errorf("logs b.yaml hello: %q", lg.stdout)
	}
}
