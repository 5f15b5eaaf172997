// Package canonical gives a JSON value a single byte form, so that tool-call
// arguments that mean the same hash the same however a client spelled them,
// and encodes idempotency keys so that no two part lists share a key.
//
// The canonical form follows RFC 8785 (JSON Canonicalization Scheme) except
// for numbers:
//
//   - no whitespace; ',' and ':' as the only separators;
//   - object members sorted by their names compared as UTF-16 code units, as
//     RFC 8785 orders them, so the order does not depend on how a Go map
//     iterates or on the order the client sent;
//   - strings escape only '"', '\' and the control characters below U+0020
//     (as \b, \t, \n, \f, \r, or \u00xx with lowercase hex); every other
//     character is written as literal UTF-8, so "\u00e9" and "é" in the source
//     text come out alike. Each byte that is not part of valid UTF-8 is
//     written as U+FFFD, as encoding/json does when it decodes such a string;
//   - numbers are normalised as exact decimals, not through float64 as RFC
//     8785 does, because arguments carry identifiers and amounts that float64
//     would merge (12345678901234567890 and 12345678901234567891 are the same
//     float64). See Append for the form.
//
// Hash and HashJSON name a value by the SHA-256 of that form; Key and
// SplitKey build and take apart the idempotency keys composed from such
// hashes and identifiers.
package canonical

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted. Encoding
// recurses once per level, so a bound keeps hostile input from exhausting the
// stack; no real tool argument comes near it.
const MaxDepth = 1000

// Sentinel errors. Every error the package returns wraps exactly one of them,
// so callers branch with errors.Is and never on the message.
var (
	// ErrUnsupported reports a Go value that is not a plain JSON value.
	ErrUnsupported = errors.New("canonical: unsupported type")
	// ErrInvalidNumber reports a json.Number that is not JSON number syntax,
	// or a float that is NaN or infinite, which JSON cannot express.
	ErrInvalidNumber = errors.New("canonical: invalid number")
	// ErrTooDeep reports nesting deeper than MaxDepth.
	ErrTooDeep = errors.New("canonical: nesting too deep")
	// ErrDuplicateKey reports an object with two members of the same name:
	// in JSON text, or in a Go map whose keys become equal once invalid UTF-8
	// is replaced. Which member wins differs between parsers, so such an
	// object has no single meaning to hash.
	ErrDuplicateKey = errors.New("canonical: duplicate object key")
	// ErrInvalidJSON reports text that HashJSON cannot decode as exactly one
	// JSON value.
	ErrInvalidJSON = errors.New("canonical: invalid JSON")
	// ErrMalformedKey reports a string that Key could not have produced.
	ErrMalformedKey = errors.New("canonical: malformed key")
)

