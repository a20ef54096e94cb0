// Package suggest finds the likely intended word for a mistyped one, for
// "did you mean" hints in error messages.
package suggest

import (
	"iter"
	"strings"
)

// Closest returns the candidate nearest to want by edit distance, if it is
// close enough to be a plausible typo (at most a third of want's length, and
// at least 2, edits away, but fewer edits than want has bytes: "b" is no
// typo of "a"), else "". A candidate that starts with want (an
// abbreviation, at least 3 bytes long) also counts as one edit away. Ties go
// to the first candidate seen. A want longer than MaxLen bytes gets no
// suggestion: comparing it costs its length squared per candidate, and
// nobody mistypes a word that long.
func Closest(want string, candidates iter.Seq[string]) string {
	if len(want) > MaxLen {
		return ""
	}
	best, limit := "", max(2, len(want)/3)+1
	for c := range candidates {
		d := distance(want, c, limit)
		if len(want) >= 3 && c != want && strings.HasPrefix(c, want) {
			d = min(d, 1)
		}
		if d < limit && d < len(want) { // rewriting every letter is no typo
			best, limit = c, d
		}
	}
	return best
}

// MaxLen is the longest word Closest suggests a correction for, in bytes.
const MaxLen = 256

// distance is the Levenshtein distance between a and b, or limit if it is at
// least limit, which makes far-apart strings cheap to reject.
func distance(a, b string, limit int) int {
	if abs(len(a)-len(b)) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
