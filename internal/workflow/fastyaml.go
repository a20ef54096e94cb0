package workflow

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// The fast path: most workflow files keep to a few shapes of YAML (block
// mappings and lists, one-line [...] and {...}, plain and quoted values,
// whole-line comments). For such a file, fastYAML builds the node tree
// the YAML library would, with the same kinds, values and lines, about
// ten times faster, and without holding a node per value of every task:
// the items of the top-level tasks: list are read again one at a time,
// into nodes reused from one task to the next, as parser.tasks walks them.
//
// Anything outside those shapes (anchors, tags, block scalars, multi-line
// values, escapes, a comment after a value, tabs, non-ASCII bytes, a
// second document, ...), and anything the library would reject, makes
// fastYAML give up before a single node is handed out; the file is then
// read by the library, so errors and line numbers stay what they were.
// TestFastYAMLMatchesLibrary and FuzzFastYAML hold the two readers to the
// same trees.

// fastYAML reads one file. Its zero value is not usable: see newFastYAML.
type fastYAML struct {
	src  string // the file; every value without escapes is a slice of it
	pos  int    // the offset of the line after cur
	line int    // the number of the line after cur (from 1)
	cur  fastLine

	arena bool        // nodes and content come from the slabs below, reused by reset
	nodes []yaml.Node // slab of nodes for the current task
	ptrs  []*yaml.Node
	stack []*yaml.Node // the children of the collections being read

	// What the first pass found of the top-level tasks: list when it is a
	// block list: the placeholder node that stands for it in the tree
	// (Content nil), the state at its first item, its column, its items.
	tasks      *yaml.Node
	tasksAt    fastState
	tasksCol   int
	tasksCount int
}

// fastLine is a line holding something: its indentation, its text after
// it (trailing spaces cut) and its number. ok is false past the end.
type fastLine struct {
	indent int
	text   string
	num    int
	ok     bool
}

// fastState is where the reader is, to come back to it.
type fastState struct {
	pos, line int
	cur       fastLine
}

func newFastYAML(data []byte) *fastYAML {
	return &fastYAML{src: string(data), line: 1}
}

// fastParse returns the file's top-level node, or false when the file is
// not one the fast path reads. With lazy, the top-level tasks: list, when
// it is a block list, is a placeholder (see fastYAML.items).
func (f *fastYAML) parse(lazy bool) (*yaml.Node, bool) {
	if !fastBytes(f.src) {
		return nil, false
	}
	f.next()
	if !f.cur.ok || f.cur.indent != 0 {
		return nil, false
	}
	top, ok := f.mapping(0, lazy)
	if !ok || f.cur.ok {
		return nil, false
	}
	return top, true
}

// fastBytes reports whether s holds only what the fast path reads: ASCII
// without control characters other than newlines.
func fastBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x7f || c < 0x20 && c != '\n' {
			return false
		}
	}
	return true
}

// next moves cur to the next line holding something, skipping empty lines
// and whole-line comments.
func (f *fastYAML) next() {
	for f.pos < len(f.src) {
		end := strings.IndexByte(f.src[f.pos:], '\n')
		var raw string
		if end < 0 {
			raw, f.pos = f.src[f.pos:], len(f.src)
		} else {
			raw, f.pos = f.src[f.pos:f.pos+end], f.pos+end+1
		}
		num := f.line
		f.line++
		text := strings.TrimRight(raw, " ")
		indent := len(text) - len(strings.TrimLeft(text, " "))
		text = text[indent:]
		if text == "" || text[0] == '#' {
			continue
		}
		f.cur = fastLine{indent: indent, text: text, num: num, ok: true}
		return
	}
	f.cur = fastLine{}
}

func (f *fastYAML) state() fastState    { return fastState{f.pos, f.line, f.cur} }
func (f *fastYAML) restore(s fastState) { f.pos, f.line, f.cur = s.pos, s.line, s.cur }

// node returns a new node.
func (f *fastYAML) node(kind yaml.Kind, tag, value string, line int) *yaml.Node {
	if !f.arena {
		return &yaml.Node{Kind: kind, Tag: tag, Value: value, Line: line}
	}
	if len(f.nodes) == cap(f.nodes) {
		f.nodes = make([]yaml.Node, 0, max(64, 2*cap(f.nodes)))
	}
	f.nodes = append(f.nodes, yaml.Node{Kind: kind, Tag: tag, Value: value, Line: line})
	return &f.nodes[len(f.nodes)-1]
}

