package boundary

import (
	"github.com/toolplane/toolplane/schema"
)

// fences are the outside-text fields of a tool's answers, parsed once per
// answer from Spec.OutsideText.
type fences struct {
	source string
	fields []fenceField
	// all says every string is fenced, wherever it is (Spec.Partial).
	all bool
}

// fenceField is one field: its pointer as declared (named in the fence)
// and as parsed.
type fenceField struct {
	pointer string
	at      schema.Pointer
}

// fences parses the spec's outside-text pointers.
func (s *Spec) fences() fences {
	if len(s.OutsideText) == 0 {
		return fences{}
	}
	if s.Partial {
		return fences{source: s.Source, all: true}
	}
	f := fences{source: s.Source, fields: make([]fenceField, 0, len(s.OutsideText))}
	for _, p := range s.OutsideText {
		f.fields = append(f.fields, fenceField{pointer: p, at: schema.ParsePointer(p)})
	}
	return f
}

// apply fences every non-empty string v holds at the fields; item says v
// is one element of an array answer, which the fields' leading "/*"
// stands for. v is not modified: what changes is copied along its path.
// A value of another type at a field is left as it is: the output schema
// said it is a string, and it was checked before the boundary.
//
// With all set, every non-empty string v holds is fenced instead, at any
// depth, whether or not v is an item.
func (f fences) apply(v any, item bool) any {
	if f.all {
		return fenceAll(v, f.chunkLabel())
	}
	for _, fld := range f.fields {
		at := fld.at
		if item {
			if len(at) == 0 || at[0] != "*" {
				continue
			}
			at = at[1:]
		}
		label := f.label(fld.pointer)
		v = at.Rewrite(v, func(x any) any {
			if s, ok := x.(string); ok && s != "" {
				return Fence(label, s)
			}
			return x
		})
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

// chunkLabel is what a fence in a piece of an answer (Spec.Partial) says
// its text is: the tool's chunk, the field in the answer being unknown.
func (f fences) chunkLabel() string {
	if f.source == "" {
		return "outside text in a chunk"
	}
	return f.source + " chunk"
}

// fenceAll answers the plain tree v with every non-empty string in it
// fenced as label says, object keys kept. v is not modified: containers
// are copied. v comes from the normaliser, so its depth is bounded.
func fenceAll(v any, label string) any {
	switch x := v.(type) {
	case string:
		if x != "" {
			return Fence(label, x)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fenceAll(e, label)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fenceAll(e, label)
		}
		return out
	}
	return v
}
