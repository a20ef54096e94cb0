package daemon

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/task"
)

// queue serves GET /v1/tasks: the tasks, in submission order, with who
// owns them and where they stand. Query: all=1 (finished tasks too),
// user=NAME|UID, state=S[,S...] (then finished ones too), id=ID
// (repeated: only these tasks or runs).
func (d *Daemon) queue(w http.ResponseWriter, r *http.Request, p peer) error {
	q := r.URL.Query()
	all := q.Get("all") == "1" || q.Get("all") == "true"
	uid := -1
	if u := q.Get("user"); u != "" {
		n, ok := uidOf(u)
		if !ok {
			return errorf(http.StatusBadRequest, "no user %q", u)
		}
		uid = n
	}
	var states []string
	if s := q.Get("state"); s != "" {
		for _, name := range strings.Split(s, ",") {
			var st gpusched.State
			if err := st.UnmarshalText([]byte(name)); err != nil {
				return errorf(http.StatusBadRequest, "state %q: one of pending, running, complete, failed, blocked, cancelled", name)
			}
			states = append(states, st.String())
		}
		all = true
	}
	var only map[string]bool
	if ids := q["id"]; len(ids) > 0 {
		ts, err := d.resolveAll(ids)
		if err != nil {
			return err
		}
		only = make(map[string]bool, len(ts))
		for _, t := range ts {
			only[t.id] = true
		}
		all = true
	}
	recs := d.liveRecords()
	// The tasks shown: the scheduler's records, and for finished tasks it
	// does not hold, their summaries, read in one go for those without.
	type row struct {
		rn *run
		m  *taskMeta
		id string
	}
	var rows []row
	var finished []string
	for _, rn := range d.runs.all() {
		if uid >= 0 && rn.uid != uid {
			continue
		}
		for i := range rn.tasks {
			m := &rn.tasks[i]
			id := qualify(rn.id, m.inner)
			if only != nil && !only[id] {
				continue
			}
			if recs[id] == nil {
				if !all {
					continue // finished (what has not is in the scheduler), or being submitted
				}
				if st, ok := d.tasks.endedAs(id); ok && states != nil && !slices.Contains(states, st.String()) {
					continue // spares reading it
				}
				finished = append(finished, id)
			}
			rows = append(rows, row{rn, m, id})
		}
	}
	d.summarise(finished)
	out := client.Queue{Tasks: []client.TaskInfo{}}
	for _, r := range rows {
		rec := recs[r.id]
		var sh shown
		if rec != nil {
			sh = shownOf(rec)
		} else {
			sm, ok := d.tasks.summaryOf(r.id)
			if !ok {
				continue // being submitted, or lost with a crash before it was
			}
			sh = sm.shown()
		}
		if !all && sh.state.Terminal() {
			continue
		}
		if states != nil && !slices.Contains(states, sh.state.String()) {
			continue
		}
		out.Tasks = append(out.Tasks, d.info(p, r.rn, r.m, &sh, rec, recs))
	}
	w.Header().Set("Content-Type", "application/json")
	if err := writeQueue(w, out.Tasks); err != nil {
		d.log.Printf("queue: %v", err)
	}
	return nil
}

// liveRecords returns the scheduler's records by id.
func (d *Daemon) liveRecords() map[string]*gpusched.Record {
	list := d.sched.Records()
	m := make(map[string]*gpusched.Record, len(list))
	for i := range list {
		m[list[i].ID] = &list[i]
	}
	return m
}

// stateOf returns task id's state: from recs, or, for a finished task,
// as the daemon noted it (reading its record only when it did not).
func (d *Daemon) stateOf(recs map[string]*gpusched.Record, id string) (gpusched.State, bool) {
	if r := recs[id]; r != nil {
		return r.State, true
	}
	if st, ok := d.tasks.endedAs(id); ok {
		return st, true
	}
	if r, ok := d.stored(id); ok {
		return r.State, true
	}
	return 0, false
}

// lookup returns task id's record, read alone: the scheduler's, or, for a
// task it does not hold, the state database's.
func (d *Daemon) lookup(id string) (gpusched.Record, bool) {
	if r, ok := d.sched.Record(id); ok {
		return r, true
	}
	return d.stored(id)
}

// stored returns the record of a task the scheduler does not hold, from
// the state database: a finished task, retired by the scheduler or left
// by an earlier daemon, or one of a run whose tasks never reached it
// (markUnqueued). This is the one way the daemon answers for it.
func (d *Daemon) stored(id string) (gpusched.Record, bool) {
	if r, ok := d.tasks.unqueued[id]; ok {
		return r, true
	}
	st, ok, err := d.lookupStored(id)
	if err != nil {
		d.log.Printf("read task %s: %v", id, err)
		return gpusched.Record{}, false
	}
	if !ok || !st.Record.State.Terminal() {
		return gpusched.Record{}, false // not yet submitted, or being submitted again
	}
	if sm, ok := d.tasks.summaryOf(id); !ok || sm.state != st.Record.State {
		d.tasks.note(id, summaryOf(&st.Record))
	}
	return st.Record, true
}

