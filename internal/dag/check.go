package dag

import (
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/internal/suggest"
	"github.com/gpusched/gpusched/internal/task"
)

// CheckBatch validates the dependency structure of batch, a set of specs to
// be added to a graph that already holds the tasks in known. It reports the
// first problem found, in this order: a duplicate id, an unknown dependency,
// a cycle. It does not validate the specs' own fields (see task.Spec.Validate).
func CheckBatch[V any](batch []*task.Spec, known map[string]V) error {
	index := make(map[string]int, len(batch))
	for i, s := range batch {
		if _, dup := known[s.ID]; dup {
			return &task.Error{TaskID: s.ID, Field: "id", Reason: "a task with this id was already submitted", Kind: task.ErrDuplicateTask}
		}
		if j, dup := index[s.ID]; dup {
			return &task.Error{TaskID: s.ID, Field: "id", Reason: fmt.Sprintf("defined twice (tasks #%d and #%d of the batch)", j+1, i+1), Kind: task.ErrDuplicateTask}
		}
		index[s.ID] = i
	}
	for _, s := range batch {
		for _, d := range s.Dependencies {
			if _, ok := index[d]; ok {
				continue
			}
			if _, ok := known[d]; ok {
				continue
			}
			reason := fmt.Sprintf("depends on %q, which is not defined", d)
			if near := nearest(d, batch, known); near != "" {
				reason += fmt.Sprintf(" (did you mean %q?)", near)
			}
			return &task.Error{TaskID: s.ID, Field: "dependencies", Reason: reason, Kind: task.ErrUnknownDependency}
		}
	}
	if cycle := findCycle(batch, index); cycle != nil {
		return &task.CycleError{Path: cycle}
	}
	return nil
}

// findCycle returns a cycle among the batch's in-batch edges as a path that
// starts and ends at the same id, or nil. Iterative depth-first search, so a
// chain of 100,000 tasks does not grow the goroutine stack.
func findCycle(batch []*task.Spec, index map[string]int) []string {
	const (
		white = iota // not visited
		grey         // on the current path
		black        // finished, no cycle through it
	)
	color := make([]uint8, len(batch))
	type frame struct{ node, next int } // next: index into the node's dependencies
	var stack []frame
	for root := range batch {
		if color[root] != white {
			continue
		}
		stack = append(stack[:0], frame{node: root})
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			deps := batch[top.node].Dependencies
			if top.next == len(deps) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			d, inBatch := index[deps[top.next]]
			top.next++
			if !inBatch {
				continue
			}
			switch color[d] {
			case white:
				color[d] = grey
				stack = append(stack, frame{node: d})
			case grey:
				// The path from d to the top of the stack, then back to d.
				start := slices.IndexFunc(stack, func(f frame) bool { return f.node == d })
				path := make([]string, 0, len(stack)-start+1)
				for _, f := range stack[start:] {
					path = append(path, batch[f.node].ID)
				}
				return append(path, batch[d].ID)
			}
		}
	}
	return nil
}

// nearest returns the known or batch id closest to want, if one is close
// enough to be a plausible typo. Only runs on the error path.
func nearest[V any](want string, batch []*task.Spec, known map[string]V) string {
	return suggest.Closest(want, func(yield func(string) bool) {
		for _, s := range batch {
			if !yield(s.ID) {
				return
			}
		}
		for id := range known {
			if !yield(id) {
				return
			}
		}
	})
}
