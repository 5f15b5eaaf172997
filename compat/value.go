package compat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/canonical"

	"github.com/toolplane/toolplane/schema"
)

// Bounds on one schema document. They sit well above what the registry
// accepts (256 KiB, 32 levels), so they never refuse a registered schema,
// and they keep the walk's pointers and paths, which grow with depth, from
// costing memory quadratic in an arbitrary input.
const (
	maxSchemaBytes = 4 << 20
	maxSchemaDepth = 256
)

// decodeSchema reads one schema document with exact numbers. An absent
// schema (no bytes, or null) is read as true, the schema that constrains
// nothing: that is what a definition without one promises.
func decodeSchema(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true, nil
	}
	if len(raw) > maxSchemaBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooComplex, len(raw), maxSchemaBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not JSON: text follows the schema")
	}
	switch v.(type) {
	case nil:
		return true, nil
	case map[string]any, bool:
		if depth(v, maxSchemaDepth+1) > maxSchemaDepth {
			return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrTooComplex, maxSchemaDepth)
		}
		return v, nil
	}
	return nil, errors.New("not a JSON Schema: a schema is an object or a boolean")
}

// depth answers how deeply v nests objects and arrays, counting no
// further than limit.
func depth(v any, limit int) int {
	if limit <= 0 {
		return 0
	}
	best := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			best = max(best, depth(e, limit-1))
		}
	case []any:
		for _, e := range x {
			best = max(best, depth(e, limit-1))
		}
	default:
		return 0
	}
	return best + 1
}

// equalJSON compares decoded JSON values as JSON Schema does: numbers by
// value (1 and 1.0 are equal), objects regardless of member order. It
// recurses itself rather than going through canonical.Marshal so that no
// depth limit can make a value unequal to itself.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numberKey(x) == numberKey(y)
	default:
		return a == b
	}
}

// numberKey is the exact decimal form of n, so that numbers compare by value
// without passing through float64.
func numberKey(n json.Number) string {
	b, err := canonical.Marshal(n)
	if err != nil {
		return string(n)
	}
	return string(b)
}

// valueKey is a set key for an enum value: equal for values equalJSON calls
// equal. The fallback only matters beyond canonical's depth limit, where
// set membership may then miss an equal value written differently; that
// can only report a spurious change, never hide one.
func valueKey(v any) string {
	if b, err := canonical.Marshal(v); err == nil {
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// compareNumbers orders a and b. ok is false when float64 cannot tell
// them apart although their exact values differ: the caller then treats
// the change as undecided rather than guessing.
func compareNumbers(a, b json.Number) (c int, ok bool) {
	if numberKey(a) == numberKey(b) {
		return 0, true
	}
	fa, _ := strconv.ParseFloat(string(a), 64)
	fb, _ := strconv.ParseFloat(string(b), 64)
	switch {
	case fa < fb:
		return -1, true
	case fa > fb:
		return 1, true
	}
	return 0, false
}

// divides reports whether b divides a (a/b is a whole number), as far as
// float64 can tell: used for multipleOf, where exactness rarely matters and
// a wrong "no" only makes the verdict stricter.
func divides(a, b json.Number) bool {
	fa, err1 := strconv.ParseFloat(string(a), 64)
	fb, err2 := strconv.ParseFloat(string(b), 64)
	if err1 != nil || err2 != nil || fb == 0 {
		return false
	}
	q := fa / fb
	if math.IsInf(q, 0) || math.IsNaN(q) {
		return false
	}
	return math.Abs(q-math.Round(q)) < 1e-9*math.Max(1, math.Abs(q))
}

// show renders a value for a Detail: compact JSON, cut short when long so
// that one huge enum value does not swamp the message.
func show(v any) string {
	s := valueKey(v)
	const limit = 80
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}

// showList renders up to a handful of values, then a count of the rest.
func showList(vs []any) string {
	const limit = 8
	parts := make([]string, 0, min(len(vs), limit))
	for i, v := range vs {
		if i == limit {
			break
		}
		parts = append(parts, show(v))
	}
	s := strings.Join(parts, ", ")
	if len(vs) > limit {
		s += fmt.Sprintf(" and %d more", len(vs)-limit)
	}
	return s
}

// stringSet reads a JSON array of strings. ok is false for anything else.
func stringSet(v any) (map[string]bool, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	s := make(map[string]bool, len(arr))
	for _, x := range arr {
		str, ok := x.(string)
		if !ok {
			return nil, false
		}
		s[str] = true
	}
	return s, true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// escape makes a property name one JSON pointer token.
func escape(s string) string { return schema.EscapeToken(s) }

// joinPath appends a field name to a caller-facing path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