// content makes n's content the children pushed on the stack since from.
func (f *fastYAML) content(n *yaml.Node, from int) {
	kids := f.stack[from:]
	if !f.arena {
		n.Content = append([]*yaml.Node(nil), kids...)
	} else if len(kids) > 0 {
		if len(f.ptrs)+len(kids) > cap(f.ptrs) {
			f.ptrs = make([]*yaml.Node, 0, max(256, 2*cap(f.ptrs), len(kids)))
		}
		at := len(f.ptrs)
		f.ptrs = append(f.ptrs, kids...)
		n.Content = f.ptrs[at:len(f.ptrs):len(f.ptrs)]
	}
	clear(kids)
	f.stack = f.stack[:from]
}

// reset lets the next task's nodes reuse the slabs.
func (f *fastYAML) reset() {
	clear(f.nodes)
	f.nodes = f.nodes[:0]
	clear(f.ptrs)
	f.ptrs = f.ptrs[:0]
}

// isDash reports whether text starts a list item.
func isDash(text string) bool { return text[0] == '-' && (len(text) == 1 || text[1] == ' ') }

// block reads the collection that starts at cur, deeper than the
// enclosing one.
func (f *fastYAML) block() (*yaml.Node, bool) {
	if isDash(f.cur.text) {
		return f.sequence(f.cur.indent, false)
	}
	return f.mapping(f.cur.indent, false)
}

// mapping reads a block mapping whose keys are at column col, starting
// at cur. top marks the file's own mapping, whose tasks: list may be lazy.
func (f *fastYAML) mapping(col int, top bool) (*yaml.Node, bool) {
	n := f.node(yaml.MappingNode, "!!map", "", f.cur.num)
	from := len(f.stack)
	for f.cur.ok && f.cur.indent >= col {
		if f.cur.indent > col || isDash(f.cur.text) {
			return nil, false
		}
		key, rest, ok := splitKey(f.cur.text)
		if !ok {
			return nil, false
		}
		keyLine := f.cur.num
		f.stack = append(f.stack, f.node(yaml.ScalarNode, plainTag(key), key, keyLine))
		f.next()
		var v *yaml.Node
		switch {
		case rest != "":
			if v, ok = f.inline(rest, keyLine); !ok || f.cur.ok && f.cur.indent > col {
				return nil, false
			}
		case f.cur.ok && (f.cur.indent > col || f.cur.indent == col && isDash(f.cur.text)):
			if top && key == "tasks" && isDash(f.cur.text) {
				v, ok = f.lazyTasks()
			} else if isDash(f.cur.text) {
				v, ok = f.sequence(f.cur.indent, f.cur.indent == col)
			} else {
				v, ok = f.block()
			}
			if !ok {
				return nil, false
			}
		default:
			v = f.node(yaml.ScalarNode, "!!null", "", keyLine)
		}
		f.stack = append(f.stack, v)
	}
	f.content(n, from)
	return n, true
}

// sequence reads a block list whose dashes are at column col, starting at
// cur. An indentless list (at its key's column) ends at the next key.
func (f *fastYAML) sequence(col int, indentless bool) (*yaml.Node, bool) {
	n := f.node(yaml.SequenceNode, "!!seq", "", f.cur.num)
	from := len(f.stack)
	for f.cur.ok && f.cur.indent >= col {
		if f.cur.indent > col || !isDash(f.cur.text) {
			if indentless && f.cur.indent == col {
				break
			}
			return nil, false
		}
		item, ok := f.item(col)
		if !ok {
			return nil, false
		}
		f.stack = append(f.stack, item)
	}
	f.content(n, from)
	return n, true
}

