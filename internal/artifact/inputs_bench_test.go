package artifact

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/internal/task"
)

// benchInputs makes a folder src of n files of 1 KiB, in 100 folders,
// and returns a task that reads src/.
func benchInputs(b *testing.B, n int, hash bool) *task.Spec {
	b.Helper()
	dir := b.TempDir()
	data := make([]byte, 1024)
	for i := range n {
		p := filepath.Join(dir, "src", fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.py", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return inputSpec(dir, hash, "src/")
}

// BenchmarkResumeInputs10k: what resume pays for a task reading a folder
// of 10,000 files that did not change: the walk, a stat per file, and the
// comparison with what was saved; with hash_inputs, the saved hashes are
// reused, so nothing is read.
func BenchmarkResumeInputs10k(b *testing.B) {
	for _, hash := range []bool{false, true} {
		b.Run(fmt.Sprintf("hash=%v", hash), func(b *testing.B) {
			sp := benchInputs(b, 10_000, hash)
			saved, err := Inputs(context.Background(), sp, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				now, err := Inputs(context.Background(), sp, saved)
				if err != nil {
					b.Fatal(err)
				}
				if why := InputsChanged(saved, now, hash); why != "" {
					b.Fatal(why)
				}
			}
		})
	}
}

// BenchmarkHashInputs10k: reading and hashing 10,000 files of 1 KiB with
// nothing saved before: an attempt's first start with hash_inputs.
func BenchmarkHashInputs10k(b *testing.B) {
	sp := benchInputs(b, 10_000, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inputs(context.Background(), sp, nil); err != nil {
			b.Fatal(err)
		}
	}
}
