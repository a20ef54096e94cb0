package workflow_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// The sweep of the issue that asked for matrices, with its artifacts
// quoted (a { inside [...] ends a plain YAML value).
const sweepDoc = `defaults:
  retries: 1
  resources: {device: cuda, memory_mib: 18000}
tasks:
  - id: train-${lr}-${seed}
    matrix: {lr: ["1e-3", "1e-4"], seed: [1, 2, 3]}
    args: [python3, train.py, --lr, "${lr}", --seed, "${seed}"]
    artifacts: ["out/${lr}-${seed}/model.pt"]
  - id: aggregate
    dependencies: ["train-*"]
    args: [python3, aggregate.py]
`

func TestMatrixExpands(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse(wfPath, []byte(sweepDoc))
	if err != nil {
		t.Fatal(err)
	}
	train := []string{"train-1e-3-1", "train-1e-3-2", "train-1e-3-3", "train-1e-4-1", "train-1e-4-2", "train-1e-4-3"}
	if got := ids(w.Tasks); !slices.Equal(got, append(slices.Clone(train), "aggregate")) {
		t.Fatalf("tasks %q: want the variants in matrix order (first key slowest), then aggregate", got)
	}
	gpu := gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 18000}
	want := gpusched.TaskSpec{
		ID:        "train-1e-4-2",
		Payload:   []string{"python3", "train.py", "--lr", "1e-4", "--seed", "2"},
		Artifacts: []string{"out/1e-4-2/model.pt"},
		Retries:   1,
		Resources: gpu,
		Dir:       wfDir,
	}
	if !reflect.DeepEqual(w.Tasks[4], want) {
		t.Errorf("variant 4:\n got %#v\nwant %#v", w.Tasks[4], want)
	}
	agg := w.Tasks[6]
	if !slices.Equal(agg.Dependencies, train) {
		t.Errorf("aggregate depends on %q, want every variant in file order", agg.Dependencies)
	}
	if agg.Retries != 1 || !reflect.DeepEqual(agg.Resources, gpu) {
		t.Errorf("aggregate: retries %d, resources %+v: the defaults apply to every task", agg.Retries, agg.Resources)
	}
	if err := gpusched.ValidateTasks(w.Tasks); err != nil {
		t.Errorf("ValidateTasks on the expanded tasks: %v", err)
	}
	// Each variant has slices of its own.
	w.Tasks[0].Payload.([]string)[0] = "changed"
	w.Tasks[0].Artifacts[0] = "changed"
	if w.Tasks[1].Payload.([]string)[0] != "python3" || w.Tasks[1].Artifacts[0] != "out/1e-3-2/model.pt" {
		t.Error("two variants share a slice")
	}
}

// ${name} is replaced in every templated field; a dependency can be a
// template too (one prepare per seed), and a glob made of templates.
func TestMatrixFields(t *testing.T) {
	t.Parallel()
	doc := `tasks:
  - id: prep-${seed}
    matrix:
      seed: [7, 8]
    args: [prep, "${seed}"]
  - id: train-${seed}-${opt}
    matrix:
      seed: [7, 8]
      opt: [adam, sgd]
    dependencies: ["prep-${seed}"]
    args: [train, "--seed=${seed}", "${opt}${seed}", "$${seed}", "$$", "$opt"]
    env: {SEED: "${seed}", PLAIN: x}
    dir: runs/${opt}
    artifacts: [model.pt]
    on_complete: [notify, "${opt}"]
  - id: best-${seed}
    matrix: {seed: [7, 8]}
    dependencies: ["train-${seed}-*"]
    args: [best]
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"prep-7", "prep-8", "train-7-adam", "train-7-sgd", "train-8-adam", "train-8-sgd", "best-7", "best-8"}
	if got := ids(w.Tasks); !slices.Equal(got, want) {
		t.Fatalf("tasks %q, want %q", got, want)
	}
	tr := w.Tasks[3] // train-7-sgd
	if !slices.Equal(tr.Dependencies, []string{"prep-7"}) {
		t.Errorf("dependencies %q", tr.Dependencies)
	}
	if got := tr.Payload.([]string); !slices.Equal(got, []string{"train", "--seed=7", "sgd7", "${seed}", "$$", "$opt"}) {
		t.Errorf("args %q", got)
	}
	if !reflect.DeepEqual(tr.Env, map[string]string{"SEED": "7", "PLAIN": "x"}) {
		t.Errorf("env %v", tr.Env)
	}
	if tr.Dir != filepath.Join(wfDir, "runs", "sgd") {
		t.Errorf("dir %q", tr.Dir)
	}
	if !slices.Equal(tr.OnComplete, []string{"notify", "sgd"}) || !slices.Equal(tr.Artifacts, []string{"model.pt"}) {
		t.Errorf("on_complete %q, artifacts %q", tr.OnComplete, tr.Artifacts)
	}
	if got := w.Tasks[7].Dependencies; !slices.Equal(got, []string{"train-8-adam", "train-8-sgd"}) {
		t.Errorf("best-8 depends on %q", got)
	}
	w.Tasks[2].Env["SEED"] = "changed"
	if w.Tasks[3].Env["SEED"] != "7" {
		t.Error("two variants share their env")
	}
}

// $${ is a literal ${ in a task without a matrix, and in the defaults.
func TestTemplateEscape(t *testing.T) {
	t.Parallel()
	doc := `defaults:
  env: {GREETING: "$${USER}"}
tasks:
  - id: a
    args: [sh, -c, "echo $${HOME} $HOME $$"]
    dir: "d$${x}"
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a := w.Tasks[0]
	if got := a.Payload.([]string)[2]; got != "echo ${HOME} $HOME $$" {
		t.Errorf("args[2] = %q", got)
	}
	if a.Env["GREETING"] != "${USER}" || a.Dir != filepath.Join(wfDir, "d${x}") {
		t.Errorf("env %v, dir %q", a.Env, a.Dir)
	}
}

