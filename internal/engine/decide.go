package engine

import "github.com/gpusched/gpusched/internal/task"

// Candidate is a ready task as decide sees it.
type Candidate struct {
	ID        string
	Priority  int
	Seq       int64 // submission order
	Resources task.ResourceRequest
}

// Queue yields ready tasks best first: higher priority, then earlier
// submission. Ascend stops when fn returns false.
type Queue interface {
	Ascend(fn func(Candidate) bool)
}

// View is everything decide may look at: a snapshot, not live state.
type View struct {
	// Free is the number of attempts that may start now (parallel slots
	// left).
	Free int
	// Ready is the queue of tasks whose dependencies are all complete.
	Ready Queue
}

// Action is a decision to start a ready task.
type Action struct {
	TaskID string
}

// decide returns the tasks to start now, best first. It is a pure function
// of the view: no clock, no I/O, no engine state. It walks the ready queue
// only as far as it starts tasks, so its cost does not grow with the number
// of ready tasks.
func decide(v View) []Action {
	if v.Free <= 0 || v.Ready == nil {
		return nil
	}
	var out []Action
	v.Ready.Ascend(func(c Candidate) bool {
		out = append(out, Action{TaskID: c.ID})
		return len(out) < v.Free
	})
	return out
}
