package boundary

import "maps"

// EscapeKeys returns the plain tree v with every key EscapeKey renames
// renamed, at any depth: the renaming Normalize does in its walk, alone,
// for the tests that check it apart from normalising. Subtrees without
// such a key are shared with v, not copied.
func EscapeKeys(v any) any {
	out, _ := escapeKeys(v)
	return out
}

func escapeKeys(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		var out map[string]any
		var renamed []renamedEntry
		for k, val := range t {
			nk, kchanged := EscapeKey(k)
			nv, vchanged := escapeKeys(val)
			if !kchanged && !vchanged {
				continue
			}
			if out == nil {
				out = maps.Clone(t)
			}
			if kchanged {
				renamed = append(renamed, renamedEntry{from: k, to: nk, value: nv})
				continue
			}
			out[k] = nv
		}
		if out == nil {
			return v, false
		}
		putRenamed(out, renamed)
		return out, true
	case []any:
		var out []any
		for i, el := range t {
			ne, changed := escapeKeys(el)
			if changed && out == nil {
				out = make([]any, len(t))
				copy(out, t)
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
	return v, false
}
