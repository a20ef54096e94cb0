package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// fastRead counts the files the package's tests read, and those of them
// the fast path took.
var fastRead struct {
	sync.Mutex
	all, fast int
	failed    []string // what the fast path read otherwise than the library
}

func init() {
	// Every file a test of this package parses is read both ways too.
	parsed = func(data []byte) {
		if len(data) > 1<<20 {
			return // a benchmark's: it would measure the check
		}
		took, err := compareFast(data)
		fastRead.Lock()
		defer fastRead.Unlock()
		fastRead.all++
		if took {
			fastRead.fast++
		}
		if err != nil {
			fastRead.failed = append(fastRead.failed, fmt.Sprintf("%v\n--- file:\n%s", err, elideFile(data)))
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	fastRead.Lock()
	if len(fastRead.failed) > 0 {
		fmt.Fprintf(os.Stderr, "the fast YAML path read %d files otherwise than the library; the first:\n%s\n", len(fastRead.failed), fastRead.failed[0])
		code = 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "fast YAML path: %d of %d files parsed\n", fastRead.fast, fastRead.all)
	}
	fastRead.Unlock()
	os.Exit(code)
}

func elideFile(data []byte) string {
	if len(data) > 2000 {
		return string(data[:2000]) + "..."
	}
	return string(data)
}

// compareFast reads data with the fast path, both whole and with its tasks
// list read lazily, and with the YAML library. It reports whether the fast
// path took the file, and an error when it read it otherwise than the
// library would.
func compareFast(data []byte) (took bool, err error) {
	whole, ok := newFastYAML(data).parse(false)
	f := newFastYAML(data)
	lazy, lazyOK := f.parse(true)
	if lazyOK && !ok {
		return false, errors.New("the fast path took the file lazily, not whole")
	}
	if !ok {
		return false, nil
	}
	// It may take a file whole and not lazily (two tasks: keys): the
	// library then reads it.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return true, fmt.Errorf("the fast path took a file the library rejects: %v", err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return true, fmt.Errorf("the fast path took a file the library reads as more than one document (%v)", err)
	}
	if len(doc.Content) != 1 {
		return true, fmt.Errorf("the fast path took a file with %d nodes in its document", len(doc.Content))
	}
	if err := sameNode("", whole, doc.Content[0]); err != nil {
		return true, err
	}
	if !lazyOK {
		return false, nil
	}
	// Lazily: the same tree, the tasks list read item by item.
	var items []string
	if f.tasks != nil {
		f.items(func(i int, n *yaml.Node) { items = append(items, dumpNode(n)) })
	}
	for i := 0; i+1 < len(whole.Content); i += 2 {
		k, v, lv := whole.Content[i], whole.Content[i+1], lazy.Content[i+1]
		if lv == f.tasks && f.tasks != nil {
			if k.Value != "tasks" || v.Kind != yaml.SequenceNode || v.Line != lv.Line || len(v.Content) != len(items) {
				return true, fmt.Errorf("the lazy tasks list differs: %d items, line %d; whole: %d items, line %d", len(items), lv.Line, len(v.Content), v.Line)
			}
			for j, c := range v.Content {
				if d := dumpNode(c); d != items[j] {
					return true, fmt.Errorf("lazy task %d:\n%s\nwhole:\n%s", j, items[j], d)
				}
			}
			continue
		}
		if err := sameNode("lazy", lazy.Content[i+1], v); err != nil {
			return true, err
		}
	}
	return true, nil
}

// sameNode compares what the workflow reader looks at in two nodes: kind,
// value, line, whether the tag is null, and the same of their content.
func sameNode(path string, fast, lib *yaml.Node) error {
	if fast.Kind != lib.Kind || fast.Value != lib.Value || fast.Line != lib.Line ||
		(fast.Tag == "!!null") != (lib.Tag == "!!null") || len(fast.Content) != len(lib.Content) {
		return fmt.Errorf("at %s: fast path: %s; library: %s", cmpOr(path), dumpNode(fast), dumpNode(lib))
	}
	for i := range fast.Content {
		if err := sameNode(fmt.Sprintf("%s/%d", path, i), fast.Content[i], lib.Content[i]); err != nil {
			return err
		}
	}
	return nil
}

