package cli

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Fitting text into the columns of a terminal. Widths are in terminal
// cells (a CJK character takes two), as ansi.StringWidth counts them.

// elideMiddle cuts s to at most width cells by replacing its middle with
// "…", keeping its start and its end: where the ids of a sweep differ
// (preprocess-shard-0041, preprocess-shard-0042), and the end of a message.
func elideMiddle(s string, width int) string {
	w := ansi.StringWidth(s)
	switch {
	case w <= width:
		return s
	case width <= 0:
		return ""
	case width == 1:
		return "…"
	}
	keep := width - 1
	tail := keep / 2
	head := keep - tail
	return ansi.Truncate(s, head, "") + "…" + ansi.TruncateLeft(s, w-tail, "")
}

// padRight pads s with spaces to width cells.
func padRight(s string, width int) string {
	if n := width - ansi.StringWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}