func TestDependencyGlobs(t *testing.T) {
	t.Parallel()
	doc := `tasks:
  - id: gather
    dependencies: ["eval-?", prep, "eval-[ab]", "*"]
    args: [x]
  - id: prep
    args: [x]
  - id: eval-b
    args: [x]
  - id: eval-a
    args: [x]
  - id: eval-cc
    args: [x]
  - id: all-evals
    dependencies: ["eval-*"]
    args: [x]
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	// File order within a glob; an id listed before (by name or glob) is
	// not repeated; the task itself is skipped.
	if got, want := w.Tasks[0].Dependencies, []string{"eval-b", "eval-a", "prep", "eval-cc", "all-evals"}; !slices.Equal(got, want) {
		t.Errorf("gather depends on %q, want %q", got, want)
	}
	if got, want := w.Tasks[5].Dependencies, []string{"eval-b", "eval-a", "eval-cc"}; !slices.Equal(got, want) {
		t.Errorf("all-evals depends on %q, want %q", got, want)
	}
	// A glob that matches a task which depends on it makes a cycle, told
	// as any other.
	_, err = workflow.Parse(wfPath, []byte("tasks:\n  - id: a\n    dependencies: [\"b*\"]\n    args: [x]\n  - id: b\n    dependencies: [a]\n    args: [x]\n"))
	if !errors.Is(err, gpusched.ErrCycle) {
		t.Errorf("a glob making a cycle: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	doc := `defaults:
  priority: 3
  timeout: 1h
  retries: 0
  retry_delay: 5s
  retry_on_exit_codes: [75]
  retry_on_timeout: true
  env: {A: "1", B: "1"}
  dir: work
  resources: {device: cuda, memory_mib: 1000, exclusive: true}
  hash_artifacts: true
  on_complete: [notify]
  executor: slurm
  slurm: {partition: gpu, mem: 4G}
tasks:
  - id: inherits
    args: [x]
  - id: own
    args: [x]
    priority: 9
    timeout: 0
    retries: 2
    env: {B: "2", C: "2"}
    dir: /abs
    resources: {memory_mib: 500}
    executor: local
    slurm: {partition: debug}
  - id: cpu
    args: [x]
    resources: {device: cpu}
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	in, own, cpu := w.Tasks[0], w.Tasks[1], w.Tasks[2]
	wantIn := gpusched.TaskSpec{
		ID: "inherits", Payload: []string{"x"}, Priority: 3, Timeout: 60 * 60e9, Retries: gpusched.NoRetries,
		RetryDelay: 5e9, RetryOnExitCodes: []int{75}, RetryOnTimeout: true,
		Env: map[string]string{"A": "1", "B": "1"}, Dir: filepath.Join(wfDir, "work"),
		Resources:     gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 1000, Exclusive: true},
		HashArtifacts: true, OnComplete: []string{"notify"}, Executor: "slurm",
		Slurm: &gpusched.SlurmSettings{Partition: "gpu", Mem: "4G"},
	}
	if !reflect.DeepEqual(in, wantIn) {
		t.Errorf("inherits:\n got %#v\nwant %#v", in, wantIn)
	}
	if own.Priority != 9 || own.Timeout != gpusched.NoTimeout || own.Retries != 2 || own.Dir != "/abs" || own.Executor != "local" {
		t.Errorf("own: %+v: its own values must win", own)
	}
	if !reflect.DeepEqual(own.Env, map[string]string{"A": "1", "B": "2", "C": "2"}) {
		t.Errorf("own env %v: merged, its own names winning", own.Env)
	}
	if want := (gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 500, Exclusive: true}); !reflect.DeepEqual(own.Resources, want) {
		t.Errorf("own resources %+v, want %+v (merged key by key)", own.Resources, want)
	}
	if own.Slurm == nil || own.Slurm.Partition != "debug" || own.Slurm.Mem != "4G" {
		t.Errorf("own slurm %+v", own.Slurm)
	}
	if !reflect.DeepEqual(cpu.Resources, gpusched.ResourceRequest{Device: gpusched.CPU}) {
		t.Errorf("cpu resources %+v: device: cpu takes none of the GPU defaults", cpu.Resources)
	}
	if w.Executor != "slurm" {
		t.Errorf("Executor %q: defaults.executor is the workflow's", w.Executor)
	}
	in.Env["A"] = "changed"
	in.RetryOnExitCodes[0] = 0
	if w.Tasks[2].Env["A"] != "1" || w.Tasks[2].RetryOnExitCodes[0] != 75 {
		t.Error("two tasks share the defaults' env or exit codes")
	}
	// --executor wins over defaults.executor as over scheduling.executor.
	w, err = workflow.ParseWith(wfPath, []byte(doc), workflow.Options{Executor: "local"})
	if err != nil || w.Tasks[0].Executor != "local" || w.Tasks[1].Executor != "local" {
		t.Errorf("with Options.Executor: %v", err)
	}
}

