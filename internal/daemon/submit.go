package daemon

import (
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/task"
)

// submit serves POST /v1/runs: a run made of the request's tasks.
func (d *Daemon) submit(w http.ResponseWriter, r *http.Request, p peer) error {
	var req client.RunRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := d.canRunFor(p); err != nil {
		return err
	}
	if old := d.runs.withKey(p.uid, req.Key); old != nil {
		return d.submitted(w, old)
	}
	nr, err := d.newRun(req, p)
	if err != nil {
		return err
	}
	nr.id = d.runs.reserve()
	specs, earlier, err := d.specs(nr, req, d.ownerOf(p))
	if err != nil {
		return err
	}
	got, made, err := d.runs.save(nr)
	if err != nil {
		return err
	}
	if made {
		err := error(nil)
		if d.runsAsOthers(got) {
			err = d.ownLogDir(got, p.gid)
		}
		switch {
		case err != nil:
		case earlier:
			// Depends on finished tasks the scheduler no longer holds:
			// submitted as a restore is, so that each such dependency is
			// judged by how the task ended, and waits for its new end if
			// it is retried.
			err = d.sched.SubmitAgain(r.Context(), specs)
		default:
			err = d.sched.SubmitManyContext(r.Context(), specs)
		}
		if err != nil {
			if rerr := d.runs.remove(got); rerr != nil {
				d.log.Printf("run %d: submit failed (%v), and it cannot be forgotten: %v", got.id, err, rerr)
			}
			return err
		}
	}
	return d.submitted(w, got)
}

// submitted answers a submission with run r's ids.
func (d *Daemon) submitted(w http.ResponseWriter, got *run) error {
	out := client.Submitted{Run: strconv.FormatInt(got.id, 10), Tasks: make([]string, len(got.tasks))}
	for i, t := range got.tasks {
		out.Tasks[i] = showID(got, t.inner)
	}
	return writeJSON(w, http.StatusOK, out)
}

// canRunFor says whether the daemon can run tasks for p, as p: those of
// its own user always; those of every user when it is the system daemon
// and root, which runs each task as its owner (and, in tests, when
// runAsAnyone, which runs them as the daemon's user). A per-user daemon
// never gets here for another user: the route refuses them (allow).
func (d *Daemon) canRunFor(p peer) error {
	if p.uid == d.uid || d.runAsAnyone || (d.cfg.System && d.uid == 0) {
		return nil
	}
	return errorf(http.StatusForbidden, "this daemon runs as %s, not root, so it cannot run tasks as %s; start your own (gpusched daemon, or set GPUSCHED_SOCKET to it)",
		d.userName(d.uid), d.userName(p.uid))
}

// newRun checks a request and makes its run, not yet numbered.
func (d *Daemon) newRun(req client.RunRequest, p peer) (*run, error) {
	switch req.Kind {
	case client.KindCommand:
		if len(req.Tasks) != 1 {
			return nil, errorf(http.StatusBadRequest, "a command run has one task, not %d", len(req.Tasks))
		}
		if len(req.Tasks[0].Dependencies) > 0 {
			return nil, errorf(http.StatusBadRequest, "a command run has no other task to depend on; use after")
		}
	case client.KindWorkflow:
		if len(req.Tasks) == 0 {
			return nil, errorf(http.StatusBadRequest, "a workflow run needs tasks")
		}
	default:
		return nil, errorf(http.StatusBadRequest, "kind %q: a run is a %q or a %q", req.Kind, client.KindCommand, client.KindWorkflow)
	}
	if req.Dir != "" && !filepath.IsAbs(req.Dir) {
		return nil, errorf(http.StatusBadRequest, "dir %q: give an absolute path", req.Dir)
	}
	if len(req.Key) > gpusched.MaxKeyLength {
		return nil, errorf(http.StatusBadRequest, "key: at most %d bytes", gpusched.MaxKeyLength)
	}
	nr := &run{uid: p.uid, user: d.userName(p.uid), kind: req.Kind, name: oneLine(req.Name), created: time.Now(),
		dir: req.Dir, key: req.Key, tasks: make([]taskMeta, len(req.Tasks))}
	if len(nr.name) > 200 {
		nr.name = nr.name[:200]
	}
	seen := map[string]bool{}
	for i, t := range req.Tasks {
		inner := t.ID
		if req.Kind == client.KindCommand {
			inner = CommandTask
		}
		if inner == "" {
			return nil, errorf(http.StatusBadRequest, "task %d of the workflow has no id", i+1)
		}
		if seen[inner] {
			return nil, errorf(http.StatusBadRequest, "task %q: listed twice", inner)
		}
		seen[inner] = true
		dir := t.Dir
		if dir == "" {
			dir = req.Dir
		} else if !filepath.IsAbs(dir) {
			if req.Dir == "" {
				return nil, errorf(http.StatusBadRequest, "task %q: dir %q is relative, and the run has no dir", inner, dir)
			}
			dir = filepath.Join(req.Dir, dir)
		}
		nr.tasks[i] = taskMeta{inner: inner, command: t.Command, dir: dir, gpuAuto: t.GPUMiBAuto, hostAuto: t.MemoryMiBHostAuto}
	}
	return nr, nil
}