// item reads the list item whose dash is cur's first character, at col.
func (f *fastYAML) item(col int) (*yaml.Node, bool) {
	rest := strings.TrimLeft(f.cur.text[1:], " ")
	if rest == "" || isDash(rest) {
		return nil, false // an empty item or a list in a list: the library's
	}
	if _, _, ok := splitKey(rest); ok {
		// "- key: value": a mapping whose keys are at rest's column.
		f.cur.indent += len(f.cur.text) - len(rest)
		f.cur.text = rest
		return f.mapping(f.cur.indent, false)
	}
	line := f.cur.num
	f.next()
	v, ok := f.inline(rest, line)
	if !ok || f.cur.ok && f.cur.indent > col {
		return nil, false
	}
	return v, true
}

// lazyTasks reads the top-level tasks: list once, to check it and count
// its items, and returns the node that stands for it.
func (f *fastYAML) lazyTasks() (*yaml.Node, bool) {
	if f.tasks != nil {
		return nil, false // a second tasks: key
	}
	f.tasksAt, f.tasksCol = f.state(), f.cur.indent
	n := f.node(yaml.SequenceNode, "!!seq", "", f.cur.num)
	arena := f.arena
	f.arena = true
	defer func() { f.arena = arena }()
	for f.cur.ok && f.cur.indent >= f.tasksCol {
		if f.cur.indent > f.tasksCol || !isDash(f.cur.text) {
			if f.tasksCol == 0 && f.cur.indent == 0 {
				break
			}
			return nil, false
		}
		f.reset()
		if _, ok := f.item(f.tasksCol); !ok {
			return nil, false
		}
		f.tasksCount++
	}
	f.reset()
	f.tasks = n
	return n, true
}

// items calls each with every item of the tasks: list that the placeholder
// stands for, in order. The nodes are reused once each returns.
func (f *fastYAML) items(each func(i int, n *yaml.Node)) {
	end := f.state()
	f.restore(f.tasksAt)
	f.arena = true
	for i := range f.tasksCount {
		f.reset()
		n, ok := f.item(f.tasksCol)
		if !ok {
			panic("workflow: the fast YAML reader failed on a list it had read")
		}
		each(i, n)
	}
	f.reset()
	f.arena = false
	f.restore(end)
}

// splitKey splits "key: rest" or "key:" when key is a plain key the fast
// path reads.
func splitKey(text string) (key, rest string, ok bool) {
	i := 0
	for i < len(text) && keyByte(text[i]) {
		i++
	}
	if i == 0 || i == len(text) || text[i] != ':' || i+1 < len(text) && text[i+1] != ' ' {
		return "", "", false
	}
	if c := text[0]; c == '-' || c == '.' || i > maxKey {
		return "", "", false // "-x", "---", "...": leave them to the library
	}
	return text[:i], strings.TrimLeft(text[i+1:], " "), true
}

// maxKey is the longest key the fast path reads: the library takes a
// longer one for no key at all (it looks at most 1024 bytes ahead).
const maxKey = 1000

func keyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/'
}

// inline reads a value written on its key's or dash's line.
func (f *fastYAML) inline(s string, line int) (*yaml.Node, bool) {
	if strings.IndexByte(s, '#') >= 0 {
		return nil, false // a comment, or a # the library may read as one
	}
	switch s[0] {
	case '[', '{':
		fl := flowReader{f: f, s: s, line: line}
		n, ok := fl.value()
		return n, ok && fl.i == len(s)
	case '"', '\'':
		v, end, ok := quoted(s)
		if !ok || end != len(s) {
			return nil, false
		}
		return f.node(yaml.ScalarNode, "!!str", v, line), true
	}
	if !plainStart(s) || strings.HasSuffix(s, ":") || strings.Contains(s, ": ") {
		return nil, false
	}
	return f.node(yaml.ScalarNode, plainTag(s), s, line), true
}

// plainStart reports whether s may begin a plain value: no indicator
// first, but "-" followed by something other than a space ("-1", "-c").
func plainStart(s string) bool {
	switch s[0] {
	case '-':
		return len(s) > 1 && s[1] != ' '
	case '&', '*', '!', '|', '>', '%', '@', '`', '?', ':', ',', '[', ']', '{', '}', '"', '\'', '#':
		return false
	}
	return true
}

// plainTag is the tag the library gives a plain value, as far as the
// workflow reader asks: null or not.
func plainTag(s string) string {
	switch s {
	case "~", "null", "Null", "NULL":
		return "!!null"
	}
	return "!!str"
}

