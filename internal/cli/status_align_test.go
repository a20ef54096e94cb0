package cli

import (
	"bytes"
	"strings"
	"testing"
)

// writeAligned writes what the tab writer writes: cells of any width, in
// runes or bytes, empty ones, and rows the tab writer reads its own way.
func TestWriteAlignedAsTabwriter(t *testing.T) {
	t.Parallel()
	header := []string{"TASK", "STATE", "ATTEMPTS", "EXIT", "GPU", "TIME", "NOTE"}
	long := strings.Repeat("x", 150)
	for _, c := range []struct {
		name string
		rows [][]string
	}{
		{"header only", [][]string{header}},
		{"plain", [][]string{header,
			{"task-000000", "complete", "1", "0", "-", "2ms", ""},
			{"a", "blocked", "0", "-", "-", "-", "dependency task-000000 failed"},
			{long, "running", "12", "137", "0,1,2,3", "1h2m3s", "adopted after a restart"}}},
		{"runes and bytes", [][]string{header,
			{"dé-1", "complete", "1", "0", "-", "2ms", "ünï"},
			{"日本語", "failed", "1", "1", "-", "…", "bad\xc3("},
			{"\xc3", "failed", "1", "1", "-", "-", "x"}}},
		{"empty cells", [][]string{{"", "", ""}, {"", "a", ""}, {"b", "", "c"}}},
		{"one column", [][]string{{"a"}, {"bcd"}}},
		{"newline in a note", [][]string{header, {"a", "failed", "1", "1", "-", "-", "line one\nline two"}, {"long-task-id", "failed", "1", "1", "-", "-", "x"}}},
		{"newline in a cell", [][]string{header, {"a\nb", "failed", "1", "1", "-", "-", ""}, {"c", "x", "1", "1", "-", "-", ""}}},
		{"tab in a note", [][]string{header, {"a", "failed", "1", "1", "-", "-", "x\ty"}, {"b", "failed", "1", "1", "-", "-", "z"}}},
		{"form feed, vertical tab, escape", [][]string{{"a\fb", "c"}, {"d\ve", "f"}, {"g\xffh\xff", "i"}, {"j", "k"}}},
		{"rows of different lengths", [][]string{{"a", "b", "c"}, {"dd"}, {"e", "ff", "g"}}},
	} {
		var got, want bytes.Buffer
		writeAligned(&got, c.rows)
		writeTabbed(&want, c.rows)
		if got.String() != want.String() {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got.String(), want.String())
		}
	}
}

// A table longer than writeAligned's buffer comes out whole.
func TestWriteAlignedLongTable(t *testing.T) {
	t.Parallel()
	rows := [][]string{{"TASK", "NOTE"}}
	for i := range 5000 {
		rows = append(rows, []string{strings.Repeat("t", i%37), strings.Repeat("n", i%11)})
	}
	var got, want bytes.Buffer
	writeAligned(&got, rows)
	writeTabbed(&want, rows)
	if got.String() != want.String() {
		t.Errorf("5,001 rows: %d bytes, want %d (first difference at %d)", got.Len(), want.Len(), firstDifference(got.Bytes(), want.Bytes()))
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
