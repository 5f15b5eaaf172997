package schema

import "strings"

// Holds reports whether args holds a value other than null at pointer,
// written as Sensitive writes them ("/*" standing for any element).
func Holds(args any, pointer string) bool {
	held := false
	valuesAt(args, tokens(pointer), func(v any) bool {
		held = v != nil
		return !held
	})
	return held
}

// tokens splits a pointer, written as Sensitive writes them, into its
// tokens, still escaped.
func tokens(pointer string) []string {
	return strings.Split(strings.TrimPrefix(pointer, "/"), "/")
}

// valuesAt calls yield with each value v holds at the pointer's tokens,
// every element of an array standing at "*", until yield answers false;
// it answers false when yield stopped it.
func valuesAt(v any, toks []string, yield func(any) bool) bool {
	if len(toks) == 0 {
		return yield(v)
	}
	switch x := v.(type) {
	case map[string]any:
		if sub, ok := x[unescape(toks[0])]; ok {
			return valuesAt(sub, toks[1:], yield)
		}
	case []any:
		if toks[0] == "*" {
			for _, e := range x {
				if !valuesAt(e, toks[1:], yield) {
					return false
				}
			}
		}
	}
	return true
}
