package cli_test

import (
	"path/filepath"
	"testing"
)

// --executor NAME takes the place of the workflow's scheduling.executor for
// the tasks that name none; a task's own executor key wins over both. run,
// validate and plan judge the same tasks.
func TestExecutorFlagPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	byDefault := writeFile(t, filepath.Join(dir, "default.yaml"), `scheduling:
  executor: slurmm
tasks:
  - id: a
    args: [touch, `+q(marker)+`]
`)
	const unknownDefault = `:2: scheduling.executor: unknown executor "slurmm" (known: local, slurm)`
	for _, args := range [][]string{{"validate", byDefault}, {"plan", byDefault}, {"run", byDefault}} {
		r := gs(t, dir, args...)
		r.want(t, 2)
		if got := oneLineError(t, r); got != "gpusched: "+byDefault+unknownDefault {
			t.Errorf("%v: %q, want the workflow's default blamed at its line", args, got)
		}
	}
	if exists(marker) {
		t.Fatal("a task ran with an unknown executor")
	}
	// The flag replaces the workflow's default.
	for _, args := range [][]string{{"validate", byDefault, "--executor", "local"}, {"plan", "--executor", "local", byDefault}} {
		gs(t, dir, args...).want(t, 0)
	}
	gs(t, dir, "run", byDefault, "--executor", "local").want(t, 0)
	if !exists(marker) {
		t.Error("run --executor local did not run the task")
	}

	// A task's own executor is not replaced by the flag.
	own := writeFile(t, filepath.Join(dir, "own.yaml"), `scheduling:
  executor: local
tasks:
  - id: a
    args: [true]
  - id: b
    args: [true]
    executor: slurmm
`)
	for _, args := range [][]string{{"validate", own, "--executor", "local"}, {"plan", own, "--executor", "local"}, {"run", own, "--executor", "local"}} {
		r := gs(t, dir, args...)
		r.want(t, 2)
		if got, want := oneLineError(t, r), "gpusched: "+own+`:8: task "b": executor: unknown executor "slurmm" (known: local, slurm)`; got != want {
			t.Errorf("%v: %q, want %q", args, got, want)
		}
	}
}

// An --executor that is not a name, or names no executor, is refused on one
// line naming the flag, before the workflow is read, whether or not a task
// would take it; nothing runs.
func TestExecutorFlagInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	wf := writeFile(t, filepath.Join(dir, "flow.yaml"), `tasks:
  - id: a
    args: [touch, `+q(marker)+`]
    executor: local
`)
	tests := []struct{ name, want string }{
		{"Slurm", `gpusched: --executor: "Slurm" is not an executor name: use a lowercase letter, then lowercase letters, digits, _ and -`},
		{"slurmm", `gpusched: --executor: unknown executor "slurmm" (known: local, slurm)`},
		{"", `gpusched: --executor: must not be empty`},
	}
	for _, tt := range tests {
		for _, args := range [][]string{
			{"validate", wf, "--executor", tt.name},
			{"plan", wf, "--executor", tt.name},
			{"run", wf, "--executor", tt.name},
			{"run", "--dry-run", "--executor=" + tt.name, wf},
			{"validate", filepath.Join(dir, "missing.yaml"), "--executor", tt.name},
		} {
			r := gs(t, dir, args...)
			r.want(t, 2)
			if got := oneLineError(t, r); got != tt.want {
				t.Errorf("%q: %q, want %q", args, got, tt.want)
			}
		}
	}
	if exists(marker) || exists(filepath.Join(dir, ".gpusched")) {
		t.Error("a task ran, or a run directory was made, with an invalid --executor")
	}
}
