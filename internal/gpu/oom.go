package gpu

import (
	"bytes"
	"regexp"
	"strconv"
)

// oomMarks are what CUDA programs print when a GPU allocation fails:
// PyTorch, the CUDA runtime, TensorFlow, JAX/XLA.
var oomMarks = [][]byte{
	[]byte("CUDA out of memory"),
	[]byte("CUDA error: out of memory"),
	[]byte("torch.OutOfMemoryError"),
	[]byte("torch.cuda.OutOfMemoryError"),
	[]byte("cudaErrorMemoryAllocation"),
	[]byte("CUDA_ERROR_OUT_OF_MEMORY"),
	[]byte("RESOURCE_EXHAUSTED: Out of memory"),
}

// triedRE finds PyTorch's "Tried to allocate 20.00 MiB" (or GiB).
var triedRE = regexp.MustCompile(`Tried to allocate ([0-9]+(?:\.[0-9]+)?) ?(KiB|MiB|GiB|TiB)`)

// DetectOOM reports whether log (the end of an attempt's output) shows a
// CUDA out-of-memory failure, and how much the failing allocation asked for
// in MiB when the message says (0 otherwise).
func DetectOOM(log []byte) (oom bool, triedMiB int64) {
	for _, m := range oomMarks {
		if bytes.Contains(log, m) {
			oom = true
			break
		}
	}
	if !oom {
		return false, 0
	}
	all := triedRE.FindAllSubmatch(log, -1)
	if len(all) == 0 {
		return true, 0
	}
	last := all[len(all)-1]
	v, _ := strconv.ParseFloat(string(last[1]), 64)
	switch string(last[2]) {
	case "KiB":
		v /= 1024
	case "GiB":
		v *= 1024
	case "TiB":
		v *= 1024 * 1024
	}
	return true, int64(v + 0.999999)
}

// GrowAfterOOM returns the request for the next attempt of a task that ran
// out of memory: what it held (the larger of its request and the peak it
// was seen to use: a poll may have missed its memory) plus the allocation
// that failed, plus margin; so always more than before.
func GrowAfterOOM(request, peak, tried, margin int64) int64 {
	return max(request, peak) + tried + max(margin, 1)
}
