package elide

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"short", "train", `"train"`},
		{"empty", "", `""`},
		{"unicode stays readable", "étape-ü", `"étape-ü"`},
		{"control characters escaped", "a\x00b\nc\x1b", `"a\x00b\nc\x1b"`},
		{"invalid UTF-8 escaped", "a\xffb", `"a\xffb"`},
		{"quotes escaped", `say "hi"`, `"say \"hi\""`},
		{"exactly the limit", strings.Repeat("a", MaxQuoted), strconv.Quote(strings.Repeat("a", MaxQuoted))},
		{
			"long: start and end kept, length said",
			strings.Repeat("a", 5000) + strings.Repeat("z", 5000),
			`"` + strings.Repeat("a", MaxQuoted/2) + "…" + strings.Repeat("z", MaxQuoted/2) + `" (10000 bytes)`,
		},
		{
			"long binary: escapes counted in the limit",
			strings.Repeat("\x00", 1000),
			`"` + strings.Repeat(`\x00`, MaxQuoted/2/4) + "…" + strings.Repeat(`\x00`, MaxQuoted/2/4) + `" (1000 bytes)`,
		},
		{
			"long: a rune is never split",
			"x" + strings.Repeat("é", 100),
			`"x` + strings.Repeat("é", 23) + "…" + strings.Repeat("é", 24) + `" (201 bytes)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Quote(tt.in); got != tt.want {
				t.Errorf("Quote(%.40q) =\n %s\nwant\n %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestQuoteMax(t *testing.T) {
	t.Parallel()
	msg := "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
	if got := QuoteMax(msg, 240); got != strconv.Quote(msg) {
		t.Errorf("QuoteMax(msg, 240) = %s, want it whole", got)
	}
	if got, want := QuoteMax(msg, 20), `"NVIDIA-SMI…d running." (143 bytes)`; got != want {
		t.Errorf("QuoteMax(msg, 20) = %s, want %s", got, want)
	}
}

// Whatever the input, Quote's result is one valid UTF-8 line of bounded
// length, and a short input's is exactly strconv.Quote's.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a", "é\xff\x00", strings.Repeat("\xe2\x82", 99), strings.Repeat("日本", 80) + "\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Quote(s)
		if !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r\x00") {
			t.Fatalf("Quote(%q) = %q: not one valid line", s, got)
		}
		if len(got) > MaxQuoted+40 {
			t.Fatalf("Quote(%q) is %d bytes long", s, len(got))
		}
		if q := strconv.Quote(s); len(q) <= MaxQuoted+2 && got != q {
			t.Fatalf("Quote(%q) = %s, want %s", s, got, q)
		}
		if !strings.HasPrefix(got, `"`) {
			t.Fatalf("Quote(%q) = %s: not quoted", s, got)
		}
	})
}

func TestMiddle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"abcdef", 10, "abcdef"},
		{"abcdefghijklmnopqrstuvwxyz", 11, "abcd…wxyz"},
		{"ééééééééé", 10, "éé…é"},
		{"abcdefghijklmnopqrstuvwxyz", 1, "abc…yz"}, // the limit is at least 8
	}
	for _, tt := range tests {
		got := Middle(tt.in, tt.limit)
		if got != tt.want {
			t.Errorf("Middle(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
		if len(got) > max(tt.limit, 8) || !utf8.ValidString(got) {
			t.Errorf("Middle(%q, %d) = %q: too long or not UTF-8", tt.in, tt.limit, got)
		}
	}
}

func TestLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{`found "x" here`, 100, `found "x" here`},
		{"bad\x00byte\n", 100, `bad\x00byte\n`},
		{strings.Repeat("ab", 100), 21, "ababababa…babababab"},
		{strings.Repeat("\x01", 100), 20, `\x01\x01…\x01\x01`},
	}
	for _, tt := range tests {
		got := Line(tt.in, tt.limit)
		if got != tt.want {
			t.Errorf("Line(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
		if len(got) > max(tt.limit, 16) || strings.ContainsAny(got, "\n\x00") {
			t.Errorf("Line(%q, %d) = %q: too long or not one line", tt.in, tt.limit, got)
		}
	}
}
