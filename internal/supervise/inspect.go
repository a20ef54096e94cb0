package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/procfs"
)

// Fate is what a scheduler opening a run directory now would find of an
// attempt recorded running.
type Fate uint8

// The fates of an attempt recorded running.
const (
	// Adoptable: its supervisor is alive and its process still runs; a
	// scheduler would adopt it.
	Adoptable Fate = iota + 1
	// Ended: it ended while no scheduler watched; its supervisor recorded
	// how (the Result).
	Ended
	// Unknown: neither: its outcome is lost, and a scheduler would record
	// it interrupted and run it again.
	Unknown
)

// Inspect tells, without touching anything (no connection to the
// supervisor, no lock taken), what a scheduler would find of orphan o of
// runDir: for people (status, plan), not for decisions, which Recover
// makes.
func Inspect(runDir string, o executor.Orphan) (Fate, executor.Result) {
	if r, ok, _ := ReadResult(runDir, o); ok {
		return Ended, r
	}
	if !supervisorAlive(runDir) {
		return Unknown, executor.Result{}
	}
	p, err := local.DecodeHandle(o.Handle)
	if err != nil || p.PID <= 0 {
		return Unknown, executor.Result{}
	}
	st, ok := procfs.Read(p.PID)
	if !ok || st.Zombie() || (p.StartTicks != 0 && st.StartTicks != p.StartTicks) {
		return Unknown, executor.Result{}
	}
	return Adoptable, executor.Result{}
}

// supervisorAlive reports whether the process whose PID the supervisor
// lock holds is alive and serves runDir.
func supervisorAlive(runDir string) bool {
	b, err := os.ReadFile(filepath.Join(runDir, lockName))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return false
	}
	return procfs.Alive(pid) && procfs.Getenv(pid, EnvVar) == abs
}
