package schema

import (
	"slices"
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
		ParsePointer(p).Each(args, func(v any) bool {
			collectStrings(v, &out)
			return true
		})
	}
	return out
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

// Mask answers args with every value at the pointers paths (as Sensitive
// answers them) replaced by with, whatever its type: a number or a boolean
// there is as secret as text, though SensitiveValues leaves it out (it
// cannot be told apart where it was copied to). args itself is left as it
// was; what Mask does not change, the answer shares with it.
func Mask(args any, paths []string, with any) any {
	replace := func(any) any { return with }
	for _, p := range paths {
		args = ParsePointer(p).Rewrite(args, replace)
	}
	return args
}
