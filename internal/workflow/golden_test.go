package workflow_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testdata/many-errors.yaml has mistakes of every kind; Load must report
// each once, in file order, as testdata/many-errors.golden says.
func TestLoadManyErrorsGolden(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "many-errors.yaml")
	w, err := workflow.Load(path)
	if err == nil {
		t.Fatalf("Load succeeded: %+v", w.Tasks)
	}
	got := err.Error() + "\n"
	golden := filepath.Join("testdata", "many-errors.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err2 := os.ReadFile(golden)
	if err2 != nil {
		t.Fatal(err2)
	}
	if got != string(want) {
		t.Errorf("Load error:\n%s\nwant (%s; go test -update rewrites it):\n%s", got, golden, want)
	}
	var list *workflow.ErrorList
	if !errors.As(err, &list) || len(list.Errs) != strings.Count(got, "\n") || list.More != 0 {
		t.Fatalf("error %T is not an *ErrorList with one line per problem", err)
	}
	for _, sentinel := range []error{gpusched.ErrInvalidTask, gpusched.ErrDuplicateTask, gpusched.ErrUnknownDependency, gpusched.ErrCycle} {
		if !errors.Is(err, sentinel) {
			t.Errorf("errors.Is(err, %v) = false; the list holds one", sentinel)
		}
	}
	var ce *gpusched.CycleError
	if !errors.As(err, &ce) || strings.Join(ce.Path, " ") != "loop-a loop-b loop-a" {
		t.Errorf("errors.As(err, *CycleError) = %v", ce)
	}
	for i := 1; i < len(list.Errs); i++ {
		if list.Errs[i].Line < list.Errs[i-1].Line {
			t.Errorf("problem %d (line %d) comes after line %d: not in file order", i, list.Errs[i].Line, list.Errs[i-1].Line)
		}
	}
}
