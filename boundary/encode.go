package boundary

import (
	"encoding/json"
	"math"
	"slices"
	"sync"
	"unicode/utf8"
)

// Encode appends the compact JSON form of v to dst and returns the extended
// buffer. Object keys are written in bytewise order, so one tree always has
// one encoding, and nothing is HTML-escaped, because the reader is a model,
// not a browser. v should be a plain tree (see [Normalize]); any other value
// met on the way is normalised first, so the output is always valid JSON.
// v must not contain itself; no tree Normalize returns does.
func Encode(dst []byte, v any) []byte {
	e := getEncoder()
	own := e.buf
	e.buf = dst
	e.value(v)
	out := e.buf
	// The pooled encoder keeps its own buffer, never the caller's.
	e.buf = own
	putEncoder(e)
	return out
}

// Size returns exactly len(Encode(nil, v)) without building the output. It
// walks v the way Encode does, so what a bound measures is what a model
// reads.
func Size(v any) int {
	switch t := v.(type) {
	case nil:
		return len("null")
	case bool:
		if t {
			return len("true")
		}
		return len("false")
	case string:
		return stringSize(t)
	case json.Number:
		if validNumber(string(t)) {
			return len(t)
		}
		return stringSize(unrenderableNumber)
	case float64:
		return floatSize(t)
	case []any:
		n := 2
		if len(t) > 1 {
			n += len(t) - 1
		}
		for _, e := range t {
			n += Size(e)
		}
		return n
	case map[string]any:
		n := 2
		if len(t) > 1 {
			n += len(t) - 1
		}
		for k, e := range t {
			n += stringSize(k) + 1 + Size(e)
		}
		return n
	}
	return Size(Normalize(v))
}

// encoder keeps one scratch slice of keys for the whole walk: each object
// sorts its keys at the end of the slice and gives the room back when done,
// so encoding many small objects does not allocate one slice per object.
type encoder struct {
	buf  []byte
	keys []string
}

// encoders keeps encoders between answers, so that the scratch of keys
// (and Render's buffer) is allocated once per pooled encoder, not grown
// afresh for every answer.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// The most a pooled encoder keeps: room for an answer at the platform's
// limit, and keys for objects nested that many deep. A rare larger answer
// is not worth holding on to.
const (
	maxPooledBuffer = 2 * PlatformLimit
	maxPooledKeys   = 1024
)

func getEncoder() *encoder { return encoders.Get().(*encoder) }

// putEncoder returns e to the pool. Its keys were cleared object by
// object, so it holds no string of an answer, only bytes in its buffer
// that the next use overwrites.
func putEncoder(e *encoder) {
	if cap(e.buf) > maxPooledBuffer {
		e.buf = nil
	}
	if cap(e.keys) > maxPooledKeys {
		e.keys = nil
	}
	encoders.Put(e)
}

func (e *encoder) value(v any) {
	switch t := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		if t {
			e.buf = append(e.buf, "true"...)
		} else {
			e.buf = append(e.buf, "false"...)
		}
	case string:
		e.buf = appendString(e.buf, t)
	case json.Number:
		if validNumber(string(t)) {
			e.buf = append(e.buf, t...)
		} else {
			e.buf = appendString(e.buf, unrenderableNumber)
		}
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			e.buf = appendString(e.buf, unrenderableFloat)
		} else {
			e.buf = appendFloat(e.buf, t, 64)
		}
	case []any:
		e.buf = append(e.buf, '[')
		for i, el := range t {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.value(el)
		}
		e.buf = append(e.buf, ']')
	case map[string]any:
		base := len(e.keys)
		for k := range t {
			e.keys = append(e.keys, k)
		}
		slices.Sort(e.keys[base:])
		e.buf = append(e.buf, '{')
		for i := base; i < base+len(t); i++ {
			// Index e.keys afresh each time: a nested object may have
			// grown, and so moved, the slice.
			k := e.keys[i]
			if i > base {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, k)
			e.buf = append(e.buf, ':')
			e.value(t[k])
		}
		e.buf = append(e.buf, '}')
		clear(e.keys[base:])
		e.keys = e.keys[:base]
	default:
		e.value(Normalize(v))
	}
}

func floatSize(f float64) int {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return stringSize(unrenderableFloat)
	}
	var buf [32]byte
	return len(appendFloat(buf[:0], f, 64))
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string exactly as encoding/json does with
// HTML escaping off: short escapes where JSON has them, \u00XX for other
// control bytes, U+FFFD for invalid UTF-8, and U+2028 and U+2029 escaped
// because JavaScript treats them as line ends.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainWord(load64(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// stringSize is len(appendString(nil, s)), counted rather than written.
func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainWord(load64(s, i)) {
			i += 8
			n += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\':
				n++
			case c == '"', c == '\\', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
