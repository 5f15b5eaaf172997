package boundary

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolplane/toolplane/internal/jsondec"
)

// maxDepth is how many levels deep Normalize follows containers and
// pointers. No answer a model can use nests this deep, so a deeper value is a
// mistake or a cycle, and walking it further would only cost stack.
const maxDepth = 64

// The strings that stand in for a value with no JSON form. They sit where the
// value was, so a model can tell that something was there and what kind of
// thing it was, instead of the whole answer failing.
const (
	unrenderableFloat  = "<unrenderable float>"
	unrenderableNumber = "<unrenderable number>"
	unrenderableJSON   = "<unrenderable json>"
	unrenderableBytes  = "<unrenderable bytes>"
	unrenderableMap    = "<unrenderable map>"
	unrenderableDepth  = "<unrenderable depth>"
	unrenderableCycle  = "<unrenderable cycle>"
)

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// Normalize rewrites any Go value into a plain JSON tree: nil, bool, string,
// json.Number, []any or map[string]any. It never fails; a value with no JSON
// form becomes a string naming what it was ("<unrenderable chan int>"), so one
// odd field cannot take down an answer.
//
// Strings lose every control character except newline and tab, and invalid
// UTF-8 bytes become U+FFFD, in keys as well as values. Numbers become
// json.Number in the form encoding/json writes. A struct, or a value with its
// own MarshalJSON or MarshalText, is rendered the way encoding/json renders
// it; if that fails the value becomes "<unrenderable TYPE>". A nil slice or
// map becomes an empty one, so an empty collection still reads as a
// collection. A value nested more than 64 levels deep, and a container met
// again inside itself, is replaced by a string saying so.
//
// Parts of v that are already plain are returned as they are, without
// copying, so a caller must not modify v after handing it over.
func Normalize(v any) any {
	var n normalizer
	out, _ := n.value(v, 0)
	return out
}

// normalizer carries the containers on the path from the root to the value
// being walked. A container met again on its own path is a cycle; the depth
// bound alone would stop it, but only after expanding every branch of the
// cycle 64 times over. The path lives in a fixed array: it can never be
// longer than the depth bound, and a plain tree then normalises without
// allocating.
type normalizer struct {
	path [maxDepth + 1]visit
	len  int
	// redact also redacts (see Redact) and renames the keys EscapeKey
	// renames, so that Apply gets EscapeKeys(Redact(Normalize(v))) from
	// one walk instead of three.
	redact bool
}

// visit identifies a container by where its data lives and, for slices, how
// long it is: a slice and a shorter slice of it are different values.
type visit struct {
	ptr uintptr
	n   int
}

func (n *normalizer) enter(p visit) bool {
	if n.len == len(n.path) {
		// Unreachable: each container on the path sits one level deeper
		// than the last, and none is entered below maxDepth. Refusing is
		// still better than a panic in a function that must not fail.
		return false
	}
	for _, q := range n.path[:n.len] {
		if q == p {
			return false
		}
	}
	n.path[n.len] = p
	n.len++
	return true
}

func (n *normalizer) leave() { n.len-- }

// value normalises v and reports whether the result differs from v, which
// lets containers that are already plain be returned without a copy.
func (n *normalizer) value(v any, depth int) (any, bool) {
	if depth > maxDepth {
		return unrenderableDepth, true
	}
	switch t := v.(type) {
	case nil, bool:
		return v, false
	case string:
		s, changed := cleanString(t)
		if n.redact {
			var redacted bool
			if s, redacted = RedactSecrets(s); redacted {
				changed = true
			}
		}
		if !changed {
			return v, false
		}
		return s, true
	case json.Number:
		if validNumber(string(t)) {
			return v, false
		}
		return unrenderableNumber, true
	case float64:
		return floatValue(t, 64), true
	case float32:
		return floatValue(float64(t), 32), true
	case int:
		return json.Number(strconv.FormatInt(int64(t), 10)), true
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), true
	case int32:
		return json.Number(strconv.FormatInt(int64(t), 10)), true
	case uint64:
		return json.Number(strconv.FormatUint(t, 10)), true
	case map[string]any:
		return n.object(t, depth)
	case []any:
		return n.array(v, t, depth)
	case time.Time:
		return formatTime(t), true
	case *time.Time:
		if t == nil {
			return nil, true
		}
		return formatTime(*t), true
	case json.RawMessage:
		if t == nil {
			return nil, true
		}
		return n.decoded(t, depth, unrenderableJSON), true
	case []byte:
		return unrenderableBytes, true
	}
	return n.reflectValue(reflect.ValueOf(v), depth), true
}

