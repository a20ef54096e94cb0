package workflow

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// A task's dependencies are a list whose items are task ids, or mappings
// that give an id and when the dependency is satisfied:
//
//	dependencies: [prepare, {id: "train-*", on: any}]
//
// on: is success (the default: the dependency must complete), failure (it
// must fail, be cancelled or be blocked: a clean-up) or any (it must end,
// whichever way: an aggregate over a partial sweep). The id may be a glob
// and hold ${name}, as a plain item may; a glob gives its condition to
// each task it matches, except a task the list names itself, whose own
// item says.

// dependencyKeys are the keys of a dependency given as a mapping.
var dependencyKeys = []string{"id", "on"}

// dependencies reads a task's dependencies: their ids in order, and the
// conditions of those that give one other than success, by the id as
// written (before templates and globs are expanded). Each problem is
// reported at its line; an item with one is read as "", so that the
// others keep their places (a glob's message names its place), and the
// key is then known bad: nothing else is said of "".
func (p *parser) dependencies(n *yaml.Node, where string) ([]string, map[string]gpusched.DependencyCondition, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, nil, p.errorf(n, "%s must be a list, e.g. [a, b] or [prepare, {id: \"train-*\", on: any}], not %s", where, kindName(n))
	}
	ids := make([]string, 0, len(n.Content))
	var on map[string]gpusched.DependencyCondition
	for j, c := range n.Content {
		switch c.Kind {
		case yaml.ScalarNode:
			ids = append(ids, c.Value)
		case yaml.MappingNode:
			id, cond, ok := p.dependency(c, fmt.Sprintf("%s[%d]", where, j))
			if !ok {
				ids = append(ids, "")
				continue
			}
			ids = append(ids, id)
			if cond != gpusched.AfterSuccess {
				if on == nil {
					on = map[string]gpusched.DependencyCondition{}
				}
				on[id] = cond
			}
		default:
			p.add(p.errorf(c, "%s: each item must be a task id or a mapping such as {id: prepare, on: failure}, not %s", where, kindName(c)))
			ids = append(ids, "")
		}
	}
	return ids, on, nil
}

// dependency reads one dependency given as a mapping; ok is false when it
// had a problem, told.
func (p *parser) dependency(n *yaml.Node, where string) (id string, on gpusched.DependencyCondition, ok bool) {
	before := len(p.errs)
	hasID := false
	keys := p.fields(n, where, dependencyKeys, func(key string, k, v *yaml.Node) error {
		s, err := p.scalar(v, where+"."+key)
		if err != nil {
			return err
		}
		switch key {
		case "id":
			hasID = true
			if s == "" {
				return p.errorf(v, "%s.id is empty: name the task it depends on", where)
			}
			id = s
		case "on":
			c, err := task.ParseCondition(s)
			if err != nil {
				return p.errorf(v, "%s.on: %s is not a condition: use success (the default), failure or any", where, q(s))
			}
			on = gpusched.DependencyCondition(c)
		}
		return nil
	})
	if !hasID && !has(keys.meant, dependencyKeys, "id") {
		p.add(p.errorf(n, "%s has no id: give the task it depends on, e.g. {id: prepare, on: failure}", where))
	}
	return id, on, len(p.errs) == before && id != ""
}

// dependencyID returns the id of item n of a dependencies list as
// written: the item itself, or its id: key; nil when it has none.
func dependencyID(n *yaml.Node) *yaml.Node {
	switch n.Kind {
	case yaml.ScalarNode:
		return n
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "id" {
				return n.Content[i+1]
			}
		}
	}
	return nil
}

// mapKeys returns a copy of on with each key replaced by f of it: the
// conditions of dependencies whose ids are templates.
func mapKeys(on map[string]gpusched.DependencyCondition, f func(string) string) map[string]gpusched.DependencyCondition {
	if on == nil {
		return nil
	}
	out := make(map[string]gpusched.DependencyCondition, len(on))
	for k, v := range on {
		out[f(k)] = v
	}
	return out
}

// internalConditions is the conditions of a task as the internal checks
// take them.
func internalConditions(on map[string]gpusched.DependencyCondition) map[string]task.Condition {
	if on == nil {
		return nil
	}
	out := make(map[string]task.Condition, len(on))
	for k, v := range on {
		out[k] = task.Condition(v)
	}
	return out
}
