package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// writeAligned writes rows, one a line, as a text/tabwriter.Writer with
// tableGap cells of padding writes them with their cells joined by tabs:
// every cell but the last padded with spaces to the widest of its column
// (in runes) and tableGap more. It aligns them in one pass over the cells
// and writes no cell through fmt: a status table has 100,000 rows. Rows
// the tab writer would read otherwise (rows of different lengths, or a
// cell with a tab, a line break or the tab writer's escape byte in it) go
// through a tab writer itself (TestWriteAlignedAsTabwriter).
func writeAligned(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	n := len(rows[0])
	widths := make([]int, max(n-1, 0))
	for _, row := range rows {
		if len(row) != n {
			writeTabbed(w, rows)
			return
		}
		for i, cell := range row {
			if tabSpecial(cell) {
				writeTabbed(w, rows)
				return
			}
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(cell))
			}
		}
	}
	const flushAt = 32 << 10
	buf := make([]byte, 0, flushAt+1024)
	for _, row := range rows {
		for i, cell := range row {
			buf = append(buf, cell...)
			if i < len(widths) {
				for pad := widths[i] + tableGap - utf8.RuneCountInString(cell); pad > 0; pad -= len(spaces) {
					buf = append(buf, spaces[:min(pad, len(spaces))]...)
				}
			}
		}
		buf = append(buf, '\n')
		if len(buf) >= flushAt {
			w.Write(buf) // an error is the writer's to keep, as it is with the tab writer: status writes to a bufio.Writer
			buf = buf[:0]
		}
	}
	w.Write(buf)
}

// spaces is padding, written a slice at a time.
const spaces = "                                                                "

// tabSpecial reports whether cell holds a byte the tab writer treats as
// its own: a cell terminator, a line break or its escape.
func tabSpecial(cell string) bool {
	for i := 0; i < len(cell); i++ {
		switch cell[i] {
		case '\t', '\v', '\n', '\f', tabwriter.Escape:
			return true
		}
	}
	return false
}

// writeTabbed writes rows through a tab writer, with the settings
// writeAligned follows.
func writeTabbed(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, tableGap, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}
