package elide

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxQuoted bounds the part of Quote's result between the quotes, in bytes:
// a value whose quoted form is longer is cut in the middle.
const MaxQuoted = 96

// Quote returns s quoted as strconv.Quote does (control characters, other
// unprintable runes and invalid UTF-8 escaped), so that it reads as one
// line whatever it holds. When the quoted form would be longer than
// MaxQuoted bytes between the quotes, Quote keeps its start and its end,
// puts "…" in the middle and says how long s is:
//
//	"aaaaaaaa…aaaaaaaa" (10000 bytes)
func Quote(s string) string { return QuoteMax(s, MaxQuoted) }

// QuoteMax is Quote with limit (at least 16) in place of MaxQuoted: for
// text worth showing at more length, such as another program's error
// message.
func QuoteMax(s string, limit int) string {
	limit = max(limit, 16)
	if quotedLen(s, limit+1) <= limit {
		return strconv.Quote(s)
	}
	half := limit / 2
	head, used := quotedHead(s, half)
	tail := quotedTail(s[used:], half)
	return `"` + head + "…" + tail + `" (` + strconv.Itoa(len(s)) + " bytes)"
}

// Middle returns s when it is at most limit bytes long, and otherwise its
// start and end around "…", cut at rune boundaries, at most limit bytes in
// all (limit at least 8). It does not escape anything: use it on text known
// to be printable, Quote on anything else.
func Middle(s string, limit int) string {
	limit = max(limit, 8)
	if len(s) <= limit {
		return s
	}
	room := limit - len("…")
	head := cutRunes(s, room-room/2)
	tail := s[len(s)-tailRunes(s, room/2):]
	return head + "…" + tail
}

// Line makes s printable on one line and at most limit bytes long (limit
// at least 16): control characters, unprintable runes and invalid UTF-8 are
// escaped as in a Go string literal, without the quotes, and a long result
// is cut in the middle as Middle does. For messages of other programs and
// libraries that are meant to be read as text, not quoted.
func Line(s string, limit int) string {
	limit = max(limit, 16)
	if isPrintable(s) {
		return Middle(s, limit)
	}
	if quotedLen(s, limit+1) <= limit {
		q := strconv.Quote(s)
		return q[1 : len(q)-1]
	}
	room := limit - len("…")
	head, used := quotedHead(s, room-room/2)
	return head + "…" + quotedTail(s[used:], room/2)
}

// isPrintable reports whether s is valid UTF-8 without control characters
// or other runes that strconv.Quote would escape (other than '"' and '\\').
func isPrintable(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !strconv.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// piece returns the quoted form of the rune or invalid byte at the start of
// s, without quotes, and how many bytes of s it stands for. The pieces of a
// string, end to end, are strconv.Quote's result without its quotes.
func piece(s string) (string, int) {
	if c := s[0]; c < utf8.RuneSelf && c >= 0x20 && c != 0x7f && c != '"' && c != '\\' {
		return s[:1], 1
	}
	_, n := utf8.DecodeRuneInString(s)
	q := strconv.Quote(s[:n])
	return q[1 : len(q)-1], n
}

// quotedLen returns the length of s's quoted form without the quotes, or a
// number at least limit once it is known to be that long.
func quotedLen(s string, limit int) int {
	total := 0
	for i := 0; i < len(s) && total < limit; {
		p, n := piece(s[i:])
		total += len(p)
		i += n
	}
	return total
}

// quotedHead returns the longest quoted start of s that fits in room
// bytes, and how many bytes of s it covers.
func quotedHead(s string, room int) (string, int) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		p, n := piece(s[i:])
		if b.Len()+len(p) > room {
			break
		}
		b.WriteString(p)
		i += n
	}
	return b.String(), i
}

// quotedTail returns the longest quoted end of s that fits in room bytes.
func quotedTail(s string, room int) string {
	var parts []string
	used, end := 0, len(s)
	for end > 0 {
		_, n := utf8.DecodeLastRuneInString(s[:end])
		p, _ := piece(s[end-n : end])
		if used+len(p) > room {
			break
		}
		parts = append(parts, p)
		used += len(p)
		end -= n
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
	}
	return b.String()
}

// cutRunes returns the longest start of s of at most n bytes that ends at a
// rune boundary.
func cutRunes(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailRunes returns the length of the longest end of s of at most n bytes
// that starts at a rune boundary.
func tailRunes(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return len(s) - start
}