// object normalises a map[string]any, copying it only once something in it
// has to change.
func (n *normalizer) object(m map[string]any, depth int) (any, bool) {
	if len(m) == 0 {
		if m == nil {
			return map[string]any{}, true
		}
		return m, false
	}
	if !n.enter(visit{ptr: reflect.ValueOf(m).Pointer()}) {
		return unrenderableCycle, true
	}
	defer n.leave()
	var b objectBuilder
	var renamed []renamedEntry
	for k, val := range m {
		nk, kchanged := cleanString(k)
		escaped := false
		if n.redact {
			if ek, ok := EscapeKey(nk); ok {
				nk, kchanged, escaped = ek, true, true
			}
		}
		var nv any
		var vchanged bool
		if n.redact && IsCredentialKey(nk) {
			nv = Redacted
			s, ok := val.(string)
			vchanged = !ok || s != Redacted
		} else {
			nv, vchanged = n.value(val, depth+1)
		}
		if !vchanged && !kchanged {
			continue
		}
		if b.out == nil {
			// Entries not yet visited are copied as they are and
			// overwritten when the loop reaches them.
			b.out = maps.Clone(m)
		}
		if !kchanged {
			b.out[k] = nv
			continue
		}
		if escaped {
			// Put once every key has been seen: the new name may be
			// a key not yet visited, itself to be renamed.
			renamed = append(renamed, renamedEntry{from: k, to: nk, value: nv})
			continue
		}
		delete(b.out, k)
		b.put(nk, k, true, nv)
	}
	if b.out == nil {
		return m, false
	}
	for _, r := range renamed {
		delete(b.out, r.from)
	}
	for _, r := range renamed {
		b.put(r.to, r.from, true, r.value)
	}
	return b.out, true
}

// array normalises s, which v holds, copying it only once an element has to
// change. v is passed along so that returning or inspecting the slice does
// not box it into a new interface value.
func (n *normalizer) array(v any, s []any, depth int) (any, bool) {
	if len(s) == 0 {
		if s == nil {
			return []any{}, true
		}
		return v, false
	}
	if !n.enter(visit{ptr: reflect.ValueOf(v).Pointer(), n: len(s)}) {
		return unrenderableCycle, true
	}
	defer n.leave()
	var out []any
	for i, e := range s {
		ne, changed := n.value(e, depth+1)
		if changed && out == nil {
			out = make([]any, len(s))
			copy(out, s[:i])
		}
		if out != nil {
			out[i] = ne
		}
	}
	if out == nil {
		return v, false
	}
	return out, true
}

// reflectValue handles everything the type switch in value does not name.
func (n *normalizer) reflectValue(rv reflect.Value, depth int) any {
	if depth > maxDepth {
		return unrenderableDepth
	}
	if !rv.IsValid() {
		return nil
	}
	t := rv.Type()
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return nil
		}
		// A method with a pointer receiver is only reachable through the
		// pointer; any other is handled once the pointer is followed.
		if marshals(t) && !marshals(t.Elem()) {
			return n.viaJSON(rv, depth)
		}
		return n.reflectValue(rv.Elem(), depth+1)
	case reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return n.reflectValue(rv.Elem(), depth)
	}
	if t == timeType {
		return formatTime(rv.Interface().(time.Time))
	}
	if marshals(t) {
		return n.viaJSON(rv, depth)
	}
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool()
	case reflect.String:
		s, _ := cleanString(rv.String())
		if n.redact {
			s, _ = RedactSecrets(s)
		}
		return s
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return json.Number(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32:
		return floatValue(rv.Float(), 32)
	case reflect.Float64:
		return floatValue(rv.Float(), 64)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return unrenderableBytes
		}
		if rv.Len() == 0 {
			return []any{}
		}
		if !n.enter(visit{ptr: rv.Pointer(), n: rv.Len()}) {
			return unrenderableCycle
		}
		defer n.leave()
		return n.reflectList(rv, depth)
	case reflect.Array:
		return n.reflectList(rv, depth)
	case reflect.Map:
		return n.reflectMap(rv, depth)
	case reflect.Struct:
		return n.viaJSON(rv, depth)
	}
	// Channels, functions, complex numbers and unsafe pointers have no JSON
	// form at all.
	return unrenderableType(t)
}

