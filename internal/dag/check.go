package dag

import (
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/suggest"
	"github.com/gpusched/gpusched/internal/task"
)

// CheckBatch validates the dependency structure of batch, a set of specs to
// be added to a graph that already holds the tasks in known. It reports the
// first problem found, in this order: a duplicate id, an unknown dependency,
// a cycle. It does not validate the specs' own fields (see task.Spec.Validate).
func CheckBatch[V any](batch []*task.Spec, known map[string]V) error {
	return CheckBatchFunc(batch, func(id string) bool { _, ok := known[id]; return ok }, maps.Keys(known))
}

// CheckBatchFunc is CheckBatch against a graph known through has, which
// reports whether a task with the id was submitted before. ids yields the
// ids a "did you mean" hint may suggest for an unknown dependency (nil:
// only the batch's own); has may know more tasks than ids yields.
func CheckBatchFunc(batch []*task.Spec, has func(id string) bool, ids iter.Seq[string]) error {
	index := make(map[string]int, len(batch))
	for i, s := range batch {
		if has(s.ID) {
			return duplicateKnown(s.ID)
		}
		if j, dup := index[s.ID]; dup {
			return duplicate(s.ID, j, i)
		}
		index[s.ID] = i
	}
	for _, s := range batch {
		for _, d := range s.Dependencies {
			if _, ok := index[d]; ok {
				continue
			}
			if has(d) {
				continue
			}
			return unknown(s.ID, d, nearest(d, batch, ids))
		}
	}
	if cycle := findCycle(batch, index); cycle != nil {
		return &task.CycleError{Path: cycle}
	}
	return nil
}

// Problem is one problem Check found: Err, about the task at position Index
// of the batch (for a cycle, the task the cycle is told from).
type Problem struct {
	Index int
	Err   error
}

// Check is CheckBatch, but finds every problem rather than the first: each
// duplicate id, each unknown dependency, and a cycle in each group of tasks
// that depend on each other (strongly connected component), told from the
// group's first task in the batch. Problems come in that order, each kind
// in batch order. A "did you mean" hint costs a pass over every id, so only
// the first hints unknown dependencies get one.
func Check[V any](batch []*task.Spec, known map[string]V, hints int) []Problem {
	var out []Problem
	index := make(map[string]int, len(batch))
	for i, s := range batch {
		if _, dup := known[s.ID]; dup {
			out = append(out, Problem{i, duplicateKnown(s.ID)})
			continue
		}
		if j, dup := index[s.ID]; dup {
			out = append(out, Problem{i, duplicate(s.ID, j, i)})
			continue
		}
		index[s.ID] = i
	}
	for i, s := range batch {
		for _, d := range s.Dependencies {
			if _, ok := index[d]; ok {
				continue
			}
			if _, ok := known[d]; ok {
				continue
			}
			near := ""
			if hints > 0 {
				hints--
				near = nearest(d, batch, maps.Keys(known))
			}
			out = append(out, Problem{i, unknown(s.ID, d, near)})
		}
	}
	if findCycle(batch, index) == nil {
		return out
	}
	for _, comp := range components(batch, index) {
		out = append(out, Problem{comp[0], &task.CycleError{Path: cycleIn(batch, index, comp)}})
	}
	return out
}

func duplicateKnown(id string) error {
	return &task.Error{TaskID: id, Field: "id", Reason: "a task with this id was already submitted", Kind: task.ErrDuplicateTask}
}

func duplicate(id string, first, again int) error {
	return &task.Error{TaskID: id, Field: "id", Reason: fmt.Sprintf("defined twice (tasks #%d and #%d of the batch)", first+1, again+1), Kind: task.ErrDuplicateTask}
}

func unknown(id, dep, near string) error {
	reason := fmt.Sprintf("depends on %s, which is not defined", elide.Quote(dep))
	if near != "" {
		reason += fmt.Sprintf(" (did you mean %s?)", elide.Quote(near))
	}
	return &task.Error{TaskID: id, Field: "dependencies", Reason: reason, Kind: task.ErrUnknownDependency}
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

// components returns the batch's strongly connected components that hold
// a cycle (more than one task, or one that depends on itself), each sorted
// by batch position, the components ordered by their first task. Tarjan's
// algorithm, iterative for the same reason as findCycle.
func components(batch []*task.Spec, index map[string]int) [][]int {
	n := len(batch)
	order := make([]int32, n) // 0: not visited; else the visit number
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int
	type frame struct{ node, next int }
	var calls []frame
	var visits int32
	visit := func(v int) {
		visits++
		order[v], low[v] = visits, visits
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{node: v})
	}
	var comps [][]int
	for root := range batch {
		if order[root] != 0 {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			top := &calls[len(calls)-1]
			v := top.node
			if deps := batch[v].Dependencies; top.next < len(deps) {
				w, ok := index[deps[top.next]]
				top.next++
				switch {
				case !ok:
				case order[w] == 0:
					visit(w)
				case onStack[w]:
					low[v] = min(low[v], order[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].node
				low[p] = min(low[p], low[v])
			}
			if low[v] != order[v] {
				continue
			}
			i := len(stack) - 1
			for stack[i] != v {
				i--
			}
			comp := slices.Clone(stack[i:])
			for _, w := range comp {
				onStack[w] = false
			}
			stack = stack[:i]
			if len(comp) > 1 || dependsOn(batch[v], v, index) {
				slices.Sort(comp)
				comps = append(comps, comp)
			}
		}
	}
	slices.SortFunc(comps, func(a, b []int) int { return a[0] - b[0] })
	return comps
}

// dependsOn reports whether s, at position v, depends on the task at v.
func dependsOn(s *task.Spec, v int, index map[string]int) bool {
	for _, d := range s.Dependencies {
		if w, ok := index[d]; ok && w == v {
			return true
		}
	}
	return false
}

// cycleIn returns a shortest cycle through comp's first task, a path that
// starts and ends with its id, staying inside comp (sorted positions of a
// strongly connected component, so there is one).
func cycleIn(batch []*task.Spec, index map[string]int, comp []int) []string {
	start := comp[0]
	parent := make(map[int]int, len(comp)) // visited task -> the one it was reached from
	parent[start] = -1
	queue := []int{start}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, d := range batch[u].Dependencies {
			w, ok := index[d]
			if !ok {
				continue
			}
			if _, in := slices.BinarySearch(comp, w); !in {
				continue
			}
			if w == start {
				var rev []string
				for v := u; v != -1; v = parent[v] {
					rev = append(rev, batch[v].ID)
				}
				slices.Reverse(rev)
				return append(rev, batch[start].ID)
			}
			if _, seen := parent[w]; !seen {
				parent[w] = u
				queue = append(queue, w)
			}
		}
	}
	return []string{batch[start].ID, batch[start].ID} // not reached for a component
}

// nearest returns the batch id or known id closest to want, if one is
// close enough to be a plausible typo. Only runs on the error path.
func nearest(want string, batch []*task.Spec, known iter.Seq[string]) string {
	return suggest.Closest(want, func(yield func(string) bool) {
		for _, s := range batch {
			if !yield(s.ID) {
				return
			}
		}
		if known == nil {
			return
		}
		for id := range known {
			if !yield(id) {
				return
			}
		}
	})
}
