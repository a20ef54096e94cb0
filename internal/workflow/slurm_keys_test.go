package workflow_test

import (
	"maps"
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
		{"slurm:\n  gpu_types: [a100]\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`/f.yaml:2: slurm.gpu_types must be a mapping of GPU type names to their memory in MiB`}},
		{"slurm:\n  gpu_types:\n    a100: lots\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`/f.yaml:3: slurm.gpu_types.a100 must be a whole number, not "lots"`}},
		{"slurm:\n  gpu_types:\n    a100: 1\n    a100: 2\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`/f.yaml:4: slurm.gpu_types: type "a100" appears twice`}},
		{"slurm:\n  gpu_types: {\"a 100\": 81920}\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n",
			[]string{`/f.yaml:2: slurm.gpu_types: "a 100" is not a Slurm GPU type name (letters, digits, _ - and . only`}}, // once
		{"tasks:\n  - id: a\n    args: [x]\n    slurm:\n      gpu_types:\n        v100: 16384\n        a100: 0\n",
			[]string{`/f.yaml:7: task "a": slurm.gpu_types.a100: 0 is not a memory size`}},
		{"slurm:\n  gpu_types: {v100: 16384, a100: 81920}\ntasks:\n  - id: a\n    args: [x]\n    executor: slurm\n    resources:\n      device: cuda\n      memory_mib: 90000\n",
			[]string{`/f.yaml:9: task "a": resources.memory_mib: needs 90000 MiB, more than any GPU type in slurm.gpu_types has: the largest, a100, has 81920 MiB`}},
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

// TestSlurmGPUTypes: gpu_types map type names to MiB; the file's are
// every task's, a task's own replace them; a budget larger than every
// type is refused only for a task that runs on Slurm.
func TestSlurmGPUTypes(t *testing.T) {
	t.Parallel()
	doc := `slurm:
  gpu_types: {v100: 16384, a100: 81920}
tasks:
  - id: a
    args: [x]
    executor: slurm
    resources: {device: cuda, memory_mib: 20000}
  - id: b
    args: [x]
    executor: slurm
    resources: {device: cuda, memory_mib: 20000}
    slurm:
      gpu_types:
        h100.80g: 81920
  - id: local
    args: [x]
    resources: {device: cuda, memory_mib: 90000}
`
	w, err := workflow.Parse("/f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Tasks[0].Slurm.GPUTypes; !maps.Equal(got, map[string]int64{"v100": 16384, "a100": 81920}) {
		t.Errorf("a's types = %v, want the file's", got)
	}
	if got := w.Tasks[1].Slurm.GPUTypes; !maps.Equal(got, map[string]int64{"h100.80g": 81920}) {
		t.Errorf("b's types = %v, want its own alone", got)
	}
	if name, _, _ := w.Tasks[0].Slurm.GPUType(w.Tasks[0].Resources.MemoryMiB); name != "a100" {
		t.Errorf("a's budget asks for %q, want a100", name)
	}
	// With every task on Slurm, the local one's budget is too big.
	_, err = workflow.ParseWith("/f.yaml", []byte(doc), workflow.Options{Executor: "slurm"})
	if err == nil || !strings.Contains(err.Error(), `/f.yaml:17: task "local": resources.memory_mib: needs 90000 MiB`) {
		t.Errorf("local on slurm: %v, want its budget refused at its line", err)
	}
}
