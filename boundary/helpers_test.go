package boundary_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/boundary"
)

// tree decodes JSON text into a plain tree, numbers kept as json.Number.
func tree(t testing.TB, text string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", text, err)
	}
	return v
}

// stdEncode is what encoding/json writes for v with HTML escaping off, the
// reference Encode must match byte for byte on plain trees.
func stdEncode(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// rows builds n rows of eight fields, each about 200 bytes encoded.
func rows(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{
			"id":      fmt.Sprintf("p-%05d", i),
			"name":    fmt.Sprintf("Person Number %05d", i),
			"email":   fmt.Sprintf("person%05d@example.com", i),
			"stage":   "active",
			"score":   json.Number(fmt.Sprint(i * 7 % 1000)),
			"active":  i%2 == 0,
			"created": "2024-05-01T12:00:00Z",
			"notes":   "Met at the spring conference; follow up about the renewal.",
		}
	}
	return out
}

// walk calls fn on v and on every value nested in it.
func walk(v any, fn func(any)) {
	fn(v)
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			walk(e, fn)
		}
	case map[string]any:
		for _, e := range t {
			walk(e, fn)
		}
	}
}

// markers returns every object in v that holds the marker key.
func markers(v any) []map[string]any {
	var out []map[string]any
	walk(v, func(x any) {
		if m, ok := x.(map[string]any); ok {
			if _, has := m["__dropped__"]; has {
				out = append(out, m)
			}
		}
	})
	return out
}

// refOf returns the ref inside a marker, or nil.
func refOf(marker map[string]any) map[string]any {
	inner, _ := marker["__dropped__"].(map[string]any)
	ref, _ := inner["ref"].(map[string]any)
	return ref
}

// stepByStep runs the pipeline Apply documents one exported step at a time,
// on the whole answer. Apply takes shortcuts (one walk for normalising and
// redacting, items past the cut never normalised); its answers must not
// differ from these.
func stepByStep(out any, spec boundary.Spec) (any, bool) {
	data := boundary.EscapeKeys(boundary.Redact(boundary.Normalize(out)))
	truncated := false
	if rows, ok := data.([]any); ok && spec.MaxResults > 0 && len(rows) > spec.MaxResults {
		data, truncated = rows[:spec.MaxResults], true
	}
	limit := boundary.Limit(spec.MaxOutputBytes)
	bounded, changed := boundary.Bound(data, limit)
	if changed {
		truncated = true
		bounded, _ = boundary.Bound(boundary.AttachRefs(data, bounded, spec.ItemKind), limit)
		if again := boundary.AttachRefs(data, bounded, spec.ItemKind); boundary.Size(again) <= limit {
			bounded = again
		}
	}
	return bounded, truncated
}
