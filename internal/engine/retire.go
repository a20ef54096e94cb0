package engine

import (
	"fmt"
	"maps"

	"github.com/gpusched/gpusched/internal/dag"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Retirement.
//
// With Config.Retire, a finished task (complete, failed, blocked or
// cancelled) leaves the loop's memory once its end is committed and its
// completion event, if it has one, is delivered. (A Wait does not hold a
// task: it takes the task's record as the task finishes.) Its record stays
// in the store, where the engine reads it when it needs it
// again, so what the engine keeps does not grow with the tasks it has
// finished:
//
//   - a new task may depend on a retired one, whose end is judged by the
//     dependency's condition as if it were in memory (with the default
//     one, a task that completed satisfies it; one that failed, was
//     cancelled or was blocked blocks the new task);
//   - a retired task's id cannot be submitted again (a duplicate), except
//     in a Submission with Again: then it is taken up again with its
//     history, as a task an earlier run left is (how it is retried);
//   - Cancel of a retired task does nothing; Wait returns its record;
//   - Records and Run return only the tasks in memory.
//
// A task is retired whatever its dependents' states: nothing in memory
// needs a finished task's node. Its dependents took what they needed when
// it finished (a count of dependencies to wait for, or their blocking), and
// a later submission reads it from the store. A task submitted to an
// earlier engine (a row whose seq is below firstSeq) is not retired but
// from an earlier run, as without retirement.

// queueRetire marks a task as possibly retirable at the end of the turn.
func (e *Engine) queueRetire(n *node) {
	if e.cfg.Retire {
		e.svc.candidates = append(e.svc.candidates, n)
	}
}

// queueRetireAdmitted queues the tasks of a batch that were finished on
// admission without an event: complete from an earlier run.
func (e *Engine) queueRetireAdmitted(nodes []*node) {
	if !e.cfg.Retire {
		return
	}
	for _, n := range nodes {
		if n.rec.State == task.Complete {
			e.queueRetire(n)
		}
	}
}

// retire forgets the candidates that can go, once their end is committed
// (this runs after the commit).
func (e *Engine) retire() {
	c := e.svc.candidates
	if len(c) == 0 {
		return
	}
	e.svc.candidates = c[:0]
	defer clear(c)
	if e.broken != nil {
		return // the store may not hold their end
	}
	for _, n := range c {
		if e.tasks[n.spec.ID] != n || !n.rec.State.Terminal() || n.cancel != nil {
			continue
		}
		if _, pending := e.outboxSpecs[n.spec.ID]; pending {
			continue // retired once its completion event is delivered
		}
		delete(e.tasks, n.spec.ID)
		e.svc.retired++
	}
}

// eventAcked is told that a task's completion event was delivered: unless
// another event of the task waits, its definition is no longer needed for
// events, and the task may be retired.
func (e *Engine) eventAcked(taskID string) {
	if e.svc.eventsPending[taskID]--; e.svc.eventsPending[taskID] > 0 {
		return
	}
	delete(e.svc.eventsPending, taskID)
	delete(e.outboxSpecs, taskID)
	if n := e.tasks[taskID]; n != nil {
		e.queueRetire(n)
	}
}

// lookupRetired reads a task retired from memory from the store. ok is
// false when id names no task of this engine's life that was retired.
func (e *Engine) lookupRetired(id string) (r store.Row, ok bool, err error) {
	if e.svc.retired == 0 {
		return store.Row{}, false, nil
	}
	r, ok, err = e.cfg.Store.LookupTask(id)
	if err != nil {
		return store.Row{}, false, fmt.Errorf("read retired task %q: %w", id, err)
	}
	if !ok || r.Seq < e.svc.firstSeq || !r.State.Terminal() {
		return store.Row{}, false, nil
	}
	return r, true, nil
}

// retiredNode returns a stand-in node for a retired task, with what a new
// dependent needs of it: its id, state and blocker. nil when id names no
// retired task.
func (e *Engine) retiredNode(id string) (*node, error) {
	r, ok, err := e.lookupRetired(id)
	if !ok {
		return nil, err
	}
	return standIn(&r, false), nil
}

// blocker returns the task that blocked another, in memory, retired or
// left finished by an earlier engine; nil if it cannot be found.
func (e *Engine) blocker(id string) *node {
	if n := e.node(id); n != nil {
		return n
	}
	n, _ := e.retiredNode(id) // a stand-in will do; without it, the blocked task names itself
	if n == nil {
		n = e.earlierNode(id)
	}
	return n
}

// retiredOf returns the rows of the finished tasks a batch with Again
// names, by id: retired ones, and those an earlier engine left finished
// (earlier.go).
func (e *Engine) retiredOf(specs []*task.Spec) (map[string]*store.Row, error) {
	var out map[string]*store.Row
	for _, s := range specs {
		if e.node(s.ID) != nil {
			continue // a duplicate, as without Again
		}
		r, ok, err := e.lookupRetired(s.ID)
		if err != nil {
			return nil, fmt.Errorf("submit batch: %w", err)
		}
		p := &r
		if !ok {
			p = e.finishedEarlier(s.ID)
		}
		if p != nil {
			if out == nil {
				out = map[string]*store.Row{}
			}
			out[s.ID] = p
		}
	}
	return out, nil
}

// checkBatch checks a batch's graph against the tasks in memory and the
// retired ones, returning stand-ins for the retired tasks it depends on.
// The retired tasks in again are the batch's own, taken up again. With
// earlier (a batch with Again), a dependency may also name a task an
// earlier engine left finished (earlier.go).
func (e *Engine) checkBatch(specs []*task.Spec, again map[string]*store.Row, earlier bool) (retired map[string]*node, err error) {
	if e.svc.retired == 0 && !earlier {
		return nil, dag.CheckBatch(specs, e.tasks)
	}
	var lookupErr error
	has := func(id string) bool {
		if _, ok := e.tasks[id]; ok {
			return true
		}
		if _, ok := again[id]; ok {
			return false // the batch's: a dependency on it is inside it
		}
		if _, ok := retired[id]; ok {
			return true
		}
		n, err := e.retiredNode(id)
		if err != nil && lookupErr == nil {
			lookupErr = err
		}
		if n == nil && earlier && err == nil {
			n = e.earlierNode(id)
		}
		if n == nil {
			return false
		}
		if retired == nil {
			retired = map[string]*node{}
		}
		retired[id] = n
		return true
	}
	err = dag.CheckBatchFunc(specs, has, maps.Keys(e.tasks))
	if lookupErr != nil {
		return nil, fmt.Errorf("submit batch: %w", lookupErr)
	}
	return retired, err
}

// answerCancels answers, after the commit, the Cancel calls that wait for
// the end of a task's attempt. exitEvent calls it once the end is recorded.
func (e *Engine) answerCancels(n *node) {
	if len(n.cancelReplies) == 0 {
		return
	}
	replies := n.cancelReplies
	n.cancelReplies = nil
	e.effects = append(e.effects, func(err error) {
		for _, r := range replies {
			r <- err
		}
	})
}