func cmpOr(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

func dumpNode(n *yaml.Node) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&b, "%*skind %d tag %s value %q line %d\n", 2*depth, "", n.Kind, n.Tag, n.Value, n.Line)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// fastCorpus is files of the shapes the fast path takes, and of shapes it
// must leave to the library.
var fastCorpus = []string{
	"tasks:\n  - id: a\n    args: [\"true\"]\n",
	"tasks:\n- id: a\n  args: [x, 'y''z', \"q\"]\n  env: {A: \"1\", B: b}\nscheduling:\n  max_parallel_tasks: 2\n",
	"# head\ntasks:\n\n  # one\n  - id: a\n    args:\n      - echo\n      - hi there\n    dependencies: []\n    resources: {gpus: 1, memory_mib: 8000}\n",
	"a:\nb: ~\nc: null\nd: Null\ne: NULL\nf: 'null'\n",
	"tasks: []\n",
	"tasks:\n  - {id: t1, args: [/bin/true]}\n  - {id: t2, dependencies: [t1], args: [/bin/true]}\n",
	"tasks:\n  - id: a\n    args: [sh, -c, echo a]\n    dir: ./x\n",
	"tasks:\n  - id: a\n    args: [sh, -c, echo a:b]\n    dir: ./x\n",
	"tasks:\n  - id: a\n    args: [x]\nfoo: bar\ntasks:\n  - id: b\n",
	"x:\n- a: 1\n  b:\n- c\n",
	"a: b: c\n",
	"a: [x, ]\n",
	"a: [x\n",
	"a: 'x\n",
	"a: \"x\\ty\"\n",
	"a: x # comment\n",
	"a: &x 1\nb: *x\n",
	"a: |\n  text\n",
	"---\na: 1\n",
	"a: 1\n---\nb: 2\n",
	"  a: 1\n",
	"a:\n  b: 1\n c: 2\n",
	"tasks:\n  - id: a\n  foo: 1\n",
	"tasks:\n  - id: a\n     args: [x]\n",
	"a: x\n  y\n",
	"a:\n\tb: 1\n",
	"a: {b: [1, {c: d}], e: []}\n",
	"a: [a b, c  d , 'e']\n",
	"a: -1\nb: - 1\n",
	"- a\n- b\n",
	"a: x]\nb: y}\nc: a,b\n",
	"a: [a\"b]\n",
	"a: ...\nb: [...]\n",
	"a: {b:c}\n",
	"a: [b:c]\n",
	"a: [http://x]\n",
	"a: \"\"\nb: ''\n",
	"a: 'it''s'\n",
	"a:    x    y\n",
	"tasks:\n  -   id: a\n      args: [x]\n  -   id: b\n",
	"tasks:\n  - id: a\n    env:\n      A: 1\n    args: [x]\n  - id: b\n",
	"tasks:\n  - id: a\n    args:\n    - x\n    - y\n",
	"a: 1\nb:\n",
	"",
	"# only\n",
	"a: x\r\n",
	"a: é\n",
	"a: [x, [y, z]]\n",
	"a: {b: }\n",
	"a: ? b\n",
	"? a\n: b\n",
	"a: !!str 1\n",
	"a: @x\n",
	"a: %x\n",
	"a: `x\n",
	"1: a\nnull: b\n",
	"a: 'x' y\n",
	"a: \"x\" y\n",
	"a:\n  - - x\n",
	"a:\n  -\n",
	"a: [x, , y]\n",
	"a: [x,y]\n",
	"a: {x: 1,y: 2}\n",
	"a: b:\n",
	"a: [,]\n",
	"a: { }\nb: [ ]\n",
	"a: {" + strings.Repeat("k", 1100) + ": 1}\n",
	strings.Repeat("k", 1100) + ": 1\n",
	"a: " + strings.Repeat("v", 3000) + "\nb: [" + strings.Repeat("w", 3000) + ", x]\nc:\n- " + strings.Repeat("u", 3000) + "\n",
	"a: [" + strings.Repeat("w, ", 1000) + "x]\nb: {k: " + strings.Repeat("v", 2000) + "}\n",
	"tasks:\n  - id: a\n    args: [\"" + strings.Repeat("q", 3000) + "\"]\n",
}

// TestFastYAMLMatchesLibrary: every file of the corpus, of the examples
// and of testdata that the fast path takes, it reads as the library does;
// and it takes the common shapes.
func TestFastYAMLMatchesLibrary(t *testing.T) {
	files := append([]string(nil), fastCorpus...)
	for _, glob := range []string{"testdata/*.yaml", "../../examples/*.yaml", "../../examples/*/*.yaml"} {
		names, _ := filepath.Glob(glob)
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, string(b))
		}
	}
	took := 0
	for _, f := range files {
		ok, err := compareFast([]byte(f))
		if err != nil {
			t.Errorf("%v\n--- file:\n%s", err, f)
		}
		if ok {
			took++
		}
	}
	if took < 20 {
		t.Errorf("the fast path took %d of %d files", took, len(files))
	}
	for _, f := range fastCorpus[:7] {
		if _, ok := newFastYAML([]byte(f)).parse(true); !ok {
			t.Errorf("the fast path did not take a common shape:\n%s", f)
		}
	}
	if _, ok := newFastYAML(bigWorkflowData(1000)).parse(true); !ok {
		t.Error("the fast path did not take the benchmark's workflow")
	}
}

// bigWorkflowData is the shape of BenchmarkParse100k's file.
func bigWorkflowData(n int) []byte {
	var b strings.Builder
	b.WriteString("tasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: task-%06d\n    args: [\"true\"]\n    priority: %d\n", i, i%10)
		if i > 0 {
			fmt.Fprintf(&b, "    dependencies: [task-%06d, task-%06d]\n", i/2, i-1)
		}
	}
	return []byte(b.String())
}

// FuzzFastYAML: whatever the fast path takes, it reads as the library does.
func FuzzFastYAML(f *testing.F) {
	for _, s := range fastCorpus {
		f.Add([]byte(s))
	}
	for _, glob := range []string{"testdata/*.yaml", "../../examples/*.yaml"} {
		names, _ := filepath.Glob(glob)
		for _, name := range names {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := compareFast(data); err != nil {
			t.Fatalf("%v\n--- file:\n%q", err, data)
		}
	})
}
