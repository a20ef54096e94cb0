package cli

import (
	"bytes"
	"encoding/json"

	"github.com/gpusched/gpusched"
)

// Decoding what status shows of 100,000 stored definitions: encoding/json
// checks and scans each definition whole, with its payload, environment
// and everything else status does not show, and allocates as it goes. The
// scanner below walks a definition once, skipping what it does not need,
// and decodes only the four values of specView; anything it does not
// expect sends the whole definition to encoding/json, so the result is
// always json.Unmarshal's (TestDecodeSpecViewAsEncodingJSON,
// FuzzDecodeSpecView).

// specDecoder decodes specViews. The dependency lists of the views it
// decodes share its backing arrays: it allocates a few large ones rather
// than one per task.
type specDecoder struct {
	slab []string // dependencies decoded so far; the unused capacity is for the next
}

// decode decodes def into *sp as json.Unmarshal(def, sp) would into a
// zero specView (ignoring its error, as status does).
func (d *specDecoder) decode(def []byte, sp *specView) {
	*sp = specView{}
	if !d.scan(def, sp) {
		*sp = specView{}
		_ = json.Unmarshal(def, sp)
	}
}

// maxScanDepth is how deep the scanner follows nested values before it
// leaves a definition to encoding/json.
const maxScanDepth = 64

// The keys of specView, and which bit of a seen-set each takes.
const (
	seenDependencies = 1 << iota
	seenDependencyOn
	seenPriority
	seenResources
)

// scan decodes def into the zero *sp and reports whether it could. It
// cannot when def is anything but a well-formed object with a plain key
// for each of specView's fields at most once, no key that would match one
// of them in another case (encoding/json matches keys without regard to
// case), and values that decode without error.
func (d *specDecoder) scan(def []byte, sp *specView) bool {
	s := jsonScanner{b: def}
	s.space()
	if !s.next('{') {
		return false
	}
	s.space()
	if s.next('}') {
		s.space()
		return s.i == len(s.b)
	}
	seen := 0
	for {
		from := s.i + 1
		if !s.skipString() {
			return false
		}
		key := def[from : s.i-1]
		s.space()
		if !s.next(':') {
			return false
		}
		s.space()
		start := s.i
		if !s.skipValue(0) {
			return false
		}
		value := def[start:s.i]
		bit, ok := specKey(key)
		if !ok {
			return false
		}
		if bit != 0 {
			if seen&bit != 0 {
				return false
			}
			seen |= bit
			if !d.value(bit, value, sp) {
				return false
			}
		}
		s.space()
		if s.next(',') {
			s.space()
			continue
		}
		if !s.next('}') {
			return false
		}
		s.space()
		return s.i == len(s.b)
	}
}

// specKey says which of specView's fields the (unescaped) key names: its
// bit, or 0 for none. ok is false for a key the scanner leaves to
// encoding/json: one with an escape or a byte outside ASCII, or one that
// names a field in another case.
func specKey(key []byte) (bit int, ok bool) {
	switch string(key) {
	case "dependencies":
		return seenDependencies, true
	case "dependency_on":
		return seenDependencyOn, true
	case "priority":
		return seenPriority, true
	case "resources":
		return seenResources, true
	}
	for _, c := range key {
		if c == '\\' || c >= 0x80 {
			return 0, false
		}
	}
	for _, name := range []string{"dependencies", "dependency_on", "priority", "resources"} {
		if len(key) == len(name) && bytes.EqualFold(key, []byte(name)) {
			return 0, false
		}
	}
	return 0, true
}

// value decodes the well-formed JSON value of the field bit into sp, and
// reports whether it could without error.
func (d *specDecoder) value(bit int, value []byte, sp *specView) bool {
	switch bit {
	case seenDependencies:
		if deps, ok := d.strings(value); ok {
			sp.Dependencies = deps
			return true
		}
		return json.Unmarshal(value, &sp.Dependencies) == nil
	case seenPriority:
		if n, ok := plainInt(value); ok {
			sp.Priority = n
			return true
		}
		return json.Unmarshal(value, &sp.Priority) == nil
	case seenResources:
		if string(value) == `{"device":"cpu"}` { // what every CPU task stores
			sp.Resources = gpusched.ResourceRequest{Device: gpusched.CPU}
			return true
		}
		return json.Unmarshal(value, &sp.Resources) == nil
	default: // seenDependencyOn: rare, small
		return json.Unmarshal(value, &sp.DependencyOn) == nil
	}
}

// strings decodes a well-formed array of strings in which no string has an
// escape, a control character or a byte outside ASCII; ok is false for
// anything else. The strings share one allocation, the slice d's slab.
func (d *specDecoder) strings(value []byte) (list []string, ok bool) {
	if len(value) < 2 || value[0] != '[' {
		return nil, false
	}
	n := 0
	for i := 1; i < len(value); i++ {
		switch c := value[i]; {
		case c == '"':
			n++
			for i++; i < len(value) && value[i] != '"'; i++ {
				if c := value[i]; c == '\\' || c < 0x20 || c >= 0x80 {
					return nil, false
				}
			}
		case c == ',' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			return nil, false // not a string
		}
	}
	if d.slab == nil || cap(d.slab)-len(d.slab) < n { // non-nil even for none: [] is an empty list, not nil
		d.slab = make([]string, 0, max(n, 4096))
	}
	all := string(value)
	from := len(d.slab)
	for i := 1; i < len(all); i++ {
		if all[i] != '"' {
			continue
		}
		j := i + 1
		for all[j] != '"' {
			j++
		}
		d.slab = append(d.slab, all[i+1:j])
		i = j
	}
	return d.slab[from:len(d.slab):len(d.slab)], true
}

// plainInt decodes a well-formed JSON number that is an integer of at most
// 18 digits, without fraction or exponent.
func plainInt(value []byte) (int, bool) {
	digits := value
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if value[0] == '-' {
		n = -n
	}
	return n, true
}

// jsonScanner walks JSON text, checking it as encoding/json does but
// decoding nothing.
type jsonScanner struct {
	b []byte
	i int // the next byte
}

// space skips white space.
func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips c if it is the next byte, and reports whether it was.
func (s *jsonScanner) next(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// skipValue skips one well-formed value at depth, and reports whether
// there was one.
func (s *jsonScanner) skipValue(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		return s.skipString()
	case '{':
		s.i++
		s.space()
		if s.next('}') {
			return true
		}
		for {
			if !s.skipString() {
				return false
			}
			s.space()
			if !s.next(':') {
				return false
			}
			s.space()
			if !s.skipValue(depth + 1) {
				return false
			}
			s.space()
			if s.next('}') {
				return true
			}
			if !s.next(',') {
				return false
			}
			s.space()
		}
	case '[':
		s.i++
		s.space()
		if s.next(']') {
			return true
		}
		for {
			if !s.skipValue(depth + 1) {
				return false
			}
			s.space()
			if s.next(']') {
				return true
			}
			if !s.next(',') {
				return false
			}
			s.space()
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.skipNumber()
	}
}

// literal skips word if the text goes on with it.
func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// skipString skips a string, quotes included: no control character in it,
// only JSON's escapes. Bytes outside ASCII are taken as they are, as
// encoding/json takes them.
func (s *jsonScanner) skipString() bool {
	if !s.next('"') {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipNumber skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) skipNumber() bool {
	s.next('-')
	switch {
	case s.next('0'):
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.next('.') {
		if !s.digits() {
			return false
		}
	}
	if s.next('e') || s.next('E') {
		if !s.next('+') {
			s.next('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits skips one digit or more, and reports whether there was one.
func (s *jsonScanner) digits() bool {
	from := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > from
}
