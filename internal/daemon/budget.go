package daemon

import (
	"slices"
	"strconv"

	"github.com/gpusched/gpusched"
)

// GPU memory budgets learned from history (gpu_mib_auto). A daemon's
// task gets a new id in each run, so the run directory's rule (the same
// id and definition) cannot find its history: history finds it in the
// owner's earlier runs instead.
//
// "The same task" is one of the same owner, with the same id within its
// run, the same command (argv) and the same working directory. The
// environment is left out: a daemon gives each task its submitter's
// whole environment, which differs from one shell to the next, so
// comparing it would find no history at all.

// Bounds of the search: the runs looked at, newest first, and the
// matching tasks whose attempts are read.
const (
	historyRuns  = 10000
	historyTasks = 2 * gpusched.BudgetWindow
)

// history returns the attempts, oldest first, of the tasks of earlier
// runs that are the same task as ts (see above): the scheduler's
// WithBudgetHistory function.
func (d *Daemon) history(ts gpusched.TaskSpec) []gpusched.Attempt {
	_, inner, ok := splitTaskID(ts.ID)
	if !ok {
		return nil
	}
	uid := d.uid
	if ts.Owner != "" {
		var err error
		if uid, err = strconv.Atoi(ts.Owner); err != nil {
			return nil
		}
	}
	return d.attemptsOf(d.sameTasks(uid, inner, ts.Dir, commandOf(ts.Payload)))
}

// sameTasks returns the scheduler's ids of the tasks of uid's runs that
// are the same task as inner of a run, run in dir with argv (see above),
// newest run first, within the bounds of the search.
func (d *Daemon) sameTasks(uid int, inner, dir string, argv []string) []string {
	all := d.runs.all()
	var ids []string
	for i, looked := len(all)-1, 0; i >= 0 && looked < historyRuns && len(ids) < historyTasks; i, looked = i-1, looked+1 {
		r := all[i]
		if r.uid != uid {
			continue
		}
		for j := range r.tasks {
			if m := &r.tasks[j]; m.inner == inner && m.dir == dir && slices.Equal(m.command, argv) {
				ids = append(ids, qualify(r.id, inner))
			}
		}
	}
	return ids
}

// attemptsOf returns the attempts of tasks ids (newest first), oldest
// first, as the scheduler or the state database holds them.
func (d *Daemon) attemptsOf(ids []string) []gpusched.Attempt {
	var out []gpusched.Attempt
	for _, id := range slices.Backward(ids) {
		rec, held := d.sched.Record(id)
		if !held {
			st, ok, err := d.lookupStored(id)
			if err != nil || !ok {
				continue
			}
			rec = st.Record
		}
		out = append(out, rec.Attempts...)
	}
	return out
}
