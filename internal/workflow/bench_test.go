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
