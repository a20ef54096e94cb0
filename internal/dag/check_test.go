package dag

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/task"
)

func specs(defs ...string) []*task.Spec {
	// "b:a,c" is task b depending on a and c.
	var out []*task.Spec
	for _, d := range defs {
		id, deps, _ := strings.Cut(d, ":")
		s := &task.Spec{ID: id}
		if deps != "" {
			s.Dependencies = strings.Split(deps, ",")
		}
		out = append(out, s)
	}
	return out
}

func TestCheckBatch(t *testing.T) {
	known := map[string]bool{"prepare": true, "old": true}
	tests := []struct {
		name    string
		batch   []*task.Spec
		want    error
		message string
	}{
		{"empty", nil, nil, ""},
		{"chain", specs("a", "b:a", "c:b"), nil, ""},
		{"dependents first", specs("c:b", "b:a", "a"), nil, ""},
		{"depends on known", specs("train:prepare", "eval:train,old"), nil, ""},
		{"diamond", specs("a", "b:a", "c:a", "d:b,c"), nil, ""},
		{"duplicate in batch", specs("a", "b", "a"), task.ErrDuplicateTask, `task "a": id: defined twice (tasks #1 and #3 of the batch)`},
		{"duplicate of known", specs("prepare"), task.ErrDuplicateTask, `task "prepare": id: a task with this id was already submitted`},
		{"unknown dependency", specs("train:prep"), task.ErrUnknownDependency, `task "train": dependencies: depends on "prep", which is not defined (did you mean "prepare"?)`},
		{"unknown, nothing close", specs("train:zzzzzz"), task.ErrUnknownDependency, `task "train": dependencies: depends on "zzzzzz", which is not defined`},
		{"cycle of three", specs("a:c", "b:a", "c:b"), task.ErrCycle, "dependency cycle: a -> c -> b -> a"},
		{"cycle behind a chain", specs("x", "y:x,b", "a:b", "b:a"), task.ErrCycle, "dependency cycle: b -> a -> b"},
		{"two-node cycle", specs("a:b", "b:a"), task.ErrCycle, "dependency cycle: a -> b -> a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBatch(tt.batch, known)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("CheckBatch = %v, want %v", err, tt.want)
			}
			if err != nil && err.Error() != tt.message {
				t.Errorf("message = %q\n         want %q", err.Error(), tt.message)
			}
		})
	}
}

// CheckBatchFunc knows tasks through a lookup that may know more than the
// ids it is given for hints: an engine that retired finished tasks from
// memory finds them in its store.
func TestCheckBatchFunc(t *testing.T) {
	inMemory := map[string]bool{"prepare": true}
	has := func(id string) bool { return inMemory[id] || id == "retired" }
	tests := []struct {
		name    string
		batch   []*task.Spec
		want    error
		message string
	}{
		{"depends on a retired task", specs("train:retired,prepare"), nil, ""},
		{"reuses a retired id", specs("retired"), task.ErrDuplicateTask, `task "retired": id: a task with this id was already submitted`},
		{"hint from memory", specs("train:prep"), task.ErrUnknownDependency, `task "train": dependencies: depends on "prep", which is not defined (did you mean "prepare"?)`},
		{"hint from the batch", specs("trainer", "eval:traine"), task.ErrUnknownDependency, `task "eval": dependencies: depends on "traine", which is not defined (did you mean "trainer"?)`},
		{"cycle", specs("a:b", "b:a,retired"), task.ErrCycle, "dependency cycle: a -> b -> a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBatchFunc(tt.batch, has, maps.Keys(inMemory))
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("CheckBatchFunc = %v, want %v", err, tt.want)
			}
			if err != nil && err.Error() != tt.message {
				t.Errorf("message = %q\n         want %q", err.Error(), tt.message)
			}
		})
	}
	if err := CheckBatchFunc(specs("x:retird"), has, nil); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("no ids for hints: %v, want an unknown dependency without a hint", err)
	}
}

func TestCycleErrorPath(t *testing.T) {
	err := CheckBatch(specs("a:b", "b:c", "c:a"), map[string]bool{})
	var ce *task.CycleError
	if !errors.As(err, &ce) || len(ce.Path) != 4 || ce.Path[0] != ce.Path[3] {
		t.Fatalf("err = %#v, want a closed cycle path", err)
	}
}

