package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// profileEnv names a file that receives a CPU profile of the scheduler
// (the process that runs the workflow: not the front, not the
// supervisor), for bench/throughput.sh's figures in docs/benchmarks.md.
// Undocumented on purpose: it is for measuring gpusched, not for users.
const profileEnv = "GPUSCHED_CPUPROFILE"

// startProfile starts the CPU profile $GPUSCHED_CPUPROFILE asks for, if
// any, and returns what stops it. A profile that cannot be written is
// said on stderr, and the run goes on without one.
func startProfile(stderr io.Writer) (stop func()) {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "gpusched: %s: %v\n", profileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