// quoted reads the quoted value at the start of s: its value and where it
// ends. A double-quoted value with a backslash is left to the library.
func quoted(s string) (v string, end int, ok bool) {
	q := s[0]
	if q == '"' {
		j := strings.IndexByte(s[1:], '"')
		if j < 0 || strings.IndexByte(s[1:1+j], '\\') >= 0 {
			return "", 0, false
		}
		return s[1 : 1+j], j + 2, true
	}
	var b []byte // the value, once a '' made it differ from the text
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] != '\'':
			if b != nil {
				b = append(b, s[i])
			}
		case i+1 < len(s) && s[i+1] == '\'': // '' is one '
			if b == nil {
				b = append([]byte(nil), s[1:i]...)
			}
			b = append(b, '\'')
			i++
		case b == nil:
			return s[1:i], i + 1, true
		default:
			return string(b), i + 1, true
		}
	}
	return "", 0, false
}

// flowReader reads a one-line [...] or {...}.
type flowReader struct {
	f    *fastYAML
	s    string
	i    int
	line int
}

func (r *flowReader) spaces() {
	for r.i < len(r.s) && r.s[r.i] == ' ' {
		r.i++
	}
}

// value reads a list, a mapping or a scalar at r.i, and the spaces after.
func (r *flowReader) value() (*yaml.Node, bool) {
	if r.i >= len(r.s) {
		return nil, false
	}
	switch r.s[r.i] {
	case '[':
		return r.collection(yaml.SequenceNode, "!!seq", ']')
	case '{':
		return r.collection(yaml.MappingNode, "!!map", '}')
	}
	return r.scalar()
}

// collection reads [a, b] or {k: v, ...}: no empty or trailing entry.
func (r *flowReader) collection(kind yaml.Kind, tag string, closer byte) (*yaml.Node, bool) {
	f := r.f
	n := f.node(kind, tag, "", r.line)
	from := len(f.stack)
	r.i++
	r.spaces()
	if r.i < len(r.s) && r.s[r.i] == closer {
		r.i++
		r.spaces()
		f.content(n, from)
		return n, true
	}
	for {
		if kind == yaml.MappingNode {
			k, ok := r.scalar()
			if !ok || len(k.Value) > maxKey || r.i >= len(r.s) || r.s[r.i] != ':' || r.i+1 >= len(r.s) || r.s[r.i+1] != ' ' {
				return nil, false
			}
			r.i++
			r.spaces()
			f.stack = append(f.stack, k)
		}
		v, ok := r.value()
		if !ok {
			return nil, false
		}
		f.stack = append(f.stack, v)
		if r.i >= len(r.s) {
			return nil, false
		}
		switch r.s[r.i] {
		case ',':
			r.i++
			r.spaces()
			if r.i >= len(r.s) || r.s[r.i] == closer || r.s[r.i] == ',' {
				return nil, false
			}
			continue
		case closer:
			r.i++
			r.spaces()
			f.content(n, from)
			return n, true
		}
		return nil, false
	}
}

// scalar reads a quoted or plain value inside [...] or {...}, and the
// spaces after it. A plain one ends at , [ ] { } or ": "; one holding
// another : or a ? is left to the library.
func (r *flowReader) scalar() (*yaml.Node, bool) {
	rest := r.s[r.i:]
	if rest == "" {
		return nil, false
	}
	if rest[0] == '"' || rest[0] == '\'' {
		v, end, ok := quoted(rest)
		if !ok {
			return nil, false
		}
		r.i += end
		r.spaces()
		return r.f.node(yaml.ScalarNode, "!!str", v, r.line), true
	}
	j := strings.IndexAny(rest, ",[]{}:?")
	if j < 0 {
		return nil, false // an unclosed [ or {
	}
	if rest[j] == '?' || rest[j] == ':' && (j+1 >= len(rest) || rest[j+1] != ' ') {
		return nil, false // the library ends a value at a ? inside [...]
	}
	v := strings.TrimRight(rest[:j], " ")
	if v == "" || !plainStart(v) {
		return nil, false
	}
	r.i += j
	return r.f.node(yaml.ScalarNode, plainTag(v), v, r.line), true
}