// info is a task as the queue shows it to p: sh, and for a task the
// scheduler holds, rec (nil otherwise).
func (d *Daemon) info(p peer, rn *run, m *taskMeta, sh *shown, rec *gpusched.Record, recs map[string]*gpusched.Record) client.TaskInfo {
	t := client.TaskInfo{
		ID: showID(rn, m.inner), Run: strconv.FormatInt(rn.id, 10), Kind: rn.kind, Name: rn.name, Owner: rn.user, UID: rn.uid,
		State: sh.state.String(), Attempts: sh.attempts, ExitCode: sh.exitCode, Error: sh.err, Submitted: sh.submitted,
		GPU: sh.gpu, GPUs: sh.gpus, Started: sh.start, Ended: sh.end,
	}
	if sh.blockedBy != "" {
		t.BlockedBy = d.show(sh.blockedBy)
	}
	t.NotNeeded = sh.notNeeded
	if rec != nil {
		if rec.State == gpusched.StatePending {
			t.Waiting, t.WaitingKind = d.waitingReason(rec, m, recs)
		}
		t.Paused = rec.Paused
		if !rec.State.Terminal() {
			if a := rec.LastAttempt(); a != nil && a.Job != nil {
				t.Job = &client.Job{System: a.Job.System, ID: a.Job.ID, State: a.Job.State, Node: a.Job.Node, Reason: a.Job.Reason, Queued: a.Job.Queued}
			}
			if m.gpuAuto || m.hostAuto {
				d.learned.show(d, &t, rec)
			}
		}
	}
	if owns(p, rn) {
		t.Command, t.Dir = m.command, m.dir
	}
	return t
}

// waitingReason says why a pending task waits, and the kind of reason: the
// engine's reason, with the names of unfinished dependencies as the
// daemon shows them (RUN/TASK, or a command run's number), each with its
// condition as the engine says it ("13/train (any outcome)"). A task the
// engine has not looked at yet waits for what the daemon can tell: its
// retry delay, or a dependency not complete yet.
func (d *Daemon) waitingReason(rec *gpusched.Record, m *taskMeta, recs map[string]*gpusched.Record) (string, string) {
	w := rec.Waiting
	switch w.Kind {
	case gpusched.NotWaiting, gpusched.WaitDependencies:
		if !rec.RetryAt.IsZero() {
			return "retry at " + rec.RetryAt.Local().Format(time.TimeOnly), gpusched.WaitRetryDelay.String()
		}
		var after []string
		for _, dep := range m.deps {
			// One that ended met the task's condition on it: else the
			// task would be blocked.
			if st, ok := d.stateOf(recs, dep); ok && !st.Terminal() {
				after = append(after, d.show(dep)+task.Condition(m.on[dep]).Phrase())
			}
		}
		if len(after) > 0 {
			return "after " + strings.Join(after, ", "), gpusched.WaitDependencies.String()
		}
		return "", ""
	case gpusched.WaitSlot, gpusched.WaitGPUMemory, gpusched.WaitCardReserved, gpusched.WaitCardUnavailable,
		gpusched.WaitGPUUnknown, gpusched.WaitRetryDelay, gpusched.WaitBackoff, gpusched.WaitPaused, gpusched.WaitUserCap,
		gpusched.WaitQueued, gpusched.WaitCPU, gpusched.WaitHostMemory, gpusched.WaitResource:
	}
	return w.String(), w.Kind.String()
}

// show is how the daemon prints the scheduler's task id.
func (d *Daemon) show(id string) string {
	runID, inner, ok := splitTaskID(id)
	if !ok {
		return id
	}
	if rn := d.runs.get(runID); rn != nil {
		return showID(rn, inner)
	}
	return id
}

// listRuns serves GET /v1/runs.
func (d *Daemon) listRuns(w http.ResponseWriter, _ *http.Request, p peer) error {
	var out struct {
		Runs []client.RunInfo `json:"runs"`
	}
	out.Runs = []client.RunInfo{}
	for _, rn := range d.runs.all() {
		ri := client.RunInfo{ID: strconv.FormatInt(rn.id, 10), Kind: rn.kind, Name: rn.name, Owner: rn.user, UID: rn.uid,
			Created: rn.created, Tasks: len(rn.tasks)}
		if owns(p, rn) {
			ri.Dir = rn.dir
		}
		out.Runs = append(out.Runs, ri)
	}
	return writeJSON(w, http.StatusOK, out)
}