func (n *normalizer) reflectList(rv reflect.Value, depth int) any {
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = n.reflectValue(rv.Index(i), depth+1)
	}
	return out
}

func (n *normalizer) reflectMap(rv reflect.Value, depth int) any {
	if !nameableKey(rv.Type().Key()) {
		return unrenderableMap
	}
	if rv.Len() == 0 {
		return map[string]any{}
	}
	if !n.enter(visit{ptr: rv.Pointer()}) {
		return unrenderableCycle
	}
	defer n.leave()
	b := objectBuilder{out: make(map[string]any, rv.Len())}
	it := rv.MapRange()
	for it.Next() {
		raw, ok := keyName(it.Key())
		if !ok {
			return unrenderableMap
		}
		name, cleaned := cleanString(raw)
		if n.redact {
			if ek, ok := EscapeKey(name); ok {
				name, cleaned = ek, true
			}
		}
		if n.redact && IsCredentialKey(name) {
			b.put(name, raw, cleaned, Redacted)
			continue
		}
		b.put(name, raw, cleaned, n.reflectValue(it.Value(), depth+1))
	}
	return b.out
}

// viaJSON renders rv the way encoding/json does and normalises the result,
// so a struct's field names, omitempty and custom marshalers all apply.
func (n *normalizer) viaJSON(rv reflect.Value, depth int) any {
	b, err := marshal(rv.Interface())
	if err != nil {
		return unrenderableType(rv.Type())
	}
	return n.decoded(b, depth, unrenderableType(rv.Type()))
}

// decoded normalises the JSON text b, answering failed when b is not exactly
// one JSON value.
func (n *normalizer) decoded(b []byte, depth int, failed string) any {
	v, err := decodeJSON(b)
	if err != nil {
		return failed
	}
	out, _ := n.value(v, depth)
	return out
}

// objectBuilder fills a map whose keys may collide once they are cleaned or
// named ("a\x00" and "a"; the int 1 and the string "1"). Map iteration order
// is random, so the winner of a collision is chosen by a fixed rule: a key
// that needed no cleaning beats one that did, then the bytewise smaller raw
// key wins, then the bytewise smaller encoded value.
type objectBuilder struct {
	out map[string]any
	// raws records the raw key behind each cleaned name; a name absent here
	// came from a key that needed no cleaning.
	raws map[string]string
}

func (b *objectBuilder) put(name, raw string, cleaned bool, v any) {
	if old, taken := b.out[name]; taken {
		oldRaw, oldCleaned := name, false
		if r, ok := b.raws[name]; ok {
			oldRaw, oldCleaned = r, true
		}
		if !keyWins(raw, cleaned, v, oldRaw, oldCleaned, old) {
			return
		}
	}
	b.out[name] = v
	if cleaned {
		if b.raws == nil {
			b.raws = make(map[string]string)
		}
		b.raws[name] = raw
	} else {
		delete(b.raws, name)
	}
}

func keyWins(raw string, cleaned bool, v any, oldRaw string, oldCleaned bool, old any) bool {
	if cleaned != oldCleaned {
		return !cleaned
	}
	if raw != oldRaw {
		return raw < oldRaw
	}
	return bytes.Compare(Encode(nil, v), Encode(nil, old)) < 0
}

