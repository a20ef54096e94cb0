package workflow_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/workflow"
)

// bigWorkflow returns a workflow file of n tasks, each depending on up to
// two random earlier ones, as bench_test.go's graph() in the root package.
func bigWorkflow(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString("tasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: task-%06d\n    args: [\"true\"]\n    priority: %d\n", i, r.IntN(10))
		if i > 0 {
			d1, d2 := r.IntN(i), r.IntN(i)
			if d1 == d2 {
				fmt.Fprintf(&b, "    dependencies: [task-%06d]\n", d1)
			} else {
				fmt.Fprintf(&b, "    dependencies: [task-%06d, task-%06d]\n", d1, d2)
			}
		}
	}
	return []byte(b.String())
}

// BenchmarkParse100k: loading a 100,000-task workflow file, every check
// included (what "gpusched validate" does before it looks at GPUs).
func BenchmarkParse100k(b *testing.B) {
	data := bigWorkflow(100_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := workflow.Parse("/tmp/w.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

// sweepWorkflow returns a workflow file whose matrix task expands to
// 100,000 tasks (100 × 1,000), with 100 tasks gathering 1,000 of them each
// by a glob and one gathering all 100,000.
func sweepWorkflow() []byte {
	return []byte(fmt.Sprintf(`defaults:
  retries: 1
  env: {MODE: sweep}
tasks:
  - id: run-${a}-${b}
    matrix: {a: [%s], b: [%s]}
    args: [run, --a, "${a}", --b, "${b}"]
    artifacts: ["out/${a}/${b}.txt"]
  - id: best-${a}
    matrix: {a: [%[1]s]}
    dependencies: ["run-${a}-*"]
    args: [best, "${a}"]
  - id: all
    dependencies: ["run-*"]
    args: [all]
`, numbers(100), numbers(1000)))
}

func numbers(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return strings.Join(s, ", ")
}

// BenchmarkParseSweep100k: loading a file whose one matrix task expands to
// 100,000 tasks, and whose globs gather them.
func BenchmarkParseSweep100k(b *testing.B) {
	data := sweepWorkflow()
	b.ReportAllocs()
	for b.Loop() {
		w, err := workflow.Parse("/tmp/w.yaml", data)
		if err != nil {
			b.Fatal(err)
		}
		if len(w.Tasks) != 100_101 || len(w.Tasks[100_100].Dependencies) != 100_000 {
			b.Fatalf("%d tasks", len(w.Tasks))
		}
	}
}
