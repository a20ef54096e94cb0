package workflow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// problems returns the lines of Parse's error for src, without the path.
func problems(t *testing.T, src string) []string {
	t.Helper()
	w, err := workflow.Parse(wfPath, []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded, want problems; tasks %+v", w.Tasks)
	}
	if w != nil {
		t.Errorf("Parse returned a workflow with its error")
	}
	var list *workflow.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T is not an *ErrorList: %v", err, err)
	}
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, wfPath)
	}
	return lines
}

// Parse reports every problem, in file order, each once: a mistake in one
// task does not hide the next task's, nor cause other messages.
func TestParseManyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown keys in several tasks and in scheduling",
			src: `scheduling: {retries: 1, kill_grase: 1s}
tasks:
  - {id: a, args: [x], priorty: 1}
  - {id: b, args: [x], dependecies: [a], colour: red}
`,
			want: []string{
				`:1: scheduling: unknown key "kill_grase" (did you mean "kill_grace"?)`,
				`:3: task "a": unknown key "priorty" (did you mean "priority"?)`,
				`:4: task "b": unknown key "dependecies" (did you mean "dependencies"?)`,
				`:4: task "b": unknown key "colour" (known keys: id, args, dependencies, priority, timeout, retries, env, dir, resources, executor, artifacts, hash_artifacts, inputs, hash_inputs, on_complete, on_failure, retry_delay, retry_on_exit_codes, retry_on_timeout, slurm, matrix)`,
			},
		},
		{
			name: "bad values in many tasks, each field once",
			src: `tasks:
  - id: a
    args: [x]
    priority: high
    timeout: 2 hours
  - id: b
    args: [x]
    resources: {device: cuda, memory_mib: lots}
  - id: c
    args: [x]
    retries: -1
    hash_artifacts: maybe
`,
			want: []string{
				`:4: task "a": priority must be a whole number, not "high"`,
				`:5: task "a": timeout: "2 hours" is not a duration; use Go syntax such as 90s, 30m or 2h`,
				// Not also "a cuda task needs a memory budget": the budget was unreadable.
				`:8: task "b": resources.memory_mib must be a whole number of MiB or auto, not "lots"`,
				`:11: task "c": retries: must not be negative (got -1)`,
				`:12: task "c": hash_artifacts must be true or false, not "maybe"`,
			},
		},
		{
			name: "invalid fields in many tasks",
			src: `tasks:
  - {id: a, args: [], resources: {device: tpu}}
  - {id: b/c, args: [x], dependencies: [a, a, ""]}
  - {id: d, args: [x], resources: {device: cpu, memory_mib: 10}, env: {"A=B": x}}
`,
			want: []string{
				`:2: task "a": resources.device: must be "cpu" or "cuda", not "tpu"`,
				`:2: task "a": args: empty command: give the program and its arguments`,
				`:3: task "b/c": id: has '/' at character 2; use ASCII letters, digits and _.:@+=,-`,
				`:3: task "b/c": dependencies: "a" is listed twice`,
				`:3: task "b/c": dependencies: empty dependency id`,
				`:4: task "d": resources.memory_mib: is a GPU memory budget; set resources.device to "cuda" to use it`,
				`:4: task "d": env: invalid variable name "A=B"`,
			},
		},
		{
			name: "several unknown dependencies and duplicate ids",
			src: `tasks:
  - {id: prepare, args: [x]}
  - {id: train, args: [x], dependencies: [prepar, data]}
  - {id: prepare, args: [y]}
  - {id: eval, args: [x], dependencies: [trian, train]}
  - {id: train, args: [z]}
`,
			want: []string{
				`:3: task "train": dependencies: depends on "prepar", which is not defined (did you mean "prepare"?)`,
				`:3: task "train": dependencies: depends on "data", which is not defined`,
				`:4: task "prepare": id: defined twice (first on line 2)`,
				`:5: task "eval": dependencies: depends on "trian", which is not defined (did you mean "train"?)`,
				`:6: task "train": id: defined twice (first on line 3)`,
			},
		},
		{
			name: "a cycle per group, and a self-dependency once",
			src: `tasks:
  - {id: a, args: [x], dependencies: [b]}
  - {id: b, args: [x], dependencies: [a]}
  - {id: c, args: [x], dependencies: [c]}
  - {id: d, args: [x], dependencies: [f]}
  - {id: e, args: [x], dependencies: [d]}
  - {id: f, args: [x], dependencies: [e, a]}
`,
			want: []string{
				`:2: dependency cycle: a -> b -> a`,
				`:4: dependency cycle: c -> c`,
				`:5: dependency cycle: d -> f -> e -> d`,
			},
		},
		{
			name: "depending on a task with problems is not a problem",
			src: `tasks:
  - {id: a, args: [x], timeout: forever}
  - {id: b/x, args: [x]}
  - {id: c, args: [x], dependencies: [a, b/x]}
  - {id: "", args: [x]}
  - {id: d, args: [x], dependencies: [nobody]}
`,
			want: []string{
				`:2: task "a": timeout: "forever" is not a duration; use Go syntax such as 90s, 30m or 2h`,
				`:3: task "b/x": id: has '/' at character 2; use ASCII letters, digits and _.:@+=,-`,
				`:5: tasks[3].id must be a non-empty string`,
				`:6: task "d": dependencies: depends on "nobody", which is not defined`,
			},
		},
		{
			name: "a long dependency list with repeats: each problem once",
			src: `tasks:
  - {id: a, args: [x]}
  - {id: g, args: [x], dependencies: [a, b, c, d, e, f, ghost, h, i, j, ghost, a, g, ghost]}
`,
			want: []string{
				`:3: task "g": dependencies: "ghost" is listed twice`,
				`:3: task "g": dependencies: "a" is listed twice`,
				`:3: dependency cycle: g -> g`,
				`:3: task "g": dependencies: depends on "b", which is not defined`,
				`:3: task "g": dependencies: depends on "c", which is not defined`,
				`:3: task "g": dependencies: depends on "d", which is not defined`,
				`:3: task "g": dependencies: depends on "e", which is not defined`,
				`:3: task "g": dependencies: depends on "f", which is not defined`,
				`:3: task "g": dependencies: depends on "ghost", which is not defined`,
				`:3: task "g": dependencies: depends on "h", which is not defined`,
				`:3: task "g": dependencies: depends on "i", which is not defined`,
				`:3: task "g": dependencies: depends on "j", which is not defined`,
			},
		},
		{
			name: "a misspelt key is not also a missing one",
			src: `tasks:
  - {idd: a, args: [x]}
  - {id: b, arg: [x]}
  - {id: c}
`,
			want: []string{
				`:2: tasks[0]: unknown key "idd" (did you mean "id"?)`,
				`:3: task "b": unknown key "arg" (did you mean "args"?)`,
				`:4: task "c" has no args: give the command to run, e.g. args: [python3, train.py]`,
			},
		},
		{
			name: "scheduling problems and task problems together",
			src: `scheduling:
  max_parallel_tasks: -3
tasks:
  - {id: a, args: [x], dependencies: [zzzzzzzz]}
`,
			want: []string{
				`:2: scheduling.max_parallel_tasks: must be at least 1 (or 0 for the number of CPUs)`,
				`:4: task "a": dependencies: depends on "zzzzzzzz", which is not defined`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := problems(t, tt.src)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// Past MaxErrors problems the list says how many more there are; errors.Is
// still sees the kinds of those listed.
func TestParseErrorLimit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("tasks:\n")
	const n = 50
	for i := range n {
		fmt.Fprintf(&b, "  - {id: t%d, args: [x], dependencies: [missing%d]}\n", i, i)
	}
	_, err := workflow.Parse(wfPath, []byte(b.String()))
	var list *workflow.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Parse error = %v, want an *ErrorList", err)
	}
	if len(list.Errs) != workflow.MaxErrors || list.More != n-workflow.MaxErrors {
		t.Errorf("%d problems listed and %d more, want %d and %d", len(list.Errs), list.More, workflow.MaxErrors, n-workflow.MaxErrors)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != workflow.MaxErrors+1 {
		t.Fatalf("%d lines, want %d", len(lines), workflow.MaxErrors+1)
	}
	if want := fmt.Sprintf("%s: ... and %d more problems", wfPath, n-workflow.MaxErrors); lines[len(lines)-1] != want {
		t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
	}
	if !strings.HasPrefix(lines[0], wfPath+":2: ") || !strings.HasPrefix(lines[workflow.MaxErrors-1], fmt.Sprintf("%s:%d: ", wfPath, workflow.MaxErrors+1)) {
		t.Errorf("not the first problems in file order: %q ... %q", lines[0], lines[workflow.MaxErrors-1])
	}
	if !errors.Is(err, gpusched.ErrUnknownDependency) || errors.Is(err, gpusched.ErrCycle) {
		t.Errorf("errors.Is does not see the problems' kinds")
	}
}

// NUL bytes cannot reach a process: in args, env names and values, dir,
// artifacts or on_complete, validation refuses them, naming the task, the
// field and the item. YAML writes them as "\0" in double quotes.
func TestParseRefusesNUL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, task, want string
	}{
		{"args", `args: [echo, "a\0b"]`, `:2: task "t": args[1]: "a\x00b" has a NUL byte, which a command line cannot hold`},
		{"program", `args: ["\0"]`, `:2: task "t": args[0]: "\x00" has a NUL byte, which a command line cannot hold`},
		{"env value", `args: [x], env: {SEED: "1\0"}`, `:2: task "t": env: the value of "SEED" has a NUL byte, which an environment cannot hold`},
		{"env name", `args: [x], env: {"A\0": "1"}`, `:2: task "t": env: invalid variable name "A\x00"`},
		{"dir", `args: [x], dir: "/tmp/\0"`, `:2: task "t": dir: "/tmp/\x00" has a NUL byte, which a path cannot hold`},
		{"artifact", `args: [x], artifacts: [a, "b\0"]`, `:2: task "t": artifacts[1]: "b\x00" has a NUL byte, which a path cannot hold`},
		{"on_complete", `args: [x], on_complete: [sh, -c, "\0"]`, `:2: task "t": on_complete[2]: "\x00" has a NUL byte, which a command line cannot hold`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "tasks:\n  - {id: t, " + tt.task + "}\n"
			got := problems(t, src)
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems %q, want [%q]", got, tt.want)
			}
			_, err := workflow.Parse(wfPath, []byte(src))
			if !errors.Is(err, gpusched.ErrInvalidTask) {
				t.Errorf("errors.Is(%v, ErrInvalidTask) = false", err)
			}
		})
	}
	// Each NUL item is reported, at its own line.
	got := problems(t, "tasks:\n  - id: t\n    args:\n      - \"a\\0\"\n      - ok\n      - \"\\0c\"\n")
	want := []string{
		`:4: task "t": args[0]: "a\x00" has a NUL byte, which a command line cannot hold`,
		`:6: task "t": args[2]: "\x00c" has a NUL byte, which a command line cannot hold`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// maxLine is the longest line a validation message may be.
const maxLine = 500

// Hostile input gives short messages: whatever the file holds (ids of
// 10,000 characters, a cycle of 100,000 tasks, binary bytes in values and
// keys, a megabyte value), every problem is reported on one line of at most
// maxLine bytes, without control characters.
func TestHostileInputMessagesAreShortLines(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 10_000)
	junk := strings.Repeat(`\0\x01\e[2J\xff\u200b\r\n\t"'é`, 200) // a double-quoted YAML string's escapes
	mega := strings.Repeat("m", 1<<20)                            // a one-megabyte value
	cycle := func(n int, id func(i int) string) string {
		var b strings.Builder
		b.WriteString("tasks:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {id: %q, args: [x], dependencies: [%q]}\n", id(i), id((i+1)%n))
		}
		return b.String()
	}
	files := map[string]string{
		"huge id":             "tasks:\n  - id: " + huge + "\n    args: [x]\n    dependencies: [" + huge + "y]\n    priority: " + huge + "\n",
		"huge ids everywhere": "tasks:\n  - {id: " + huge + "a, args: [x]}\n  - {id: " + huge + "a, args: [x], dependencies: [" + huge + "b, " + huge + "a]}\n",
		"huge unknown key":    "tasks:\n  - {id: a, args: [x], " + huge + ": 1}\n" + huge + ": 2\n",
		"cycle of 100000":     cycle(100_000, func(i int) string { return fmt.Sprintf("task-%06d", i) }),
		"cycle of huge ids":   cycle(10, func(i int) string { return fmt.Sprint(huge[:190], i) }),
		"cycle of junk ids":   strings.ReplaceAll(cycle(10, func(i int) string { return fmt.Sprint("JUNK", i) }), "JUNK", junk),
		"junk values": `scheduling: {timeout: "` + junk + `", gpu_placement: "` + junk + `"}
tasks:
  - id: "` + junk + `"
    args: ["` + junk + `"]
    priority: "` + junk + `"
    timeout: "` + junk + `"
    retries: "` + junk + `"
    env: {"` + junk + `": "` + junk + `", A: ["` + junk + `"]}
    dir: "` + junk + `"
    resources: {device: "` + junk + `", memory_mib: "` + junk + `", exclusive: "` + junk + `"}
    artifacts: ["` + junk + `"]
    hash_artifacts: "` + junk + `"
    on_complete: ["` + junk + `"]
    dependencies: ["` + junk + `", "` + junk + `"]
    "` + junk + `": 1
  - "` + junk + `"
  - {id: ok, args: [x], dependencies: ["` + junk + `"]}
`,
		"megabyte values":       "tasks:\n  - id: a\n    args: [x]\n    priority: " + mega + "\n    timeout: " + mega + "\n    resources: {device: " + mega + "}\n",
		"megabyte key":          mega + ": 1\n",
		"yaml error after junk": "tasks:\n  - id: a\n    args: [x]\n  - id: *" + huge + "\n",
		"tasks a junk scalar":   `tasks: "` + junk + `"`,
	}
	for name, src := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Parse(wfPath, []byte(src))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, line := range lines {
				if len(line) > maxLine || strings.ContainsAny(line, "\r\x00\x1b\t") || !utf8.ValidString(line) {
					t.Errorf("message of %d bytes is not one short line: %.700q", len(line), line)
				}
			}
			if name == "cycle of 100000" {
				want := wfPath + ":2: dependency cycle of 100000 tasks: task-000000 -> task-000001 -> task-000002 -> … -> task-099998 -> task-099999 -> task-000000"
				if len(lines) != 1 || lines[0] != want {
					t.Errorf("got %q, want %q", lines, want)
				}
			}
		})
	}
}