// Append appends the canonical form of v to dst and returns the extended
// slice. On error it returns dst as it was passed.
//
// v must be a plain JSON value: nil, bool, string, json.Number, float64,
// float32, any int or uint kind, []any or map[string]any, nested freely. These
// are what encoding/json decodes into with UseNumber, plus the numbers a Go
// caller builds. Any other type, including named types and pointers, is
// refused with ErrUnsupported rather than guessed at. A nil []any or
// map[string]any is written as null, as encoding/json writes it.
//
// A number is written by its exact decimal value, whatever its spelling: 1,
// 1.0, 1e0, 10e-1 and 0.1e1 are all 1, and -0 is 0. With d the significant
// digits (no leading or trailing zeros) and the value d.ddd × 10^E:
//
//   - when -6 <= E <= 20 (its magnitude lies in [1e-6, 1e21)), in plain
//     notation: an integer without a point (25, 100000000000000000000),
//     otherwise a decimal (12.5, 0.000123);
//   - otherwise as d.ddde+E or d.ddde-E, one digit before the point, the point
//     left out when there is a single digit, the exponent's sign always
//     written (1e+21, 1.5e-7).
//
// For float64 values this is the form RFC 8785 gives; it differs only in
// keeping every digit of a json.Number. Floats are formatted with the fewest
// digits that round-trip (strconv 'g', -1) at their own precision, so
// float32(0.1) is 0.1.
func Append(dst []byte, v any) ([]byte, error) {
	e := getEncoder()
	out, err := e.appendValue(dst, v, 0)
	putEncoder(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// Marshal returns the canonical form of v, as Append describes it.
func Marshal(v any) ([]byte, error) {
	e := getEncoder()
	defer putEncoder(e)
	buf, err := e.appendValue(e.buf[:0], v, 0)
	e.buf = buf
	if err != nil {
		return nil, err
	}
	return slices.Clone(buf), nil
}

// member is one object member waiting to be sorted. name is the key as it
// will be written (invalid UTF-8 already replaced), so the sort order is the
// order of the output.
type member struct {
	name  string
	value any
}

// encoder holds the scratch space one encoding reuses. It is pooled so that
// hashing a typical argument object allocates nothing but the result.
type encoder struct {
	buf     []byte
	members []member
}

// Pooled scratch larger than this is dropped rather than kept, so one huge
// value does not pin its memory for the life of the process.
const (
	maxPooledBuf     = 64 << 10
	maxPooledMembers = 1024
)

var encoders = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder() *encoder { return encoders.Get().(*encoder) }

func putEncoder(e *encoder) {
	if cap(e.buf) > maxPooledBuf {
		e.buf = nil
	}
	if cap(e.members) > maxPooledMembers {
		e.members = nil
	}
	encoders.Put(e)
}

// appendValue writes v, which is nested inside depth arrays and objects.
func (e *encoder) appendValue(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendString(dst, v), nil
	case json.Number:
		return appendNumber(dst, string(v))
	case float64:
		return appendFloat(dst, v, 64)
	case float32:
		return appendFloat(dst, float64(v), 32)
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case uintptr:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		if depth >= MaxDepth {
			return dst, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
		}
		return e.appendArray(dst, v, depth+1)
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		if depth >= MaxDepth {
			return dst, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
		}
		return e.appendObject(dst, v, depth+1)
	default:
		return dst, fmt.Errorf("%w: %T", ErrUnsupported, v)
	}
}

func (e *encoder) appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	dst = append(dst, '[')
	for i, v := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = e.appendValue(dst, v, depth); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

func (e *encoder) appendObject(dst []byte, m map[string]any, depth int) ([]byte, error) {
	// The members of every object on the current path share e.members: this
	// object's are the tail from start, and nested objects push theirs past
	// it and truncate back when done. A nested append that reallocates leaves
	// this object's view on the old array, which stays intact.
	start := len(e.members)
	replaced := false
	for k, v := range m {
		if !utf8.ValidString(k) {
			k = toValidUTF8(k)
			replaced = true
		}
		e.members = append(e.members, member{name: k, value: v})
	}
	ms := e.members[start:]
	dst, err := e.writeMembers(dst, ms, replaced, depth)
	// Drop the references so the pool does not keep the caller's values
	// alive.
	clear(ms)
	e.members = e.members[:start]
	return dst, err
}

// compareMembers orders members by name, as compareUTF16 does.
func compareMembers(a, b member) int { return compareUTF16(a.name, b.name) }

// writeMembers sorts ms and writes them as an object.
func (e *encoder) writeMembers(dst []byte, ms []member, replaced bool, depth int) ([]byte, error) {
	slices.SortFunc(ms, compareMembers)
	if replaced {
		// Distinct map keys can only collide once invalid bytes are replaced.
		for i := 1; i < len(ms); i++ {
			if ms[i-1].name == ms[i].name {
				return dst, fmt.Errorf("%w: two keys read %q once invalid UTF-8 is replaced", ErrDuplicateKey, ms[i].name)
			}
		}
	}

	dst = append(dst, '{')
	for i := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, ms[i].name)
		dst = append(dst, ':')
		var err error
		if dst, err = e.appendValue(dst, ms[i].value, depth); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// compareUTF16 orders valid UTF-8 strings as RFC 8785 orders member names: by
// their UTF-16 code units. UTF-8 byte order is code point order, which agrees
// with UTF-16 order except that a character above U+FFFF (a surrogate pair,
// units 0xD800-0xDBFF first) sorts before one in U+E000-U+FFFF. In UTF-8 the
// former start with a byte 0xF0-0xF4 and the latter with 0xEE or 0xEF, and
// where two valid strings first differ both bytes start a character unless
// they are continuation bytes of characters with the same lead byte, so the
// first differing byte decides.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		switch {
		case x >= 0xF0 && (y == 0xEE || y == 0xEF):
			return -1
		case y >= 0xF0 && (x == 0xEE || x == 0xEF):
			return 1
		case x < y:
			return -1
		default:
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string in canonical form.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
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
			case '\t':
				dst = append(dst, '\\', 't')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\r':
				dst = append(dst, '\\', 'r')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// toValidUTF8 replaces each byte that is not part of valid UTF-8 with U+FFFD,
// one replacement per byte as appendString and encoding/json do
// (strings.ToValidUTF8 would merge a run of them into one).
func toValidUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}
