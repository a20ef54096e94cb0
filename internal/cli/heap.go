package cli

import (
	"path/filepath"

	gpusched "github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/hugeheap"
)

// The heap a command builds, per byte of the workflow file it reads and
// of the state database (with its WAL), for hugeheap.Prepare. Measured on
// 100,000 tasks (bench/scale.sh): validate peaks at 166 MB resident for a
// 10 MB workflow, status at 137 MB for a 43 MB database, plan at 280 MB
// for both (docs/benchmarks.md).
const (
	heapPerWorkflowByte = 15
	heapPerStateByte    = 3
)

// prepareHeap backs the heap of a command about to read a workflow of
// workflowBytes and the state database in runDir ("": none) with huge
// pages, when that heap is large (hugeheap).
func prepareHeap(workflowBytes int64, runDir string) {
	n := heapPerWorkflowByte * workflowBytes
	if runDir != "" {
		db := filepath.Join(runDir, gpusched.StateFile)
		n += heapPerStateByte * (hugeheap.FileSize(db) + hugeheap.FileSize(db+"-wal"))
	}
	hugeheap.Prepare(n)
}
