package daemon

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/client"
)

// Ids.
//
// A run is numbered 1, 2, 3... in submission order. Its tasks are the
// scheduler's tasks RUN/TASK. A command run has one task, CommandTask,
// shown as the run's id ("12"); a workflow run's tasks are shown as
// RUN/TASK ("13/train"). Every id shown is accepted, and so is "12/cmd";
// a run's id stands for all its tasks. Task ids never hold a "/", so
// the part before it is always the run.

// CommandTask is the id, within its run, of a command run's task.
const CommandTask = "cmd"

// target is a task a request names.
type target struct {
	id   string // the scheduler's id, RUN/TASK
	show string // as the daemon prints it
	run  *run
	meta *taskMeta
}

// showID is how the daemon prints task inner of run r.
func showID(r *run, inner string) string {
	if r.kind == client.KindCommand && inner == CommandTask {
		return strconv.FormatInt(r.id, 10)
	}
	return qualify(r.id, inner)
}

// resolve returns the tasks id names: a run's (all of them) or one task.
func (d *Daemon) resolve(id string) ([]target, error) {
	runPart, inner, hasTask := strings.Cut(id, "/")
	n, err := strconv.ParseInt(runPart, 10, 64)
	if err != nil || n <= 0 || (hasTask && (inner == "" || strings.Contains(inner, "/"))) {
		return nil, errorf(http.StatusBadRequest, "%q is not a task or run id: give a run (12) or a task of a run (13/train)", id)
	}
	r := d.runs.get(n)
	if r == nil {
		return nil, errorf(http.StatusNotFound, "no run %d", n)
	}
	if !hasTask {
		out := make([]target, len(r.tasks))
		for i := range r.tasks {
			m := &r.tasks[i]
			out[i] = target{id: qualify(r.id, m.inner), show: showID(r, m.inner), run: r, meta: m}
		}
		return out, nil
	}
	for i := range r.tasks {
		if m := &r.tasks[i]; m.inner == inner {
			return []target{{id: qualify(r.id, inner), show: showID(r, inner), run: r, meta: m}}, nil
		}
	}
	return nil, errorf(http.StatusNotFound, "run %d has no task %q", n, inner)
}

// resolveAll resolves every id, each task once, in order.
func (d *Daemon) resolveAll(ids []string) ([]target, error) {
	if len(ids) == 0 {
		return nil, errorf(http.StatusBadRequest, "no task or run id given")
	}
	var out []target
	seen := map[string]bool{}
	for _, id := range ids {
		ts, err := d.resolve(id)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if !seen[t.id] {
				seen[t.id] = true
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// httpError is an answer other than 2xx, with its one-line message.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}
