package workflow

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/suggest"
)

// A sweep is a task with a matrix: a mapping of variable names to lists of
// values. It stands for one task per combination of the values (the cross
// product, the first variable varying slowest), in which ${name} in the
// templated fields is replaced by the variable's value. $${ is a literal
// ${ in every task, with or without a matrix. A task without a matrix has
// no variables: its ${...} is left as written, so that a shell's ${HOME}
// in `sh -c` keeps working in the workflows written before sweeps.

// maxShownName is the longest matrix variable name: one that messages can
// show whole.
const maxShownName = 64

// MaxVariants is the most tasks the matrices of one file may expand to,
// all together: a few lines of YAML (aliases help) could otherwise ask for
// more tasks than memory holds.
const MaxVariants = 1_000_000

// maxVariants is MaxVariants, which tests make smaller.
var maxVariants = MaxVariants

// templated lists the fields where ${name} is substituted, by their key in
// the file, with the function that maps every string of the field. A
// field is made a template by a line here.
var templated = []templatedField{
	{"id", func(t *gpusched.TaskSpec, f func(string) string) { t.ID = f(t.ID) }},
	{"args", func(t *gpusched.TaskSpec, f func(string) string) {
		if args, ok := t.Payload.([]string); ok {
			t.Payload = mapStrings(args, f)
		}
	}},
	{"dependencies", func(t *gpusched.TaskSpec, f func(string) string) {
		t.Dependencies, t.DependencyOn = mapStrings(t.Dependencies, f), mapKeys(t.DependencyOn, f)
	}},
	{"env", func(t *gpusched.TaskSpec, f func(string) string) { t.Env = mapValues(t.Env, f) }},
	{"dir", func(t *gpusched.TaskSpec, f func(string) string) { t.Dir = f(t.Dir) }},
	{"artifacts", func(t *gpusched.TaskSpec, f func(string) string) { t.Artifacts = mapStrings(t.Artifacts, f) }},
	{"inputs", func(t *gpusched.TaskSpec, f func(string) string) { t.Inputs = mapStrings(t.Inputs, f) }},
	{"on_complete", func(t *gpusched.TaskSpec, f func(string) string) { t.OnComplete = mapStrings(t.OnComplete, f) }},
	{"on_failure", func(t *gpusched.TaskSpec, f func(string) string) { t.OnFailure = mapStrings(t.OnFailure, f) }},
}

// templatedKey reports whether ${name} is substituted in the task key.
func templatedKey(key string) bool {
	return slices.ContainsFunc(templated, func(f templatedField) bool { return f.key == key })
}

// templatedField is a task field where ${name} is substituted: its key,
// and how to map each of its strings.
type templatedField struct {
	key string
	fn  func(t *gpusched.TaskSpec, f func(string) string)
}

// eachTemplated replaces every string of t's templated fields by f of it,
// in new slices and maps: the task shares none with the one it came from.
func eachTemplated(t *gpusched.TaskSpec, f func(string) string) {
	for _, field := range templated {
		field.fn(t, f)
	}
}

func mapStrings(in []string, f func(string) string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func mapValues(in map[string]string, f func(string) string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = f(v)
	}
	return out
}

// matrix is a task's matrix: its variables in the order written, and each
// one's values, as written.
type matrix struct {
	names    []string
	values   [][]string
	variants int // the product of the lists' lengths
}

// matrix reads a task's matrix, or reports what is wrong with it and
// returns nil.
func (p *parser) matrix(n *yaml.Node, where string) *matrix {
	const shape = "a mapping of names to lists of values, e.g. {lr: [1e-3, 1e-4], seed: [1, 2]}"
	if n.Kind != yaml.MappingNode {
		p.add(p.errorf(n, "%s must be %s, not %s", where, shape, kindName(n)))
		return nil
	}
	if len(n.Content) == 0 {
		p.add(p.errorf(n, "%s is empty: it must be %s", where, shape))
		return nil
	}
	m := &matrix{variants: 1}
	ok := true
	seen := make([]string, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		switch {
		case !validVarName(name) || len(name) > maxShownName:
			p.add(p.errorf(k, "%s: %s is not a variable name: use letters, digits and _, not starting with a digit, at most %d", where, q(name), maxShownName))
			ok = false
			continue
		case slices.Contains(seen, name):
			p.add(p.errorf(k, "%s: variable %s appears twice", where, name))
			ok = false
			continue
		}
		seen = append(seen, name)
		at := where + "." + name
		if v.Kind != yaml.SequenceNode {
			p.add(p.errorf(v, "%s must be a list of values, e.g. [1, 2], not %s", at, kindName(v)))
			ok = false
			continue
		}
		if len(v.Content) == 0 {
			p.add(p.errorf(v, "%s is empty: give at least one value", at))
			ok = false
			continue
		}
		values := make([]string, 0, len(v.Content))
		for _, c := range v.Content {
			switch {
			case c.Kind != yaml.ScalarNode || c.Tag == "!!null":
				p.add(p.errorf(c, "%s: each value must be a string or a number, not %s", at, kindName(c)))
				ok = false
			case slices.Contains(values, c.Value):
				p.add(p.errorf(c, "%s: the value %s appears twice", at, q(c.Value)))
				ok = false
			default:
				values = append(values, c.Value)
			}
		}
		m.names = append(m.names, name)
		m.values = append(m.values, values)
		if m.variants <= maxVariants {
			m.variants *= len(values)
		}
	}
	switch {
	case !ok:
	case m.variants > maxVariants:
		p.add(p.errorf(n, "%s expands to more than %d tasks: split the sweep", where, maxVariants))
		ok = false
	case p.variants+m.variants > maxVariants:
		p.add(p.errorf(n, "%s expands to %d tasks, which brings the file's matrices past %d in all: split the sweep", where, m.variants, maxVariants))
		ok = false
	default:
		p.variants += m.variants
	}
	if !ok {
		return nil
	}
	return m
}

