package mcpserver

import (
	"encoding/json"
	"unicode/utf8"
)

// members walks the members of one JSON object already known to be valid
// JSON (json.Valid), without decoding it: a tools/call is read on every
// call, and decoding its two objects into maps of raw messages cost the
// fast path some thirty allocations a call, a copy of every name and
// value. What it answers are slices of the object's own bytes.
type members struct {
	raw []byte
	i   int
}

// newMembers answers a walk of the object raw, which must be valid JSON
// whose first byte past any space is '{'.
func newMembers(raw []byte) members {
	return members{raw: raw, i: skipSpace(raw, 0) + 1}
}

// next answers the next member's name as written (its quotes and any
// escapes included) and its value without the space around it, or false
// after the last.
func (m *members) next() (name, value []byte, ok bool) {
	i := skipSpace(m.raw, m.i)
	if m.raw[i] == '}' {
		return nil, nil, false
	}
	if m.raw[i] == ',' {
		i = skipSpace(m.raw, i+1)
	}
	end := endString(m.raw, i)
	name = m.raw[i:end]
	i = skipSpace(m.raw, skipSpace(m.raw, end)+1) // past the ':'
	end = endValue(m.raw, i)
	m.i = end
	return name, m.raw[i:end], true
}

// skipSpace answers the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// endString answers the index just past the string starting at b[i].
func endString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// endValue answers the index just past the value starting at b[i].
func endValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return endString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = endString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	// A number, true, false or null runs to the next delimiter.
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
	}
	return len(b)
}

// textOf answers the text of the JSON string raw (quotes included) as
// encoding/json would decode it. A string without escapes and of valid
// UTF-8 is its bytes, copied once; any other goes to encoding/json, so
// its escapes and its invalid bytes are read the same way as ever.
func textOf(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; raw[len(raw)-1] == '"' && plain(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// textIs reports whether the JSON string raw (quotes included) decodes to
// want, without a copy when it holds no escape.
func textIs(raw []byte, want string) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	if inner := raw[1 : len(raw)-1]; raw[len(raw)-1] == '"' && plain(inner) {
		return string(inner) == want
	}
	s, ok := textOf(raw)
	return ok && s == want
}

// plain reports whether b, between a string's quotes, is its text as it
// stands: no escape, no quote, no control character, valid UTF-8.
func plain(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}
