package httpruntime

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeValue reads a JSON text, once json.Valid has accepted it, into the
// values encoding/json gives an any with UseNumber: map[string]any,
// []any, string, json.Number, bool and nil, the last of a repeated name
// winning. Every answer of a tool is decoded, and encoding/json reads a
// text twice over through its scanner's state machine (a pass to find the
// value's end, another while decoding it); json.Valid reads it once, and
// this walk then only cuts the values out. A string with an escape or
// invalid UTF-8 (which encoding/json replaces with U+FFFD) is left to
// encoding/json, so each string reads exactly as it would there.
func decodeValue(b []byte) any {
	d := valueReader{b: b}
	return d.value()
}

// valueReader walks a valid JSON text.
type valueReader struct {
	b []byte
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
	if plain || bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	// Valid JSON: the string decodes.
	_ = json.Unmarshal(quoted, &s)
	return s
}
