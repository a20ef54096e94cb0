package workflow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/workflow"
)

// TestSlurmKeys: the file's slurm: settings are every task's defaults; a
// task's own keys win, its extra_args replacing the file's.
func TestSlurmKeys(t *testing.T) {
	t.Parallel()
	doc := `slurm:
  partition: gpu
  account: lab
  mem: 16G
  extra_args: [--exclusive]
tasks:
  - id: a
    args: [x]
    executor: slurm
  - id: b
    args: [x]
    executor: slurm
    slurm:
      partition: debug
      cpus_per_task: 4
      extra_args: ["--reservation=maint"]
`
	w, err := workflow.Parse("/f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a, b := w.Tasks[0].Slurm, w.Tasks[1].Slurm
	if a == nil || a.Partition != "gpu" || a.Account != "lab" || a.Mem != "16G" || !slices.Equal(a.ExtraArgs, []string{"--exclusive"}) {
		t.Errorf("a: %+v, want the file's settings", a)
	}
	if b == nil || b.Partition != "debug" || b.Account != "lab" || b.Mem != "16G" || b.CPUsPerTask != 4 ||
		!slices.Equal(b.ExtraArgs, []string{"--reservation=maint"}) {
		t.Errorf("b: %+v, want its own partition, cpus and extra_args over the file's", b)
	}
	a.ExtraArgs[0] = "changed"
	if w.Slurm.ExtraArgs[0] != "--exclusive" {
		t.Error("a task's settings share the file's extra_args")
	}
}

func TestSlurmKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string
		want []string
	}{
		{"tasks:\n  - id: a\n    args: [x]\n    slurm:\n      partiton: gpu\n",
			[]string{`/f.yaml:5: task "a": slurm: unknown key "partiton" (did you mean "partition"?)`}},
		{"tasks:\n  - id: a\n    args: [x]\n    slurm:\n      partition: gpu\n      mem: lots\n",
			[]string{`/f.yaml:6: task "a": slurm.mem: "lots" is not a size sbatch takes`}},
		{"tasks:\n  - id: a\n    args: [x]\n    slurm:\n      cpus_per_task: -1\n",
			[]string{`/f.yaml:5: task "a": slurm.cpus_per_task must not be negative (got -1)`}},
		{"slurm:\n  extra_args: [exclusive]\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n",
			[]string{`/f.yaml:2: slurm.extra_args[0]: "exclusive" is not an sbatch option`}}, // once, not once per task
		{"slurm: gpu\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`/f.yaml:1: slurm must be a mapping`}},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil {
			t.Errorf("%q: no error", tt.doc)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tt.want) {
			t.Errorf("%q:\n got %q\nwant %q", tt.doc, lines, tt.want)
			continue
		}
		for i, w := range tt.want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%q:\n got %s\nwant prefix %s", tt.doc, lines[i], w)
			}
		}
	}
}