func TestLongChainDoesNotOverflow(t *testing.T) {
	const n = 200000
	batch := make([]*task.Spec, n)
	for i := range batch {
		batch[i] = &task.Spec{ID: fmt.Sprint("t", i)}
		if i > 0 {
			batch[i].Dependencies = []string{fmt.Sprint("t", i-1)}
		}
	}
	if err := CheckBatch(batch, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	batch[0].Dependencies = []string{fmt.Sprint("t", n-1)}
	var ce *task.CycleError
	if err := CheckBatch(batch, map[string]bool{}); !errors.As(err, &ce) || len(ce.Path) != n+1 {
		t.Fatalf("want a cycle through all %d tasks, got %v", n, err)
	}
}

// Check finds every problem: each duplicate, each unknown dependency, and a
// cycle in each strongly connected component, told from its first task.
func TestCheck(t *testing.T) {
	known := map[string]bool{"prepare": true}
	tests := []struct {
		name  string
		batch []*task.Spec
		want  []string // "index: message"
	}{
		{"valid", specs("a", "b:a", "c:a,b,prepare"), nil},
		{
			"duplicates and unknowns, all of them",
			specs("a", "a", "prepare", "b:a,prepar,zzzzzz", "c:nope", "a"),
			[]string{
				`1: task "a": id: defined twice (tasks #1 and #2 of the batch)`,
				`2: task "prepare": id: a task with this id was already submitted`,
				`5: task "a": id: defined twice (tasks #1 and #6 of the batch)`,
				`3: task "b": dependencies: depends on "prepar", which is not defined (did you mean "prepare"?)`,
				`3: task "b": dependencies: depends on "zzzzzz", which is not defined`,
				`4: task "c": dependencies: depends on "nope", which is not defined`,
			},
		},
		{
			"one cycle per component, each from its first task, in batch order",
			specs("x", "p:q", "a:c", "q:p", "b:a", "c:b,x", "s:s", "d:a"),
			[]string{
				"1: dependency cycle: p -> q -> p",
				"2: dependency cycle: a -> c -> b -> a",
				"6: dependency cycle: s -> s",
			},
		},
		{
			"the shortest cycle through the first task of a component",
			specs("a:b,c", "b:c", "c:a"),
			[]string{"0: dependency cycle: a -> c -> a"},
		},
		{
			"unknowns and a cycle together",
			specs("a:b,ghost", "b:a"),
			[]string{
				`0: task "a": dependencies: depends on "ghost", which is not defined`,
				"0: dependency cycle: a -> b -> a",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range Check(tt.batch, known, 10) {
				got = append(got, fmt.Sprintf("%d: %v", p.Index, p.Err))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Check:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			// CheckBatch reports one of them, or none when there is none.
			if err := CheckBatch(tt.batch, known); (err == nil) != (len(tt.want) == 0) {
				t.Errorf("CheckBatch = %v, but Check found %d problems", err, len(tt.want))
			}
		})
	}
}

// Only the first hints unknown dependencies get a "did you mean": each
// costs a pass over every id.
func TestCheckHints(t *testing.T) {
	batch := specs("prepare", "a:prepar", "b:prepar", "c:prepar")
	var with int
	for _, p := range Check(batch, map[string]bool{}, 2) {
		if strings.Contains(p.Err.Error(), "did you mean") {
			with++
		}
	}
	if with != 2 {
		t.Errorf("%d problems with a hint, want 2", with)
	}
}

// A cycle through 200,000 tasks is found without growing the stack, told
// in full in the error's Path and cut in its message.
func TestCheckLongCycle(t *testing.T) {
	const n = 200000
	batch := make([]*task.Spec, n)
	for i := range batch {
		batch[i] = &task.Spec{ID: fmt.Sprint("t", i), Dependencies: []string{fmt.Sprint("t", (i+1)%n)}}
	}
	ps := Check(batch, map[string]bool{}, 10)
	var ce *task.CycleError
	if len(ps) != 1 || !errors.As(ps[0].Err, &ce) || len(ce.Path) != n+1 || ps[0].Index != 0 {
		t.Fatalf("Check = %v, want one cycle through all %d tasks", ps, n)
	}
	if want := "dependency cycle of 200000 tasks: t0 -> t1 -> t2 -> … -> t199998 -> t199999 -> t0"; ce.Error() != want {
		t.Errorf("message %q, want %q", ce.Error(), want)
	}
}