// Every problem of a sweep, of a glob or of the defaults names its line,
// and a value every variant (or task) takes is told once.
func TestSweepErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		want      []string
		is        error
	}{
		{"an unknown variable",
			"tasks:\n  - id: a-${lr}\n    matrix: {lr: [1]}\n    args: [x, \"${lrr}\"]\n    env: {A: \"${seed}\"}\n",
			[]string{`:4: task "a-${lr}": args[1]: ${lrr}: the matrix has no variable lrr (it has lr); did you mean ${lr}?`,
				`:5: task "a-${lr}": env.A: ${seed}: the matrix has no variable seed (it has lr)`}, nil},
		{"an unknown variable in a dependency, told once", "tasks:\n  - id: a-${seed}\n    matrix: {seed: [1, 2]}\n    args: [x]\n    dependencies: [\"prep-${sed}\"]\n",
			[]string{`:5: task "a-${seed}": dependencies[0]: ${sed}: the matrix has no variable sed (it has seed); did you mean ${seed}?`}, nil},
		{"unclosed", "tasks:\n  - id: a-${x}\n    matrix: {x: [1]}\n    args: [\"${x\"]\n",
			[]string{`:4: task "a-${x}": args[0]: "${x" is not closed by }; write $${ for a literal ${`}, nil},
		{"not a name", "tasks:\n  - id: a-${x}\n    matrix: {x: [1]}\n    args: [\"${x y}\"]\n",
			[]string{`:4: task "a-${x}": args[0]: "${x y}" is not a matrix variable (names use letters, digits and _); write $${ for a literal ${`}, nil},
		{"an id without variables", "tasks:\n  - id: train\n    matrix: {lr: [1, 2]}\n    args: [x]\n",
			[]string{`:2: task "train": id: a matrix task's id must hold each of its variables, so that every task it expands to has an id of its own: add ${lr}`}, nil},
		{"an id without one variable", "tasks:\n  - id: t-${lr}\n    matrix: {lr: [1, 2], seed: [1]}\n    args: [x]\n",
			[]string{`:2: task "t-${lr}": id: a matrix task's id must hold each of its variables, so that every task it expands to has an id of its own: add ${seed}`}, nil},
		{"a variable in an id without matrix", "tasks:\n  - id: t-${lr}\n    args: [x]\n",
			[]string{`:2: task "t-${lr}": id: ${...}: only a task with a matrix has variables`}, nil},
		{"matrix not a mapping", "tasks:\n  - id: t-${x}\n    matrix: [1, 2]\n    args: [\"${x}\"]\n",
			[]string{`:3: task "t-${x}": matrix must be a mapping of names to lists of values`}, nil},
		{"matrix empty", "tasks:\n  - id: t\n    matrix: {}\n    args: [x]\n",
			[]string{`:3: task "t": matrix is empty`}, nil},
		{"matrix values", "tasks:\n  - id: t-${x}-${y}-${z}-${w}\n    matrix:\n      x: 1\n      y: []\n      z: [1, [2], ~, 1]\n      9w: [1]\n      x: [2]\n    args: [x]\n",
			[]string{`:4: task "t-${x}-${y}-${z}-${w}": matrix.x must be a list of values, e.g. [1, 2], not the value "1"`,
				`:5: task "t-${x}-${y}-${z}-${w}": matrix.y is empty: give at least one value`,
				`:6: task "t-${x}-${y}-${z}-${w}": matrix.z: each value must be a string or a number, not a list`,
				`:6: task "t-${x}-${y}-${z}-${w}": matrix.z: each value must be a string or a number, not empty`,
				`:6: task "t-${x}-${y}-${z}-${w}": matrix.z: the value "1" appears twice`,
				`:7: task "t-${x}-${y}-${z}-${w}": matrix: "9w" is not a variable name`,
				`:8: task "t-${x}-${y}-${z}-${w}": matrix: variable x appears twice`}, nil},
		{"too many variants", fmt.Sprintf("tasks:\n  - id: t-${a}-${b}\n    matrix:\n      a: [%s]\n      b: [%s]\n    args: [x]\n", nums(1000), nums(1001)),
			[]string{fmt.Sprintf(`:4: task "t-${a}-${b}": matrix expands to more than %d tasks: split the sweep`, workflow.MaxVariants)}, nil},
		{"variants that collide with a task", "tasks:\n  - id: t-1\n    args: [x]\n  - id: t-${n}\n    matrix: {n: [0, 1]}\n    args: [x]\n",
			[]string{`:4: task "t-1": id: defined twice (first on line 2, here with n=1)`}, gpusched.ErrDuplicateTask},
		{"variants that collide with each other", "tasks:\n  - id: t-${a}${b}\n    matrix: {a: [1, 11], b: [1, 11]}\n    args: [x]\n",
			[]string{`:2: task "t-111": id: defined twice (first on line 2 with a=1, b=11, here with a=11, b=1)`}, gpusched.ErrDuplicateTask},
		{"a glob matching nothing", "tasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n    dependencies:\n      - a\n      - \"trian-*\"\n",
			[]string{`:8: task "b": dependencies[1]: "trian-*" matches no task`}, gpusched.ErrUnknownDependency},
		{"a glob matching only itself", "tasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n    dependencies: [\"b*\"]\n",
			[]string{`:6: task "b": dependencies[0]: "b*" matches no task but this one`}, gpusched.ErrUnknownDependency},
		{"a glob that is not one", "tasks:\n  - id: a\n    args: [x]\n    dependencies: [\"b[\"]\n",
			[]string{`:4: task "a": dependencies[0]: "b[" is not a valid glob`}, gpusched.ErrInvalidTask},
		{"a variable in the defaults", "defaults:\n  env: {A: \"${lr}\"}\ntasks:\n  - id: t-${lr}\n    matrix: {lr: [1]}\n    args: [x]\n",
			[]string{`:2: defaults: env.A: ${lr}: defaults are the same for every task; write matrix variables in the task's own fields`}, nil},
		{"a key that is no default", "defaults:\n  args: [x]\n  artifacts: [a]\ntasks:\n  - id: t\n    args: [x]\n",
			[]string{`:2: defaults: unknown key "args"`, `:3: defaults: unknown key "artifacts"`}, nil},
		{"a bad default value, told once", "defaults:\n  timeout: soon\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n",
			[]string{`:2: defaults: timeout: "soon" is not a duration`}, nil},
		{"an invalid default, told once", "defaults:\n  resources: {device: cpu, memory_mib: 10}\ntasks:\n  - id: a\n    args: [x]\n  - id: b\n    args: [x]\n",
			[]string{`:2: task "a": resources.memory_mib:`}, gpusched.ErrInvalidTask},
		{"an invalid field of a matrix task, told once", "tasks:\n  - id: a-${x}\n    matrix: {x: [1, 2, 3]}\n    args: [x]\n    resources: {device: gpu}\n",
			[]string{`:5: task "a-1": resources.device: must be "cpu" or "cuda"`}, gpusched.ErrInvalidTask},
		{"a dependency every variant lacks, told once", "tasks:\n  - id: a-${x}\n    matrix: {x: [1, 2, 3]}\n    args: [x]\n    dependencies: [nope]\n",
			[]string{`:5: task "a-1": dependencies: depends on "nope", which is not defined`}, gpusched.ErrUnknownDependency},
		{"the executor twice", "scheduling:\n  executor: local\ndefaults:\n  executor: slurm\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`:4: defaults.executor: scheduling.executor (line 2) says it too: keep one`}, nil},
		{"slurm twice", "slurm: {partition: a}\ndefaults:\n  slurm: {partition: b}\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`:3: defaults.slurm: slurm (line 1) says it too: keep one`}, nil},
		{"an unknown default executor", "defaults:\n  executor: slurmm\ntasks:\n  - id: a\n    args: [x]\n",
			[]string{`:2: defaults.executor: unknown executor "slurmm"`}, nil},
		{"a broken matrix task is not blamed by its glob", "tasks:\n  - id: t-${x}\n    matrix: {x: []}\n    args: [x]\n  - id: all\n    dependencies: [\"t-*\"]\n    args: [x]\n",
			[]string{`:3: task "t-${x}": matrix.x is empty`}, nil},
		{"${ in a flow list", "tasks:\n  - id: t-${x}\n    matrix: {x: [1]}\n    args: [echo, ${x}]\n",
			[]string{`:4: invalid YAML: did not find expected ',' or ']' (inside [...] or {...}, quote a value that holds ${...}: "${name}")`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got\n%s\nwant %d lines starting\n%s", err, len(tt.want), strings.Join(tt.want, "\n"))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], "/f.yaml"+w) {
					t.Errorf("line %d:\n got %s\nwant prefix /f.yaml%s", i, lines[i], w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(err, %v) = false", tt.is)
			}
		})
	}
}

// The limit on the tasks that matrices make holds for each and for the
// file's together. Not parallel: it changes the limit.
func TestMaxVariants(t *testing.T) {
	workflow.SetMaxVariants(t, 10)
	doc := "tasks:\n  - id: t-${a}\n    matrix: {a: [" + nums(6) + "]}\n    args: [x]\n" +
		"  - id: u-${a}\n    matrix: {a: [" + nums(4) + "]}\n    args: [x]\n" +
		"  - id: v-${a}-${b}\n    matrix: {a: [1, 2], b: [1]}\n    args: [x]\n" +
		"  - id: w-${a}-${b}\n    matrix: {a: [" + nums(4) + "], b: [1, 2, 3]}\n    args: [x]\n"
	_, err := workflow.Parse("/f.yaml", []byte(doc))
	want := "/f.yaml:9: task \"v-${a}-${b}\": matrix expands to 2 tasks, which brings the file's matrices past 10 in all: split the sweep\n" +
		"/f.yaml:12: task \"w-${a}-${b}\": matrix expands to more than 10 tasks: split the sweep"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func ids(tasks []gpusched.TaskSpec) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// nums returns "0, 1, ..., n-1".
func nums(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return strings.Join(s, ", ")
}

// A task without a matrix has no variables: a shell's ${HOME} (and an
// unclosed ${) reaches the command as written, as before sweeps existed,
// and a $${ beside it is still a literal ${.
func TestShellVariablesWithoutMatrix(t *testing.T) {
	t.Parallel()
	doc := `tasks:
  - id: a
    args: [sh, -c, "echo ${HOME} ${1:-x} $${y} ${"]
    env: {P: "${PATH}"}
`
	w, err := workflow.Parse(wfPath, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a := w.Tasks[0]
	if got := a.Payload.([]string)[2]; got != "echo ${HOME} ${1:-x} ${y} ${" {
		t.Errorf("args[2] = %q", got)
	}
	if a.Env["P"] != "${PATH}" {
		t.Errorf("env P = %q", a.Env["P"])
	}
}
