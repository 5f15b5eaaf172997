package schema

import (
	"maps"
	"strings"
)

// Pointer is a JSON pointer into a value, parsed once: its reference
// tokens unescaped, a "*" token standing for every element of an array.
// It is the form of the pointers Sensitive and OutsideText answer; the
// pointer "" (a nil Pointer) is the whole value.
type Pointer []string

// ParsePointer parses p: "/a/*/b~1c" (tokens a, *, b/c), or "" for the
// whole value.
func ParsePointer(p string) Pointer {
	if p == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range toks {
		toks[i] = unescape(t)
	}
	return toks
}

// Rewrite answers v with each value p reaches replaced by what f answers
// for it. v is not modified: the objects and arrays along the way are
// copied, and what p does not reach is shared. A member v lacks, or a "*"
// at what is not an array, reaches nothing there.
func (p Pointer) Rewrite(v any, f func(any) any) any {
	if len(p) == 0 {
		return f(v)
	}
	switch x := v.(type) {
	case map[string]any:
		if sub, ok := x[p[0]]; ok {
			out := maps.Clone(x)
			out[p[0]] = p[1:].Rewrite(sub, f)
			return out
		}
	case []any:
		if p[0] == "*" {
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = p[1:].Rewrite(e, f)
			}
			return out
		}
	}
	return v
}

// Each calls yield with each value p reaches in v, every element of an
// array at "*", until yield answers false; it answers false when yield
// stopped it.
func (p Pointer) Each(v any, yield func(any) bool) bool {
	if len(p) == 0 {
		return yield(v)
	}
	switch x := v.(type) {
	case map[string]any:
		if sub, ok := x[p[0]]; ok {
			return p[1:].Each(sub, yield)
		}
	case []any:
		if p[0] == "*" {
			for _, e := range x {
				if !p[1:].Each(e, yield) {
					return false
				}
			}
		}
	}
	return true
}
