package workflow

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
)

// A dependency that holds *, ? or [ is a glob over the ids of the file's
// tasks (path.Match syntax; ids never hold these characters). It stands
// for every task it matches, in file order, but the task itself.

const globChars = "*?["

func isGlob(dep string) bool { return strings.ContainsAny(dep, globChars) }

// noteGlobs notes the lines of the globs among the dependencies n, for
// their messages, and that the file has some.
func (p *parser) noteGlobs(n *yaml.Node, loc *taskLoc) {
	for j, c := range n.Content {
		if id := dependencyID(c); id != nil && isGlob(id.Value) {
			p.globs = true
			loc.fields = append(loc.fields, fieldLine{fmt.Sprintf("dependencies[%d]", j), c.Line})
		}
	}
}

// expandGlobs replaces each glob among the tasks' dependencies by the ids
// it matches, each with the glob's condition. An id a task already depends
// on (by name or by an earlier glob) is not added again; a task named
// keeps the condition its own item gives, even after a glob matched it. A
// glob that matches no task but the one that lists it is a problem, unless
// a task could not be read (it may be the one the glob was meant to
// match).
func (p *parser) expandGlobs() {
	w := p.w
	var byID []int                // the tasks' indexes sorted by id, made on first use
	matches := map[string][]int{} // glob -> the tasks it matches, in file order
	bad := map[string]string{}    // glob -> why it is not one
	for i := range w.Tasks {
		t := &w.Tasks[i]
		if !slices.ContainsFunc(t.Dependencies, isGlob) {
			continue
		}
		out := make([]string, 0, len(t.Dependencies))
		var on map[string]gpusched.DependencyCondition // out's conditions
		setOn := func(id string, c gpusched.DependencyCondition) {
			switch {
			case c != gpusched.AfterSuccess && on == nil:
				on = map[string]gpusched.DependencyCondition{id: c}
			case c != gpusched.AfterSuccess:
				on[id] = c
			default:
				delete(on, id)
			}
		}
		named := map[string]bool{}   // dependencies given by id
		globbed := map[string]bool{} // dependencies a glob added
		for j, d := range t.Dependencies {
			if !isGlob(d) {
				if !globbed[d] {
					out = append(out, d) // twice by name is Validate's to report
				}
				named[d] = true
				setOn(d, t.DependencyOn[d])
				continue
			}
			m, seen := matches[d]
			if !seen {
				if _, err := path.Match(d, ""); err != nil {
					bad[d] = fmt.Sprintf("%s is not a valid glob: use * (any characters), ? (one) and [a-z] (one of a set)", q(d))
				} else {
					if byID == nil {
						byID = sortedByID(w.Tasks)
					}
					m = match(d, w.Tasks, byID)
				}
				matches[d] = m
			}
			field := fmt.Sprintf("dependencies[%d]", j)
			if why, ok := bad[d]; ok {
				p.add(w.locateAt(i, &gpusched.TaskError{TaskID: t.ID, Field: field, Reason: why, Kind: gpusched.ErrInvalidTask}))
				continue
			}
			found := false
			for _, k := range m {
				id := w.Tasks[k].ID
				if k == i {
					continue
				}
				found = true
				if !named[id] && !globbed[id] {
					out = append(out, id)
					globbed[id] = true
					setOn(id, t.DependencyOn[d])
				}
			}
			if !found && !p.unexpanded {
				why := q(d) + " matches no task"
				if len(m) > 0 {
					why = q(d) + " matches no task but this one"
				}
				p.add(w.locateAt(i, &gpusched.TaskError{TaskID: t.ID, Field: field, Reason: why, Kind: gpusched.ErrUnknownDependency}))
			}
		}
		t.Dependencies, t.DependencyOn = out, on
	}
}

// sortedByID returns the indexes of tasks sorted by id.
func sortedByID(tasks []gpusched.TaskSpec) []int {
	out := make([]int, len(tasks))
	for i := range out {
		out[i] = i
	}
	sort.Slice(out, func(a, b int) bool { return tasks[out[a]].ID < tasks[out[b]].ID })
	return out
}

// match returns the indexes of the tasks whose id glob matches, in file
// order. Only the ids that start with the glob's literal prefix are tried
// (byID is the tasks' indexes sorted by id), so that many globs over a
// large file stay cheap.
func match(glob string, tasks []gpusched.TaskSpec, byID []int) []int {
	prefix := glob[:strings.IndexAny(glob, globChars+`\`)] // a glob holds one of them
	from := sort.Search(len(byID), func(k int) bool { return tasks[byID[k]].ID >= prefix })
	var out []int
	for _, k := range byID[from:] {
		id := tasks[k].ID
		if !strings.HasPrefix(id, prefix) {
			break
		}
		if ok, _ := path.Match(glob, id); ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
