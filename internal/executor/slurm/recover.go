package slurm

import (
	"context"
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// Recover finds each orphan's batch job again: by the job id in its
// handle, or, when no handle was saved (the scheduler died between sbatch
// and saving it), by the job's name. A job whose result file is there
// reports it; a job Slurm still holds (its release never came) is
// released; any other is adopted, and its Wait follows it as Execute does
// (a job that left Slurm without a result file is Lost after LostGrace).
// An unreadable handle, or no handle and no job of that name, is Lost.
// One squeue call asks about all of them.
func (e *Executor) Recover(orphans []executor.Orphan) []executor.Recovery {
	out := make([]executor.Recovery, len(orphans))
	lost := func(i int, err error) {
		out[i].Result = executor.Result{Reason: executor.Lost, End: time.Now(), Err: err}
	}
	hds := make([]handleData, len(orphans))
	var ask []int
	for i, o := range orphans {
		if o.Handle.IsZero() {
			s, ok, err := e.findByName(context.Background(), jobName(o.Job))
			switch {
			case err != nil:
				lost(i, fmt.Errorf("no handle of the attempt was saved, and Slurm could not be asked for its job: %w", err))
				continue
			case !ok:
				lost(i, fmt.Errorf("no handle of the attempt was saved, and Slurm has no job named %s", jobName(o.Job)))
				continue
			}
			hds[i] = handleData{JobID: s.ID, Result: filesOf(o.Job).result, Name: s.Name}
		} else {
			hd, err := decodeHandle(o.Handle)
			if err != nil {
				lost(i, err)
				continue
			}
			hds[i] = hd
		}
		if oc, ok, err := readOutcome(hds[i].Result); err != nil {
			lost(i, err)
			continue
		} else if ok {
			out[i].Result = oc.result()
			continue
		}
		ask = append(ask, i)
	}
	if len(ask) == 0 {
		return out
	}
	ids := make([]string, len(ask))
	for k, i := range ask {
		ids[k] = hds[i].JobID
	}
	// One call for all; when the controller does not answer, the jobs
	// are adopted all the same, and their Waits find out.
	states, _ := e.tracker().queue(ids)
	var held []string
	for _, i := range ask {
		hd, job, rep := hds[i], orphans[i].Job, &reporter{tell: orphans[i].Progress}
		s := states[hd.JobID]
		if s.held() {
			held = append(held, hd.JobID)
		}
		since, _ := readStarted(hd.Result) // zero while it waits
		out[i].Running = executor.Running{Handle: encodeHandle(hd), Since: since}
		out[i].Wait = func(ctx context.Context) executor.Result { return e.follow(ctx, job, hd, nil, rep, since) }
	}
	if len(held) > 0 {
		_ = e.release(context.Background(), held...)
	}
	return out
}

// Peek says, without asking Slurm, what Recover would start from for the
// attempt whose handle is h: its job id, and, when the job's result file
// is there, how the attempt ended (ended true). For views of a run no
// scheduler follows (plan, status), which must not wait on a controller.
func Peek(h executor.Handle) (job string, res executor.Result, ended bool, err error) {
	hd, err := decodeHandle(h)
	if err != nil {
		return "", executor.Result{}, false, err
	}
	o, ok, err := readOutcome(hd.Result)
	if err != nil || !ok {
		return hd.JobID, executor.Result{}, false, err
	}
	return hd.JobID, o.result(), true, nil
}
