package cli_test

// End-to-end tests of how commands name a workflow and a run: "-" for
// standard input, workflows that are not files in a folder of their own.

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
// current folder. status and plan find it with "-".
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
		if lg := gs(t, cwd, "logs", task, "--run-dir", runDir); lg.code != 0 || lg.stdout != want+"\n" {
			t.Errorf("logs %s: exit %d, %q; want %q", task, lg.code, lg.stdout, want+"\n")
		}
	}
	for _, args := range [][]string{{"status", "-"}, {"status", "--run-dir", runDir}} {
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
