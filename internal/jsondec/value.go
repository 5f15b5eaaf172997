package jsondec

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Value reads one JSON value and nothing after it into the values
// encoding/json gives an any with UseNumber: map[string]any, []any,
// string, json.Number, bool and nil, the last of a repeated name winning.
// It reports false, with nothing read, for a text encoding/json refuses.
//
// Every call decodes its arguments and a runtime's answer, and
// encoding/json reads a text twice over through its scanner's state
// machine (a pass to find the value's end, another while decoding it);
// json.Valid reads it once, and Value's walk then only cuts the values
// out. A string with an escape or invalid UTF-8 (which encoding/json
// replaces with U+FFFD) is left to encoding/json, so each string reads
// exactly as it would there. A caller that must say why a text is refused
// asks encoding/json, whose error says where.
//
// The text is copied once, and every name, string and number without an
// escape is a part of that copy rather than a copy of its own: one
// allocation where encoding/json makes one per string. The copy lives as
// long as any value read from it, which is as long as the text's bound:
// Value is for arguments and answers a call holds while it runs.
func Value(b []byte) (any, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	d := valueReader{b: string(b)}
	return d.value(), true
}

// valueReader walks a valid JSON text.
type valueReader struct {
	b string
	i int
}

// space skips white space.
func (d *valueReader) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *valueReader) value() any {
	d.space()
	switch c := d.b[d.i]; c {
	case '{':
		d.i++
		m := make(map[string]any)
		d.space()
		if d.b[d.i] == '}' {
			d.i++
			return m
		}
		for {
			d.space()
			k := d.text()
			d.space()
			d.i++ // the colon
			m[k] = d.value()
			d.space()
			c := d.b[d.i]
			d.i++
			if c == '}' {
				return m
			}
		}
	case '[':
		d.i++
		a := []any{}
		d.space()
		if d.b[d.i] == ']' {
			d.i++
			return a
		}
		for {
			a = append(a, d.value())
			d.space()
			c := d.b[d.i]
			d.i++
			if c == ']' {
				return a
			}
		}
	case '"':
		return d.text()
	case 't':
		d.i += len("true")
		return true
	case 'f':
		d.i += len("false")
		return false
	case 'n':
		d.i += len("null")
		return nil
	}
	start := d.i
	for d.i < len(d.b) && numberByte(d.b[d.i]) {
		d.i++
	}
	return json.Number(d.b[start:d.i])
}

// numberByte reports whether c can be part of a JSON number.
func numberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// text reads the string at d.i, its quotes included.
func (d *valueReader) text() string {
	start := d.i
	d.i++
	plain := true
	for {
		c := d.b[d.i]
		if c == '"' {
			break
		}
		if c == '\\' {
			plain = false
			d.i++ // the escaped byte, which may be a quote
		} else if c >= utf8.RuneSelf {
			plain = false
		}
		d.i++
	}
	d.i++
	quoted := d.b[start:d.i]
	inner := quoted[1 : len(quoted)-1]
	if plain || strings.IndexByte(inner, '\\') < 0 && utf8.ValidString(inner) {
		return inner
	}
	var s string
	// Valid JSON: the string decodes.
	_ = json.Unmarshal([]byte(quoted), &s)
	return s
}
