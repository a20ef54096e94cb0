package workflow_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/workflow"
)

// Every workflow under examples/ loads: the files people start from are
// valid.
func TestExamplesLoad(t *testing.T) {
	t.Parallel()
	var files []string
	for _, pattern := range []string{"*.yaml", "*/*.yaml"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "examples", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("found %q: the test looks in the wrong place", files)
	}
	for _, f := range files {
		if _, err := workflow.Load(f); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// Every YAML block of docs/workflow.md is a whole workflow that loads.
func TestWorkflowDocBlocksLoad(t *testing.T) {
	t.Parallel()
	doc := filepath.Join("..", "..", "docs", "workflow.md")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllSubmatchIndex(b, -1)
	if len(blocks) < 2 {
		t.Fatalf("%s: %d YAML blocks: the test looks in the wrong place", doc, len(blocks))
	}
	for _, m := range blocks {
		line := 1 + strings.Count(string(b[:m[0]]), "\n")
		if _, err := workflow.Parse(doc, b[m[2]:m[3]]); err != nil {
			t.Errorf("%s:%d: the block does not load:\n%v", doc, line, err)
		}
	}
}
