package schema

import "strings"

// Holds reports whether args holds a value other than null at pointer,
// written as Sensitive writes them ("/*" standing for any element).
func Holds(args any, pointer string) bool {
	return holdsAt(args, strings.Split(strings.TrimPrefix(pointer, "/"), "/"))
}

func holdsAt(v any, toks []string) bool {
	if len(toks) == 0 {
		return v != nil
	}
	switch x := v.(type) {
	case map[string]any:
		sub, ok := x[unescape(toks[0])]
		return ok && holdsAt(sub, toks[1:])
	case []any:
		if toks[0] != "*" {
			return false
		}
		for _, e := range x {
			if holdsAt(e, toks[1:]) {
				return true
			}
		}
	}
	return false
}
