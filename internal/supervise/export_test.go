package supervise

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// CompactControl is the file in a run directory that, when present as
// its supervisor (this test binary) starts, makes every forget compact
// the results file and, when it names a step of the compaction
// ("written", "renamed"), has the supervisor kill itself (SIGKILL) there.
const CompactControl = "test-compact"

func init() {
	dir, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, CompactControl))
	if err != nil {
		return
	}
	compactAt = 1
	crashAt := strings.TrimSpace(string(b))
	compactHook = func(step string) {
		if step == crashAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// FlushForgets sends what e.Forget gathered now, rather than once a batch
// is full.
func FlushForgets(e *Executor) { e.flushForgets() }
