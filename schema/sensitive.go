package schema

import (
	"slices"
	"strings"
)

// Sensitive answers the JSON pointers of the values the schema marks
// "x-sensitive": true, sorted: object members as "/name", every element of
// an array as "/*" ("/cards/*/number"). A value so marked is never shown
// where the arguments are recorded (a span, the resolved policy facts);
// a rule reads only where such values are, never the values.
func (s *Schema) Sensitive() []string { return s.sensitive }

// maxSensitiveDepth bounds the walk; a compiled schema is already bounded
// in depth, this only keeps the walk's own cost obvious.
const maxSensitiveDepth = 32

func sensitivePaths(doc any) []string {
	var out []string
	walkSensitive(doc, "", 0, &out)
	slices.Sort(out)
	return slices.Compact(out)
}

func walkSensitive(v any, at string, depth int, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || depth > maxSensitiveDepth {
		return
	}
	if b, _ := m["x-sensitive"].(bool); b && at != "" {
		*out = append(*out, at)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for name, sub := range props {
			walkSensitive(sub, at+"/"+escape(name), depth+1, out)
		}
	}
	if items, ok := m["items"].(map[string]any); ok {
		walkSensitive(items, at+"/*", depth+1, out)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[k].([]any); ok {
			for _, sub := range subs {
				walkSensitive(sub, at, depth+1, out)
			}
		}
	}
}

// SensitiveValues answers the string forms of the values args holds at the
// pointers paths (as Sensitive answers them): what a recorder must not
// show wherever it meets them. Numbers and booleans are left out (a
// "5000" fact is not the card number "5000"); so are empty strings.
func SensitiveValues(args any, paths []string) []string {
	var out []string
	for _, p := range paths {
		collectAt(args, strings.Split(strings.TrimPrefix(p, "/"), "/"), &out)
	}
	return out
}

func collectAt(v any, toks []string, out *[]string) {
	if len(toks) == 0 {
		collectStrings(v, out)
		return
	}
	tok := toks[0]
	switch x := v.(type) {
	case map[string]any:
		if sub, ok := x[unescape(tok)]; ok {
			collectAt(sub, toks[1:], out)
		}
	case []any:
		if tok == "*" {
			for _, e := range x {
				collectAt(e, toks[1:], out)
			}
		}
	}
}

// collectStrings gathers every non-empty string under v: a sensitive
// object is sensitive all through.
func collectStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		if x != "" {
			*out = append(*out, x)
		}
	case map[string]any:
		for _, e := range x {
			collectStrings(e, out)
		}
	case []any:
		for _, e := range x {
			collectStrings(e, out)
		}
	}
}

// ReplaceAt answers args with the value at each of the pointers paths (as
// Sensitive answers them) replaced by with, whatever its type: a number,
// a flag or a whole object marked x-sensitive is as secret as a string.
// args itself is left as it was; only the maps and arrays on the way to a
// replaced value are copied.
func ReplaceAt(args any, paths []string, with any) any {
	for _, p := range paths {
		args = replaceAt(args, strings.Split(strings.TrimPrefix(p, "/"), "/"), with)
	}
	return args
}

func replaceAt(v any, toks []string, with any) any {
	if len(toks) == 0 {
		return with
	}
	tok := toks[0]
	switch x := v.(type) {
	case map[string]any:
		name := unescape(tok)
		sub, ok := x[name]
		if !ok {
			return v
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		out[name] = replaceAt(sub, toks[1:], with)
		return out
	case []any:
		if tok != "*" {
			return v
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = replaceAt(e, toks[1:], with)
		}
		return out
	}
	return v
}
