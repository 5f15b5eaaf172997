package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/toolplane/toolplane/policy"
)

// appendRecord appends the JSON of a recorded document, {"grants": grants,
// "request": r}, byte for byte as encoding/json writes it, and answers an
// error where encoding/json would. Every call records one, so the
// request's fixed shape is written field by field instead of found by
// reflection on every call; a value of a type it does not know (a float, a
// number to check, a text to escape) is written by encoding/json itself.
// TestAppendRecordWritesAsEncodingJSON fails when policy.Request gains a
// field this does not write.
func appendRecord(b []byte, grants string, r *policy.Request) ([]byte, error) {
	w := recordWriter{b: b}
	w.raw(`{"grants":`)
	w.text(grants)
	p := &r.Principal
	w.raw(`,"request":{"principal":{"agent":`)
	w.text(p.Agent)
	w.optional(`,"key":`, p.Key)
	w.raw(`,"roles":`)
	w.texts(p.Roles)
	w.optional(`,"team":`, p.Team)
	w.optional(`,"tenant":`, p.Tenant)
	w.raw(`,"attributes":`)
	w.object(p.Attributes, 0)
	w.raw(`}`)
	if u := r.User; u != nil {
		w.raw(`,"user":{"id":`)
		w.text(u.ID)
		w.raw(`,"roles":`)
		w.texts(u.Roles)
		w.raw(`,"groups":`)
		w.texts(u.Groups)
		w.optional(`,"manager":`, u.Manager)
		w.raw(`,"attributes":`)
		w.object(u.Attributes, 0)
		w.raw(`}`)
	}
	t := &r.Tool
	w.raw(`,"tool":{"name":`)
	w.text(t.Name)
	w.raw(`,"version":`)
	w.text(t.Version)
	w.raw(`,"effect":`)
	w.text(t.Effect)
	w.raw(`,"destructive":`)
	w.b = strconv.AppendBool(w.b, t.Destructive)
	w.raw(`,"read_only":`)
	w.b = strconv.AppendBool(w.b, t.ReadOnly)
	w.raw(`,"tags":`)
	w.texts(t.Tags)
	w.optional(`,"classification":`, t.Classification)
	w.optional(`,"owner":`, t.Owner)
	w.raw(`,"sensitive":`)
	w.texts(t.Sensitive)
	w.raw(`},"arguments":`)
	w.object(r.Arguments, 0)
	w.raw(`,"facts":`)
	w.object(r.Facts, 0)
	c := &r.Context
	w.raw(`,"context":{"time":`)
	w.time(c.Time)
	w.raw(`,"hour":`)
	w.b = strconv.AppendInt(w.b, int64(c.Hour), 10)
	w.raw(`,"weekday":`)
	w.b = strconv.AppendInt(w.b, int64(c.Weekday), 10)
	w.raw(`,"run_cost_cents":`)
	w.b = strconv.AppendInt(w.b, c.RunCostCents, 10)
	w.raw(`,"source":`)
	w.text(c.Source)
	w.raw(`}}}`)
	return w.b, w.err
}

// recordWriter appends a record's JSON to b. Its first error is kept and
// answered at the end; what is written after it does not matter, since a
// record that fails to encode is not kept.
type recordWriter struct {
	b   []byte
	err error
}

func (w *recordWriter) raw(s string) { w.b = append(w.b, s...) }

// optional writes name and s, as encoding/json writes an omitempty
// string: not at all when it is empty.
func (w *recordWriter) optional(name, s string) {
	if s != "" {
		w.raw(name)
		w.text(s)
	}
}

// text writes s as a JSON string. Text of plain printable ASCII with
// nothing to escape (names, versions, digests: almost all of a record) is
// written as it is; anything else is left to encoding/json, whose escaping
// (HTML characters, U+2028, invalid UTF-8) it must match.
func (w *recordWriter) text(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.json(s)
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

// texts writes ss as a JSON array of strings.
func (w *recordWriter) texts(ss []string) { array(w, ss, w.text) }

// array writes items as a JSON array, each by write; nil is null, as
// encoding/json writes a nil slice.
func array[T any](w *recordWriter, items []T, write func(T)) {
	if items == nil {
		w.raw("null")
		return
	}
	w.raw("[")
	for i, item := range items {
		if i > 0 {
			w.raw(",")
		}
		write(item)
	}
	w.raw("]")
}

// maxDepth is how deeply nested a value the writer writes itself; deeper,
// encoding/json writes the rest, and refuses a value that holds itself as
// it would have.
const maxDepth = 64

// object writes m, depth levels down, with its keys in order, as
// encoding/json writes a map; nil is null.
func (w *recordWriter) object(m map[string]any, depth int) {
	switch {
	case m == nil:
		w.raw("null")
		return
	case depth >= maxDepth:
		w.json(m)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.raw("{")
	for i, k := range keys {
		if i > 0 {
			w.raw(",")
		}
		w.text(k)
		w.raw(":")
		w.value(m[k], depth+1)
	}
	w.raw("}")
}

// value writes v, a value of the arguments, facts or attributes, depth
// levels down.
func (w *recordWriter) value(v any, depth int) {
	if depth >= maxDepth {
		w.json(v)
		return
	}
	switch x := v.(type) {
	case nil:
		w.raw("null")
	case string:
		w.text(x)
	case bool:
		w.b = strconv.AppendBool(w.b, x)
	case map[string]any:
		w.object(x, depth)
	case []string:
		w.texts(x)
	case []any:
		array(w, x, func(item any) { w.value(item, depth+1) })
	default:
		// Numbers (a json.Number is checked before it is written, a
		// float is formatted by encoding/json's own rule) and anything
		// else.
		w.json(v)
	}
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with the
// nanoseconds, quoted; its text never needs escaping), appended in place:
// through encoding/json, every record paid for boxing t, finding its
// marshaler by reflection, and checking and copying its text.
func (w *recordWriter) time(t time.Time) {
	if w.err != nil {
		return
	}
	b, err := t.AppendText(append(w.b, '"'))
	if err != nil {
		// A time RFC 3339 cannot hold (a year past 9999): encoding/json
		// refuses it, and so does the record.
		w.err = fmt.Errorf("the call's time: %w", err)
		return
	}
	w.b = append(b, '"')
}

// json writes what encoding/json writes for v.
func (w *recordWriter) json(v any) {
	if w.err != nil {
		return
	}
	text, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	w.b = append(w.b, text...)
}
