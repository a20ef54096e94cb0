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
// supervisor, no lock taken), what a scheduler would find of each orphan
// of runDir, reading the results file once: for people (status, plan),
// not for decisions, which Recover makes. results[i] is set when fates[i]
// is Ended.
func Inspect(runDir string, orphans []executor.Orphan) (fates []Fate, results []executor.Result) {
	fates, results = make([]Fate, len(orphans)), make([]executor.Result, len(orphans))
	want := make([]wanted, len(orphans))
	procs := make([]executor.Process, len(orphans))
	for i, o := range orphans {
		procs[i], _ = local.DecodeHandle(o.Handle)
		want[i] = wanted{id: o.Job.Token, proc: procs[i]}
	}
	recs, _ := readResults(runDir, want)
	alive := supervisorAlive(runDir)
	for i, o := range orphans {
		if rec := recs[o.Job.Token]; rec != nil {
			fates[i], results[i] = Ended, rec.result()
			continue
		}
		fates[i] = Unknown
		if p := procs[i]; alive && p.PID > 0 {
			st, ok := procfs.Read(p.PID)
			if ok && !st.Zombie() && (p.StartTicks == 0 || st.StartTicks == p.StartTicks) {
				fates[i] = Adoptable
			}
		}
	}
	return fates, results
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
