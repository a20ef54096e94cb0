package gpusched_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// goBlock finds the Go code blocks of a Markdown file.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestGoSnippetsCompile builds every Go snippet of the README and of docs/
// against this checkout, so that the examples people copy compile. Each
// snippet must be a whole program (package main).
func TestGoSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	docs, _ := filepath.Glob("docs/*.md")
	docs = append([]string{"README.md"}, docs...)
	found := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goBlock.FindAllSubmatchIndex(b, -1) {
			found++
			code := b[m[2]:m[3]]
			line := 1 + bytes.Count(b[:m[0]], []byte("\n"))
			if !bytes.HasPrefix(code, []byte("package main\n")) {
				t.Errorf("%s:%d: a Go snippet must be a whole program starting with \"package main\"", doc, line)
				continue
			}
			// A folder whose name starts with "_" inside the module: the
			// go command builds it when named, and ./... leaves it out.
			dir, err := os.MkdirTemp(".", "_snippet-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "main.go"), code, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("go", "build", "-o", os.DevNull, "./"+dir).CombinedOutput()
			if err != nil {
				t.Errorf("%s:%d: the Go snippet does not compile:\n%s", doc, line, out)
			}
		}
	}
	if found == 0 {
		t.Error("no Go snippet found in README.md and docs/: the test looks in the wrong place")
	}
}
