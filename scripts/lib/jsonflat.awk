# jsonflat.awk: prints every scalar of a JSON document as one line
#
#	PATH<TAB>VALUE
#
# where PATH joins object keys and array indices with dots
# (tasks.0.history.1.mem_peak_mib) and VALUE is the number, true, false or
# null as written, or the string decoded (\" \\ \/ \b \f \r \t and \u00XX
# become the character; \n becomes the two characters \n so that a value
# stays on its line). An empty object or array prints {} or [].
#
# With -v stream=1 the input is a sequence of documents (one JSON object
# per line, as gpusched run --events writes), and each path starts with the
# document's number from 0 (3.event). Anything that is not JSON makes it
# print "jsonflat: ..." on stderr and exit 2.
#
# It is plain POSIX awk (mawk, gawk, busybox awk) so that the GPU check runs
# on machines with neither jq nor Python's standard tools at hand: the
# check's own logic must not depend on the tools it runs beside.

BEGIN {
	hexdigits = "0123456789abcdef"
}

{ text = text $0 "\n" }

END {
	pos = 1
	n = length(text)
	doc = 0
	skipws()
	if (pos > n) {
		if (stream) exit 0
		fail("no JSON value")
	}
	while (pos <= n) {
		value(stream ? doc "" : "")
		doc++
		skipws()
		if (!stream && pos <= n) fail("text after the JSON value")
	}
}

function fail(msg) {
	printf "jsonflat: %s at byte %d\n", msg, pos > "/dev/stderr"
	exit 2
}

function skipws(   c) {
	while (pos <= n) {
		c = substr(text, pos, 1)
		if (c != " " && c != "\t" && c != "\n" && c != "\r") return
		pos++
	}
}

function join(path, key) {
	return path == "" ? key : path "." key
}

function value(path,   c, i, key, tok) {
	skipws()
	if (pos > n) fail("unexpected end of the input")
	c = substr(text, pos, 1)
	if (c == "{") {
		pos++
		skipws()
		if (substr(text, pos, 1) == "}") { pos++; print path "\t{}"; return }
		for (;;) {
			skipws()
			if (substr(text, pos, 1) != "\"") fail("expected a key")
			key = str()
			skipws()
			if (substr(text, pos, 1) != ":") fail("expected ':'")
			pos++
			value(join(path, key))
			skipws()
			c = substr(text, pos, 1)
			pos++
			if (c == "}") return
			if (c != ",") fail("expected ',' or '}'")
		}
	}
	if (c == "[") {
		pos++
		skipws()
		if (substr(text, pos, 1) == "]") { pos++; print path "\t[]"; return }
		for (i = 0; ; i++) {
			value(join(path, i ""))
			skipws()
			c = substr(text, pos, 1)
			pos++
			if (c == "]") return
			if (c != ",") fail("expected ',' or ']'")
		}
	}
	if (c == "\"") {
		print path "\t" str()
		return
	}
	if (match(substr(text, pos, 40), /^(-?[0-9][0-9.eE+-]*|true|false|null)/)) {
		tok = substr(text, pos, RLENGTH)
		pos += RLENGTH
		print path "\t" tok
		return
	}
	fail("unexpected character '" c "'")
}

# str reads the string starting at pos (on its opening quote) and returns
# it decoded.
function str(   out, c, e, code) {
	pos++
	out = ""
	for (;;) {
		if (pos > n) fail("unterminated string")
		c = substr(text, pos, 1)
		if (c == "\"") { pos++; return out }
		if (c == "\n") fail("newline in a string")
		if (c != "\\") { out = out c; pos++; continue }
		e = substr(text, pos + 1, 1)
		pos += 2
		if (e == "\"" || e == "\\" || e == "/") out = out e
		else if (e == "n") out = out "\\n"
		else if (e == "t" || e == "r" || e == "b" || e == "f") out = out " "
		else if (e == "u") {
			code = hex(substr(text, pos, 4))
			if (code < 0) fail("bad \\u escape")
			pos += 4
			if (code >= 32 && code < 127) out = out sprintf("%c", code)
			else out = out sprintf("\\u%04x", code)
		} else fail("bad escape \\" e)
	}
}

# hex returns the value of four hex digits, or -1.
function hex(s,   i, d, v) {
	if (length(s) != 4) return -1
	v = 0
	for (i = 1; i <= 4; i++) {
		d = index(hexdigits, tolower(substr(s, i, 1)))
		if (d == 0) return -1
		v = v * 16 + d - 1
	}
	return v
}
