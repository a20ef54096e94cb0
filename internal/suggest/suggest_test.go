package suggest

import (
	"slices"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	words := []string{"dependencies", "priority", "prepare", "train-000001"}
	long := strings.Repeat("x", MaxLen)
	tests := []struct {
		want       string
		candidates []string
		best       string
	}{
		{"dependecies", words, "dependencies"},
		{"prepar", words, "prepare"},
		{"train-000002", words, "train-000001"},
		{"prep", words, "prepare"}, // an abbreviation
		{"zzzzzz", words, ""},
		{"ab", []string{"abc", "xy"}, "abc"},
		{"b", []string{"a", "c"}, ""}, // every letter replaced
		{"zz", []string{"a"}, ""},
		{long + "y", []string{long + "z"}, ""}, // too long to compare
		{long[1:] + "y", []string{long[1:] + "z"}, long[1:] + "z"},
	}
	for _, tt := range tests {
		if got := Closest(tt.want, slices.Values(tt.candidates)); got != tt.best {
			t.Errorf("Closest(%.20q) = %.20q, want %.20q", tt.want, got, tt.best)
		}
	}
}
