package dag

import (
	"errors"
	"fmt"
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
