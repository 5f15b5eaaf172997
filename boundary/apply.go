package boundary

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"

	"github.com/toolplane/toolplane"
)

// Spec is what the boundary needs to know about a tool to shape its answers.
type Spec struct {
	// MaxResults keeps at most this many items of an array answer; zero or
	// less keeps all. It does not apply to any other answer.
	MaxResults int
	// MaxOutputBytes lowers the byte limit below PlatformLimit; zero or less
	// means PlatformLimit. See Limit.
	MaxOutputBytes int
	// ItemKind is the resource kind of one item of the answer. With it, a
	// marker that replaced part of an item names the item, by this kind and
	// the item's id; without it, markers carry no ref.
	ItemKind string
	// Untrusted marks answers that carry content from outside the platform;
	// it is copied to the answer's meta so the caller labels the content.
	Untrusted bool
	// OutsideText are the pointers of the answer's fields that hold text
	// from outside the platform (the output schema's x-outside-text, in
	// schema.Schema.OutsideText's form: "/*" for every element of an
	// array, "" for the whole answer). Each string there is fenced (see
	// Fence) before anything is bounded, whatever runs the tool, so a
	// model reads it as data however it was written. Source names the
	// tool in each fence.
	OutsideText []string
	Source      string
	// Partial says the value is a piece of an answer, not the answer: a
	// chunk a handler streamed while its call ran, of any shape and at
	// no known place in the answer, so OutsideText's pointers (paths in
	// the answer) cannot be matched against it. When OutsideText is not
	// empty, every non-empty string the piece holds is fenced instead,
	// object keys left as they are: a chunk may be an item of the
	// answer, one of its fields, or a progress line built from outside
	// text, and fencing every string is the only rule that never lets
	// such a value through unfenced. Object keys are left as an answer's
	// are (a key is a name, not fenced anywhere), and the chunk as a whole
	// is labelled untrusted. With no OutsideText, Partial changes nothing.
	Partial bool
}

// SpecFor returns the Spec a tool definition declares. A nil definition
// declares nothing and gets the platform defaults.
func SpecFor(d *toolplane.Definition) Spec {
	if d == nil {
		return Spec{}
	}
	return Spec{
		MaxResults:     d.MaxResults,
		MaxOutputBytes: d.MaxOutputBytes,
		ItemKind:       d.ItemKind,
		Untrusted:      d.Untrusted(),
	}
}

// Apply turns a handler's answer into the data a model reads and the meta
// that describes it, in the order the package documentation gives: normalise,
// redact and escape reserved keys, max_results, bound, name the dropped rows,
// bound again.
//
// meta.Truncated is true when max_results or either bound changed the
// answer. meta.Count, set only for an array answer, is the number of items
// the data holds: a marker standing in for an item counts, an item cut from
// the tail does not. The output schema is checked before Apply, not here.
//
// Apply does not modify out, but the data may share parts of out that were
// already plain, so the handler must not modify out afterwards.
func Apply(out any, spec Spec) (data any, meta toolplane.Meta) {
	limit := Limit(spec.MaxOutputBytes)
	var original, bounded any
	var truncated, changed bool
	n := normalizer{redact: true}
	fences := spec.fences()
	if length, src, ok := n.items(out); ok {
		src.fences = fences
		if spec.MaxResults > 0 && length > spec.MaxResults {
			length, truncated = spec.MaxResults, true
		}
		original, bounded, changed = boundItems(length, &n, src, limit)
	} else {
		original, _ = n.value(out, 0)
		original = fences.apply(original, false)
		if rows, ok := original.([]any); ok && spec.MaxResults > 0 && len(rows) > spec.MaxResults {
			original, truncated = rows[:spec.MaxResults:spec.MaxResults], true
		}
		bounded, changed = Bound(original, limit)
	}
	if changed {
		truncated = true
		named, _ := attachRefs(original, bounded, spec.ItemKind)
		bounded, _ = Bound(named, limit)
		// The second pass may have written markers of its own. Name them
		// too, but only if the names still fit: the limit comes first.
		if renamed, ok := attachRefs(original, bounded, spec.ItemKind); ok && Size(renamed) <= limit {
			bounded = renamed
		}
	}
	meta.Truncated = truncated
	meta.Untrusted = spec.Untrusted
	if rows, ok := bounded.([]any); ok {
		count := len(rows)
		meta.Count = &count
	}
	return bounded, meta
}