func validVarName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// matrixID checks that the id of a matrix task names every variable, so
// that each variant has an id of its own.
func (p *parser) matrixID(n *yaml.Node, where string, m *matrix) bool {
	var missing []string
	for _, name := range m.names {
		if !strings.Contains(n.Value, "${"+name+"}") {
			missing = append(missing, "${"+name+"}")
		}
	}
	if len(missing) == 0 {
		return true
	}
	p.add(p.errorf(n, "%s: id: a matrix task's id must hold each of its variables, so that every task it expands to has an id of its own: add %s",
		where, strings.Join(missing, ", ")))
	return false
}

// expand appends the tasks that t, read from a task with matrix m, stands
// for. Each gets loc, with its values for messages, and bad.
func (p *parser) expand(t *gpusched.TaskSpec, loc *taskLoc, bad uint64, m *matrix) {
	at := make([]int, len(m.names)) // the variant's index in each list
	value := func(name string) string {
		i := slices.Index(m.names, name)
		if i < 0 { // told when read: left as written
			return "${" + name + "}"
		}
		return m.values[i][at[i]]
	}
	subst := func(s string) string { return substitute(s, value) }
	for range m.variants {
		v := *t
		eachTemplated(&v, subst)
		vl := *loc
		var b strings.Builder
		for i, name := range m.names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(name + "=" + m.values[i][at[i]])
		}
		vl.vars = b.String()
		p.appendTask(v, vl, bad)
		for i := len(at) - 1; i >= 0; i-- { // the last variable varies fastest
			if at[i]++; at[i] < len(m.values[i]) {
				break
			}
			at[i] = 0
		}
	}
}

// unescape turns every $${ of s into ${; it is the substitution of a task
// without a matrix.
func unescape(s string) string { return substitute(s, nil) }

// substitute replaces each ${name} of s by value(name) and each $${ by ${.
// s has been checked (checkTemplate): every name has a value.
func substitute(s string, value func(string) string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		if i > 0 && s[i-1] == '$' { // $${: a literal ${
			b.WriteString(s[:i])
			b.WriteByte('{')
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 { // not a template (checked before)
			b.WriteString(s)
			return b.String()
		}
		if value == nil { // a task without a matrix: ${...} as written
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(value(s[i+2 : i+end]))
		s = s[i+end+1:]
	}
}

// templateProblem says what is wrong with template s when the task's
// matrix has the variables vars (nil: the task has none), or returns "".
// It notes in escapes whether s holds a $${.
func templateProblem(s string, st *fieldState, escapes *bool) string {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return ""
		}
		if i > 0 && s[i-1] == '$' {
			*escapes = true
			s = s[i+2:]
			continue
		}
		if st.vars == nil && !st.defaults {
			// A task without a matrix has no variables: its ${...} is
			// left as written (a shell's ${HOME} in sh -c).
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return fmt.Sprintf("%s is not closed by }; write $${ for a literal ${", q(s[i:]))
		}
		ref, name := s[i:i+end+1], s[i+2:i+end]
		if !validVarName(name) || len(name) > maxShownName {
			// Shown quoted: it may be long or hold anything.
			return fmt.Sprintf("%s is not a matrix variable (names use letters, digits and _); write $${ for a literal ${", q(ref))
		}
		switch {
		case st.defaults:
			return fmt.Sprintf("%s: defaults are the same for every task; write matrix variables in the task's own fields", ref)
		case !slices.Contains(st.vars, name):
			msg := fmt.Sprintf("%s: the matrix has no variable %s (it has %s)", ref, name, elide.Line(strings.Join(st.vars, ", "), 120))
			if near := suggest.Closest(name, slices.Values(st.vars)); near != "" {
				msg += fmt.Sprintf("; did you mean ${%s}?", near)
			} else {
				msg += fmt.Sprintf("; write $%s for a literal %s (a shell's variable)", ref, ref)
			}
			return msg
		}
		s = s[i+end+1:]
	}
}

// checkTemplates checks the strings of n, the value of the task's key, as
// templates, and reports each problem at its line. It returns whether
// there was none.
func (p *parser) checkTemplates(n *yaml.Node, where, key string, st *fieldState) bool {
	if st.noTemplates {
		return true
	}
	ok := true
	// field names the value v, item j of n: made only for a message.
	check := func(v *yaml.Node, field func() string) {
		if v.Kind != yaml.ScalarNode || !strings.Contains(v.Value, "${") {
			return
		}
		if why := templateProblem(v.Value, st, &st.escapes); why != "" {
			p.add(p.errorf(v, "%s: %s: %s", where, field(), why))
			ok = false
		}
	}
	switch n.Kind {
	case yaml.SequenceNode:
		for j, c := range n.Content {
			if c.Kind == yaml.MappingNode && key == "dependencies" { // {id: ..., on: ...}
				if id := dependencyID(c); id != nil {
					check(id, func() string { return fmt.Sprintf("%s[%d].id", key, j) })
				}
				continue
			}
			check(c, func() string { return fmt.Sprintf("%s[%d]", key, j) })
		}
	case yaml.MappingNode:
		for j := 0; j+1 < len(n.Content); j += 2 {
			check(n.Content[j+1], func() string { return key + "." + n.Content[j].Value })
		}
	default:
		check(n, func() string { return key })
	}
	return ok
}
