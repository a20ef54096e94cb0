package cli

// Table tests of how text is fitted to a terminal.

import (
	"testing"

	"github.com/charmbracelet/x/ansi"
)

func TestElideMiddle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    string
		width int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly-10", 10, "exactly-10"},
		{"preprocess-shard-with-a-rather-long-name-0041", 40, "preprocess-shard-wit…ther-long-name-0041"},
		{"preprocess-shard-with-a-rather-long-name-0042", 40, "preprocess-shard-wit…ther-long-name-0042"},
		{"abcdefghij", 5, "ab…ij"},
		{"abcdefghij", 2, "a…"},
		{"abcdefghij", 1, "…"},
		{"abcdefghij", 0, ""},
		{"数据数据数据数据", 7, "数…数据"}, // two cells a character: 2+1+4
	} {
		got := elideMiddle(c.in, c.width)
		if got != c.want {
			t.Errorf("elideMiddle(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
		if w := ansi.StringWidth(got); w > max(c.width, 0) {
			t.Errorf("elideMiddle(%q, %d) is %d cells wide", c.in, c.width, w)
		}
	}
}