// specs makes the scheduler's tasks of run nr, numbered now, owned by
// owner (a uid; see ownerOf).
func (d *Daemon) specs(nr *run, req client.RunRequest, owner string) (specs []gpusched.TaskSpec, earlier bool, err error) {
	specs = make([]gpusched.TaskSpec, len(req.Tasks))
	for i, t := range req.Tasks {
		m := &nr.tasks[i]
		sp := gpusched.TaskSpec{
			ID: qualify(nr.id, m.inner), Payload: t.Command, Priority: t.Priority, Dir: m.dir,
			Timeout: time.Duration(t.Timeout), RetryDelay: time.Duration(t.RetryDelay), RetryOnExitCodes: t.RetryOnExitCodes,
			RetryOnTimeout: t.RetryOnTimeout, Artifacts: t.Artifacts, HashArtifacts: t.HashArtifacts, OnComplete: t.OnComplete,
			OnFailure: t.OnFailure, Owner: owner,
		}
		switch {
		case t.GPUMiBAuto && t.GPUMiB != 0:
			return nil, false, errorf(http.StatusBadRequest, "task %q: gpu_mib and gpu_mib_auto: give one", m.inner)
		case t.GPUMiBMax != 0 && !t.GPUMiBAuto:
			return nil, false, errorf(http.StatusBadRequest, "task %q: gpu_mib_max caps a budget learned from history: it goes with gpu_mib_auto", m.inner)
		case t.GPUs != 0 && t.GPUMiB == 0 && !t.Exclusive && !t.GPUMiBAuto:
			return nil, false, errorf(http.StatusBadRequest, "task %q: gpus is for GPU tasks: give gpu_mib, exclusive or gpu_mib_auto too", m.inner)
		case t.GPUMiBAuto:
			sp.Resources = gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryAuto: true, MemoryMaxMiB: t.GPUMiBMax, Exclusive: t.Exclusive}
		case t.GPUMiB > 0 || t.Exclusive:
			sp.Resources = gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: t.GPUMiB, Exclusive: t.Exclusive}
		}
		sp.Resources.GPUs = t.GPUs
		if err := d.hostRequest(m.inner, &t, &sp.Resources); err != nil {
			return nil, false, err
		}
		if t.Retries != nil {
			sp.Retries = *t.Retries
			if sp.Retries == 0 {
				sp.Retries = gpusched.NoRetries
			}
		}
		switch {
		case req.Env != nil:
			// The submitter's environment, exactly, then the task's own.
			sp.CleanEnv = true
			sp.Env = make(map[string]string, len(req.Env)+len(t.Env))
			for k, v := range req.Env {
				sp.Env[k] = v
			}
			for k, v := range t.Env {
				sp.Env[k] = v
			}
		default:
			sp.Env = t.Env
		}
		for _, dep := range t.Dependencies {
			sp.Dependencies = append(sp.Dependencies, qualify(nr.id, dep))
		}
		on, err := conditionsOf(nr.id, m.inner, t.DependencyOn)
		if err != nil {
			return nil, false, err
		}
		after, afterOn, fromEarlier, err := d.after(t.After, t.AfterOn)
		if err != nil {
			return nil, false, err
		}
		earlier = earlier || fromEarlier
		sp.Dependencies = append(sp.Dependencies, after...)
		for id, c := range afterOn {
			if on == nil {
				on = map[string]gpusched.DependencyCondition{}
			}
			on[id] = c
		}
		sp.DependencyOn = on
		m.deps, m.on = sp.Dependencies, on
		specs[i] = sp
	}
	return specs, earlier, nil
}

// conditionsOf reads the conditions of a task's dependencies, by their
// ids in run runID, as the scheduler's task inner's.
func conditionsOf(runID int64, inner string, on map[string]string) (map[string]gpusched.DependencyCondition, error) {
	if len(on) == 0 {
		return nil, nil
	}
	out := make(map[string]gpusched.DependencyCondition, len(on))
	for dep, name := range on {
		var c gpusched.DependencyCondition
		if err := c.UnmarshalText([]byte(name)); err != nil {
			return nil, errorf(http.StatusBadRequest, "task %q: dependency_on %q: %v", inner, dep, err)
		}
		out[qualify(runID, dep)] = c
	}
	return out, nil
}

// after resolves the daemon ids a task must come after to the
// scheduler's tasks, each with the condition on gives it (by the id as
// given; none: success). A finished task the scheduler no longer holds
// (retired, or finished before this daemon started) is refused if it did
// not end as the condition asks (the task would never run); otherwise it
// is kept, as one the scheduler holds is, and earlier says that the
// batch must be submitted as a restore is (SubmitAgain), which judges
// such a dependency by the task's end and, should it be retried, has the
// task wait for its new end.
func (d *Daemon) after(ids []string, on map[string]string) (deps []string, conds map[string]gpusched.DependencyCondition, earlier bool, err error) {
	for id := range on {
		if !slices.Contains(ids, id) {
			return nil, nil, false, errorf(http.StatusBadRequest, "after_on %q: after does not list it", id)
		}
	}
	for _, id := range ids {
		var c gpusched.DependencyCondition
		if name, ok := on[id]; ok {
			if err := c.UnmarshalText([]byte(name)); err != nil {
				return nil, nil, false, errorf(http.StatusBadRequest, "after %s: %v", id, err)
			}
		}
		ts, err := d.resolve(id)
		if err != nil {
			var he *httpError
			if errors.As(err, &he) {
				he.msg = "after " + he.msg
			}
			return nil, nil, false, err
		}
		for _, t := range ts {
			if rec, ok := d.stored(t.id); ok && !held(d, t.id) {
				if task.Condition(c).Judge(task.State(rec.State), rec.NotNeeded) != task.Met {
					return nil, nil, false, errorf(http.StatusBadRequest, "after %s: task %s %s, so a task after it%s would never run",
						id, t.show, rec.State, task.Condition(c).Phrase())
				}
				earlier = true
			}
			deps = append(deps, t.id)
			if c != gpusched.AfterSuccess {
				if conds == nil {
					conds = map[string]gpusched.DependencyCondition{}
				}
				conds[t.id] = c
			}
		}
	}
	return deps, conds, earlier, nil
}
