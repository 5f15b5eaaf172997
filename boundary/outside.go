package boundary

import (
	"maps"
	"strings"
)

// fences are the outside-text fields of a tool's answers, parsed once per
// answer from Spec.OutsideText.
type fences struct {
	source string
	fields []fenceField
}

// fenceField is one field: its pointer as declared (named in the fence)
// and its tokens.
type fenceField struct {
	pointer string
	toks    []string
}

// fences parses the spec's outside-text pointers.
func (s *Spec) fences() fences {
	if len(s.OutsideText) == 0 {
		return fences{}
	}
	f := fences{source: s.Source, fields: make([]fenceField, 0, len(s.OutsideText))}
	for _, p := range s.OutsideText {
		var toks []string
		if p != "" {
			toks = strings.Split(strings.TrimPrefix(p, "/"), "/")
			for i, t := range toks {
				if strings.Contains(t, "~") {
					toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
				}
			}
		}
		f.fields = append(f.fields, fenceField{pointer: p, toks: toks})
	}
	return f
}

// apply fences every string v holds at the fields; item says v is one
// element of an array answer, which the fields' leading "/*" stands for.
// v is not modified: what changes is copied along its path.
func (f fences) apply(v any, item bool) any {
	for _, fld := range f.fields {
		toks := fld.toks
		if item {
			if len(toks) == 0 || toks[0] != "*" {
				continue
			}
			toks = toks[1:]
		}
		v = fenceAt(v, toks, f.label(fld.pointer))
	}
	return v
}

// label is what a fence says its text is: the tool's field.
func (f fences) label(pointer string) string {
	if pointer == "" {
		pointer = "/"
	}
	if f.source == "" {
		return "outside text at " + pointer
	}
	return f.source + " " + pointer
}

// fenceAt answers v with every non-empty string at toks fenced, every
// element of an array standing at "*". A value of another type there is
// left as it is: the output schema said it is a string, and it was
// checked before the boundary.
func fenceAt(v any, toks []string, source string) any {
	if len(toks) == 0 {
		if s, ok := v.(string); ok && s != "" {
			return Fence(source, s)
		}
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		if sub, ok := x[toks[0]]; ok {
			out := maps.Clone(x)
			out[toks[0]] = fenceAt(sub, toks[1:], source)
			return out
		}
	case []any:
		if toks[0] == "*" {
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = fenceAt(e, toks[1:], source)
			}
			return out
		}
	}
	return v
}
