package boundary

import (
	"encoding/json"
	"maps"
	"slices"
)

// AttachRefs names the rows that markers stand in for. It walks original, the
// tree given to Bound, and bounded, what Bound answered, side by side at the
// top level: array index with array index, object key with object key. That
// pairing is sound because bounding replaces in place and only ever cuts an
// array's tail. For each top-level item whose bounded form is, or contains, a
// marker without a ref, the marker gains
// "ref": {"kind": itemKind, "id": <the original item's id>}.
//
// A ref is added only when itemKind is set and the original item is an
// object with a non-empty "id" that is a string or a number. Anything else
// would be a guess, and a ref that resolves to nothing cannot be told apart
// from a row the caller may not see.
//
// The result is a new tree where it differs; markers and other values shared
// with the inputs are not modified.
func AttachRefs(original, bounded any, itemKind string) any {
	out, _ := attachRefs(original, bounded, itemKind)
	return out
}

func attachRefs(original, bounded any, itemKind string) (any, bool) {
	if itemKind == "" {
		return bounded, false
	}
	kind, _ := cleanString(itemKind)
	switch b := bounded.(type) {
	case []any:
		o, ok := original.([]any)
		if !ok {
			return bounded, false
		}
		var out []any
		for i, item := range b {
			if i >= len(o) {
				break
			}
			id, ok := itemID(o[i])
			if !ok {
				continue
			}
			named, changed := withRef(item, kind, id)
			if !changed {
				continue
			}
			if out == nil {
				out = slices.Clone(b)
			}
			out[i] = named
		}
		if out == nil {
			return bounded, false
		}
		return out, true
	case map[string]any:
		if IsMarker(b) {
			// The whole answer was replaced; it is not an item of
			// itself.
			return bounded, false
		}
		o, ok := original.(map[string]any)
		if !ok {
			return bounded, false
		}
		var out map[string]any
		for k, item := range b {
			id, ok := itemID(o[k])
			if !ok {
				continue
			}
			named, changed := withRef(item, kind, id)
			if !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(b)
			}
			out[k] = named
		}
		if out == nil {
			return bounded, false
		}
		return out, true
	}
	return bounded, false
}

// itemID returns the text of item's "id" when item is an object whose id is
// a non-empty string or a number.
func itemID(item any) (string, bool) {
	m, ok := item.(map[string]any)
	if !ok {
		return "", false
	}
	switch id := m["id"].(type) {
	case string:
		return id, id != ""
	case json.Number:
		return string(id), id != ""
	}
	return "", false
}

// withRef returns v with a ref to (kind, id) in every marker within it that
// has none, copying only what changes.
func withRef(v any, kind, id string) (any, bool) {
	if IsMarker(v) {
		inner := v.(map[string]any)[MarkerKey].(map[string]any)
		if _, has := inner["ref"]; has {
			return v, false
		}
		named := make(map[string]any, len(inner)+1)
		for k, x := range inner {
			named[k] = x
		}
		named["ref"] = refValue(kind, id)
		return map[string]any{MarkerKey: named}, true
	}
	switch t := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, x := range t {
			nx, changed := withRef(x, kind, id)
			if !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(t)
			}
			out[k] = nx
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, x := range t {
			nx, changed := withRef(x, kind, id)
			if changed && out == nil {
				out = slices.Clone(t)
			}
			if out != nil {
				out[i] = nx
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}
