package workflow

import (
	"fmt"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/suggest"
	"github.com/gpusched/gpusched/internal/task"
)

// A task's resources: the device and GPU keys, cpus, memory_mib_host and
// memory_mib_host_max,
// and any other key names a custom resource that scheduling.resources
// declares (resources: {licenses: 1}).

// builtinResourceKeys are the keys of a task's resources that are not
// custom resources.
var builtinResourceKeys = []string{"device", "memory_mib", "memory_mib_max", "exclusive", "gpus", "cpus", "memory_mib_host", "memory_mib_host_max"}

// resourceKeys are the keys a task's resources mapping n may have: the
// built-in ones, and each other key it gives, taken for a custom resource.
func resourceKeys(n *yaml.Node) []string {
	keys := builtinResourceKeys
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !slices.Contains(keys, k) {
			if len(keys) == len(builtinResourceKeys) {
				keys = slices.Clone(keys)
			}
			keys = append(keys, k)
		}
	}
	if len(keys) > 64 { // fields counts keys in 64 bits; no file needs more
		keys = keys[:64]
	}
	return keys
}

// declaredResources reads scheduling.resources: names of custom
// resources, each with its units (at least 1).
func (p *parser) declaredResources(n *yaml.Node, where string) map[string]int {
	if n.Kind != yaml.MappingNode {
		p.add(p.errorf(n, "%s must be a mapping of resource names to units, e.g. {licenses: 2}, not %s", where, kindName(n)))
		return nil
	}
	out := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := out[k.Value]; dup {
			p.add(p.errorf(k, "%s: %q appears twice", where, k.Value))
			continue
		}
		if why, ok := task.ValidResourceName(k.Value); !ok {
			p.add(p.errorf(k, "%s: %s", where, why))
			continue
		}
		units, err := p.integer(v, where+"."+k.Value)
		switch {
		case err != nil:
			p.add(err)
			continue
		case units < 1:
			p.add(p.errorf(v, "%s.%s must be at least 1 (got %d)", where, k.Value, units))
			continue
		}
		out[k.Value] = units
	}
	return out
}

// checkResources reports each custom resource a task takes that
// scheduling.resources does not declare, or more units of it than it
// has, at the line that names it (once for a matrix's variants or the
// defaults').
func (p *parser) checkResources() {
	w := p.w
	if p.opts.DeclaredElsewhere {
		return
	}
	declared := w.Scheduling.Resources
	told := map[string]bool{} // "line name": said once
	bit := uint64(1) << slices.Index(taskKeys, "resources")
	for i := range w.Tasks {
		t := &w.Tasks[i]
		for _, name := range slices.Sorted(maps.Keys(t.Resources.Counters)) {
			units := t.Resources.Counters[name]
			have, ok := declared[name]
			var field, why string
			switch {
			case !ok && p.schedBad:
				continue // scheduling had a problem, said already: it may be that one
			case !ok:
				field, why = "resources", unknownResourceKey(name, declared)
			case units > have:
				field, why = "resources."+name, fmt.Sprintf("asks for %d of %q, which has %d in all (scheduling.resources)", units, name, have)
			default:
				continue
			}
			line := w.locs[i].lineOf("resources." + name)
			if key := fmt.Sprint(line, " ", name); told[key] {
				continue
			} else {
				told[key] = true
			}
			te := &gpusched.TaskError{TaskID: t.ID, Field: field, Reason: why, Kind: gpusched.ErrInvalidTask}
			e := &Error{Path: p.path, Line: line, Msg: te.Error(), Err: te}
			if field == "resources" {
				e.Err = nil // an unknown key, as any other key is
			}
			p.add(e)
			p.badKeys[i] |= bit // one mistake, one message
		}
	}
}

// unknownResourceKey says that name, a key of a task's resources, is
// neither a built-in key nor a declared custom resource, suggesting the
// closest of either.
func unknownResourceKey(name string, declared map[string]int) string {
	names := slices.Sorted(maps.Keys(declared))
	msg := fmt.Sprintf("unknown key %s", q(name))
	if near := suggest.Closest(name, slices.Values(append(slices.Clone(builtinResourceKeys), names...))); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	if len(names) == 0 {
		return msg + fmt.Sprintf("; a custom resource is declared under scheduling.resources, e.g. resources: {%s: 2}", name)
	}
	return msg + "; " + engine.UnknownResource(name, declared)
}
