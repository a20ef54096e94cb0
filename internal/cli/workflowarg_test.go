package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/workflow"
)

// The default run directory: beside a workflow file, and under the
// current folder for a workflow that has no folder of its own.
func TestDefaultRunDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "flow.yaml")
	if err := os.WriteFile(file, []byte("tasks: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "piped.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{file, filepath.Join(dir, ".gpusched", "flow")},
		{filepath.Join(dir, "deleted.yaml"), filepath.Join(dir, ".gpusched", "deleted")}, // status of a run whose file is gone
		{"-", filepath.Join(".gpusched", "stdin")},
		{"/dev/stdin", filepath.Join(".gpusched", "stdin")},
		{"/dev/fd/63", filepath.Join(".gpusched", "fd-63")},
		{"/proc/self/fd/0", filepath.Join(".gpusched", "fd-0")},
		{"/dev/null", filepath.Join(".gpusched", "null")},
		{fifo, filepath.Join(".gpusched", "piped")},
	} {
		if got := DefaultRunDir(c.path); got != c.want {
			t.Errorf("DefaultRunDir(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

// A workflow on standard input: its tasks' relative dirs are relative to
// the current folder, and messages name it <stdin>. One read from a pipe
// with a path: the same, with messages naming the path.
func TestReadWorkflowWithoutFolder(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	const good = "tasks:\n  - id: a\n    args: [true]\n  - id: b\n    dir: sub\n    args: [true]\n"
	const bad = "tasks:\n  - id: a\n    args: [true]\n    dependecies: []\n"
	check := func(t *testing.T, w *workflow.Workflow, name string) {
		t.Helper()
		if w.Path != name || len(w.Tasks) != 2 || w.Tasks[0].Dir != cwd || w.Tasks[1].Dir != filepath.Join(cwd, "sub") {
			t.Errorf("workflow %q, dirs %q and %q; want %q, %q and %q", w.Path, w.Tasks[0].Dir, w.Tasks[1].Dir, name, cwd, filepath.Join(cwd, "sub"))
		}
	}
	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		w, err := readWorkflow("-", strings.NewReader(good))
		if err != nil {
			t.Fatal(err)
		}
		check(t, w, "<stdin>")
		_, err = readWorkflow("-", strings.NewReader(bad))
		if err == nil || !strings.HasPrefix(err.Error(), `<stdin>:4: task "a": unknown key "dependecies"`) || exitCode(err) != ExitInvalid {
			t.Errorf("error %v (exit %d), want <stdin>:4: ... (exit 2)", err, exitCode(err))
		}
	})
	t.Run("pipe", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			src  string
			want func(t *testing.T, path string, w *workflow.Workflow, err error)
		}{
			{good, func(t *testing.T, path string, w *workflow.Workflow, err error) {
				if err != nil {
					t.Fatal(err)
				}
				check(t, w, path)
			}},
			{bad, func(t *testing.T, path string, _ *workflow.Workflow, err error) {
				if err == nil || !strings.HasPrefix(err.Error(), path+`:4: task "a": unknown key "dependecies"`) {
					t.Errorf("error %v, want it to name %s:4", err, path)
				}
			}},
		} {
			fifo := filepath.Join(t.TempDir(), "wf.yaml")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			go func() {
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer f.Close()
				_, _ = f.WriteString(tc.src)
			}()
			w, err := readWorkflow(fifo, nil)
			tc.want(t, fifo, w, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		_, err := readWorkflow("no/such/flow.yaml", nil)
		if err == nil || err.Error() != "no/such/flow.yaml: cannot read the workflow: no such file or directory" || exitCode(err) != ExitInvalid {
			t.Errorf("error %v (exit %d)", err, exitCode(err))
		}
	})
}