// items reports whether v is a non-empty array answer that Normalize would
// turn into []any item by item, and if so gives its length and the source
// that normalises and redacts item i as Normalize would in place.
//
// This is what lets Apply stop early. A list tool may return thousands of
// rows of which a model reads a few hundred; normalising an item can cost a
// json.Marshal, and none of that is needed for an item past the cut.
func (n *normalizer) items(v any) (int, itemSource, bool) {
	if a, ok := v.([]any); ok {
		if len(a) == 0 {
			return 0, itemSource{}, false
		}
		n.enter(visit{ptr: reflect.ValueOf(v).Pointer(), n: len(a)})
		return len(a), itemSource{a: a}, true
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || marshals(rv.Type()) {
		return 0, itemSource{}, false
	}
	switch rv.Kind() {
	case reflect.Slice:
		if rv.Len() == 0 || rv.Type().Elem().Kind() == reflect.Uint8 {
			return 0, itemSource{}, false
		}
		n.enter(visit{ptr: rv.Pointer(), n: rv.Len()})
	case reflect.Array:
		if rv.Len() == 0 {
			return 0, itemSource{}, false
		}
	default:
		return 0, itemSource{}, false
	}
	return rv.Len(), itemSource{rv: rv}, true
}

// itemSource is an array answer whose items are produced one at a time.
// It is not a closure over the normalizer, nor does it hold one, so that
// the normalizer (a kilobyte of path) stays on Apply's stack: the items
// reach the heap, and a pointer held beside them would go along.
type itemSource struct {
	a  []any         // the answer, when it is a []any
	rv reflect.Value // else the answer, a slice or an array
	// fences are the answer's outside-text fields, fenced in each item.
	fences fences
}

// item normalises, redacts and fences item i with n.
func (s itemSource) item(n *normalizer, i int) any {
	var e any
	if s.a != nil {
		e, _ = n.value(s.a[i], 1)
	} else {
		e = n.reflectValue(s.rv.Index(i), 1)
	}
	return s.fences.apply(e, true)
}

// boundItems is Bound for an array whose first length items n produces
// from src on demand. It answers the items it kept as they were before
// bounding (the part of the answer AttachRefs pairs with), the bounded
// array, and whether bounding changed anything. Items past the cut are
// never produced.
func boundItems(length int, n *normalizer, src itemSource, limit int) (original, bounded []any, changed bool) {
	var fill arrayFill
	fill.start(limit)
	var out []any // bounded, once it differs from original
	for i := range length {
		e := src.item(n, i)
		ne, replaced, ok := fill.add(e)
		if !ok {
			changed = true
			break
		}
		original = append(original, e)
		if replaced && out == nil {
			out = slices.Clone(original[:i])
		}
		if out != nil {
			out = append(out, ne)
		}
		changed = changed || replaced
	}
	if out == nil {
		out = original[:fill.n:fill.n]
	}
	return original, out, changed
}

// Render returns the JSON a model reads for r: an object with the fields and
// names of toolplane.Result's JSON form, leaving out what that form leaves
// out, and never Stop. Data is written with Encode, so the bytes rendered are
// the bytes that were bounded.
//
// The answer is written in a pooled buffer and copied out at its exact
// length: one allocation, and no walk of the data to size it beforehand.
func Render(r toolplane.Result) []byte {
	e := getEncoder()
	e.buf = e.render(e.buf[:0], r)
	out := bytes.Clone(e.buf)
	putEncoder(e)
	return out
}

// AppendRender appends Render's bytes for r to dst and returns the
// extended buffer: for a reader that only digests them (the audit
// trail's output hash), without Render's copy.
func AppendRender(dst []byte, r toolplane.Result) []byte {
	e := getEncoder()
	own := e.buf
	out := e.render(dst, r)
	// The pooled encoder keeps its own buffer, never the caller's.
	e.buf = own
	putEncoder(e)
	return out
}

// render writes r's rendering after dst, in the encoder's buffer.
func (e *encoder) render(dst []byte, r toolplane.Result) []byte {
	e.buf = append(dst, `{"ok":`...)
	e.buf = strconv.AppendBool(e.buf, r.OK)
	if r.Data != nil {
		e.buf = append(e.buf, `,"data":`...)
		e.value(r.Data)
	}
	if r.Error != nil {
		e.buf = append(e.buf, `,"error":`...)
		e.buf = appendJSON(e.buf, r.Error)
	}
	e.buf = append(e.buf, `,"meta":`...)
	e.buf = appendMeta(e.buf, &r.Meta)
	return append(e.buf, '}')
}

// appendMeta writes m as appendJSON does, field by field: every answer
// carries one, and encoding/json reached its fields through reflection
// (TestMetaMatchesEncodingJSON holds the two equal, a field added
// included).
func appendMeta(dst []byte, m *toolplane.Meta) []byte {
	dst = append(dst, '{')
	if m.Count != nil {
		dst = append(dst, `"count":`...)
		dst = strconv.AppendInt(dst, int64(*m.Count), 10)
		dst = append(dst, ',')
	}
	dst = append(dst, `"truncated":`...)
	dst = strconv.AppendBool(dst, m.Truncated)
	dst = append(dst, `,"untrusted":`...)
	dst = strconv.AppendBool(dst, m.Untrusted)
	if m.Replayed {
		dst = append(dst, `,"replayed":true`...)
	}
	if m.UsageID != "" {
		dst = append(dst, `,"usage_id":`...)
		dst = appendString(dst, m.UsageID)
	}
	if m.DeprecationWarning != "" {
		dst = append(dst, `,"deprecation_warning":`...)
		dst = appendString(dst, m.DeprecationWarning)
	}
	return append(dst, '}')
}

// appendJSON writes v with encoding/json, without HTML escaping to match
// Encode. The types rendered this way hold only strings, numbers and bools,
// so encoding cannot fail; if it ever does, the field says so rather than
// leaving the object broken.
func appendJSON(dst []byte, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return appendString(dst, unrenderableType(reflect.TypeOf(v)))
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