// nameableKey reports whether a map with keys of type t can have its keys
// written as JSON object names: strings, integers and text marshalers can;
// an interface key is decided per key.
func nameableKey(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Interface,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return t.Implements(textMarshalerType)
}

// keyName writes a map key as an object name, with the precedence
// encoding/json uses: a string kind first, then MarshalText, then integers.
func keyName(k reflect.Value) (string, bool) {
	if k.Kind() == reflect.Interface {
		if k.IsNil() {
			return "", false
		}
		k = k.Elem()
	}
	if k.Kind() == reflect.String {
		return k.String(), true
	}
	if k.Type().Implements(textMarshalerType) {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", true
		}
		b, err := marshalText(k.Interface().(encoding.TextMarshaler))
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), true
	}
	return "", false
}

func marshals(t reflect.Type) bool {
	return t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType)
}

func unrenderableType(t reflect.Type) string {
	s, _ := cleanString(t.String())
	return "<unrenderable " + s + ">"
}

// errMarshalPanic reports a marshaler that panicked. Handlers are outside
// this package's control, and a panic in one field must not end the call.
var errMarshalPanic = errors.New("marshaler panicked")

func marshal(v any) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w: %v", errMarshalPanic, r)
		}
	}()
	return json.Marshal(v)
}

func marshalText(m encoding.TextMarshaler) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w: %v", errMarshalPanic, r)
		}
	}()
	return m.MarshalText()
}

// errNotOneValue is decodeJSON's refusal of a text that is not exactly one
// JSON value.
var errNotOneValue = errors.New("decode json: not exactly one JSON value")

// decodeJSON decodes b, exactly one JSON value (white space may surround
// it), keeping numbers as json.Number so their text survives unchanged.
//
// jsondec.Value reads it as encoding/json's decoder would (UseNumber, the
// last of a repeated name winning, every string as encoding/json decodes
// it), with its names and plain strings parts of one copy of b rather than
// a copy each: a struct answer rendered through JSON was a dozen
// allocations of every call's result boundary. The copy lives as long as
// the normalised answer, which b's own size already bounds.
func decodeJSON(b []byte) (any, error) {
	v, ok := jsondec.Value(b)
	if !ok {
		return nil, errNotOneValue
	}
	return v, nil
}

// formatTime writes t as RFC 3339 with as many fractional digits as it needs,
// the form time.Time's own MarshalJSON uses, but without its failure for
// years outside 0..9999.
func formatTime(t time.Time) string {
	return t.Format(time.RFC3339Nano)
}

// floatValue renders f as encoding/json would. NaN and the infinities have no
// JSON form, so they become a string that says so.
func floatValue(f float64, bits int) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return unrenderableFloat
	}
	var buf [32]byte
	return json.Number(appendFloat(buf[:0], f, bits))
}

// appendFloat formats f the way encoding/json does: the shortest form that
// reads back as the same value, plain between 1e-6 and 1e21 and with an
// exponent outside that range.
func appendFloat(dst []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// Write e-07 as e-7, as encoding/json does.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// cleanString removes control characters other than newline and tab and
// replaces invalid UTF-8 with U+FFFD. It reports whether anything changed, so
// a clean string is returned without a copy.
func cleanString(s string) (string, bool) {
	for i := 0; i < len(s); {
		if i+8 <= len(s) && cleanWord(load64(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			// The ASCII control characters are below space, and DEL.
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				return cleanFrom(s, i), true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || isStripped(r) {
			return cleanFrom(s, i), true
		}
		i += size
	}
	return s, false
}

func cleanFrom(s string, i int) string {
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	// Ranging over a string yields U+FFFD for each invalid byte.
	for _, r := range s[i:] {
		if !isStripped(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isStripped reports whether r is a control character (Unicode category Cc)
// that a model should not read. Newline and tab carry layout and stay.
func isStripped(r rune) bool {
	return r != '\n' && r != '\t' && unicode.IsControl(r)
}

// validNumber reports whether s is a JSON number.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
