package nvidiasmi

import (
	"context"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/procfs"
)

var _ gpu.Probe = (*Probe)(nil)

// Snapshot runs Query and returns its answer as the admission code sees
// it: cards (unusable ones with the reason), compute processes with their
// process group, ancestors and attempt token read from /proc, so they can
// be attributed to our tasks, and the cards nvidia-smi reported lost.
func (p *Probe) Snapshot(ctx context.Context) (gpu.Snapshot, error) {
	q, err := p.Query(ctx)
	if err != nil {
		return gpu.Snapshot{}, err
	}
	return convert(q, time.Now(), lineage, token), nil
}

// convert maps a Query answer to a gpu.Snapshot; lin gives a process's
// group and ancestors, tok its attempt token.
func convert(q Snapshot, now time.Time, lin func(pid int) (int, []int), tok func(pid int) string) gpu.Snapshot {
	s := gpu.Snapshot{Time: now}
	for _, g := range q.GPUs {
		if g.Index < 0 {
			continue // a card we cannot name cannot be given to a task
		}
		c := gpu.Card{Index: g.Index, UUID: g.UUID, Name: g.Name, Problem: g.Unusable}
		c.TotalMiB, c.UsedMiB, c.FreeMiB = g.Total.MiB, g.Used.MiB, g.Free.MiB
		s.Cards = append(s.Cards, c)
	}
	for _, a := range q.Apps {
		pr := gpu.Proc{PID: a.PID, GPUUUID: a.GPUUUID, UsedMiB: -1}
		if a.Used.Known {
			pr.UsedMiB = a.Used.MiB
		}
		if a.PID > 0 {
			pr.PGID, pr.Ancestors = lin(a.PID)
			pr.Token = tok(a.PID)
		}
		s.Procs = append(s.Procs, pr)
	}
	for _, pb := range q.Problems {
		if pb.NamesCard() {
			s.Lost = append(s.Lost, gpu.Lost{Index: pb.GPUIndex, BusID: pb.BusID, Reason: strings.TrimSpace(pb.Text + " " + pb.Msg)})
		}
	}
	return s
}

// lineage returns pid's process group and its ancestors (parent first), as
// far as /proc shows them; nvidia-smi reports host PIDs, so processes in
// other PID namespaces may show none.
func lineage(pid int) (pgid int, ancestors []int) {
	for range 64 {
		st, ok := procfs.Read(pid)
		if !ok {
			return pgid, ancestors
		}
		if pgid == 0 {
			pgid = st.PGID
		}
		if st.PPID <= 1 {
			return pgid, ancestors
		}
		ancestors = append(ancestors, st.PPID)
		pid = st.PPID
	}
	return pgid, ancestors
}

// token returns the attempt token in pid's environment (see gpu.Proc.Token).
func token(pid int) string { return procfs.Getenv(pid, executor.TokenVar) }
