package jsondec

import (
	"encoding/json"
	"strings"
	"sync"
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
	d := readers.Get().(*valueReader)
	d.b, d.i = string(b), 0
	v := d.value()
	d.b = ""
	if cap(d.items) <= maxPooledItems {
		readers.Put(d)
	}
	return v, true
}

// maxPooledItems bounds the item stack a pooled reader keeps: one grown by
// a rare long array is left to the collector.
const maxPooledItems = 1 << 12

// readers are Value's readers, pooled with their item stacks.
var readers = sync.Pool{New: func() any { return &valueReader{items: make([]any, 0, 32)} }}

// valueReader walks a valid JSON text.
type valueReader struct {
	b string
	i int
	// items holds the elements of the arrays being read, the inner ones'
	// above the outer ones', emptied as each array is copied out at its
	// length: one allocation an array, where appending to it grew it
	// several times.
	items []any
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
		d.space()
		if d.b[d.i] == ']' {
			d.i++
			return []any{}
		}
		start := len(d.items)
		for {
			v := d.value()
			d.items = append(d.items, v)
			d.space()
			c := d.b[d.i]
			d.i++
			if c == ']' {
				break
			}
		}
		a := make([]any, len(d.items)-start)
		copy(a, d.items[start:])
		// The stack keeps no value the array's reader no longer holds.
		clear(d.items[start:])
		d.items = d.items[:start]
		return a
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
