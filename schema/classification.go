package schema

import (
	"fmt"
	"slices"
)

// ClassificationKeyword marks a property as holding data of a class the
// organization must be able to account for: "x-classification": "pii",
// or a list of classes ("x-classification": ["pii", "financial"]). The
// validator accepts it as an annotation; the audit trail records which
// classified fields a call carried, so "every call that touched personal
// data" is answered from the trail alone.
const ClassificationKeyword = "x-classification"

// Bounds of the classes one mark names: a class is a short word, and a
// field belongs to a few at most.
const (
	maxClasses     = 8
	maxClassLength = 64
)

// Classified is one field the input schema classifies: its pointer, in
// Sensitive's form ("/customer/email", "/cards/*/number"), and its
// classes, sorted.
type Classified struct {
	Path    string
	Classes []string
	// at is Path parsed once, for Touched.
	at Pointer
}

// Classified answers the fields the schema classifies, sorted by path; nil
// when it classifies none.
func (s *Schema) Classified() []Classified { return s.classified }

// Touched answers the pointers of the classified fields args carries (a
// value present at the field, in any element of an array at "*"), sorted,
// and the distinct classes among them, sorted. A schema that classifies
// nothing answers nil, nil without walking args or allocating.
func (s *Schema) Touched(args any) (paths, classes []string) {
	for i := range s.classified {
		c := &s.classified[i]
		present := false
		c.at.Each(args, func(any) bool {
			present = true
			return false
		})
		if !present {
			continue
		}
		paths = append(paths, c.Path)
		classes = append(classes, c.Classes...)
	}
	if len(classes) > 1 {
		slices.Sort(classes)
		classes = slices.Compact(classes)
	}
	return paths, classes
}

// readClassification reads the x-classification marks of doc, walked the
// way Sensitive walks x-sensitive, and refuses a mark that is not a class
// or a list of classes: a typo there would silently take a field out of
// the organization's accounting.
func readClassification(doc any) ([]Classified, error) {
	byPath := map[string][]string{}
	if err := walkClassification(doc, "", 0, byPath); err != nil {
		return nil, err
	}
	if len(byPath) == 0 {
		return nil, nil
	}
	out := make([]Classified, 0, len(byPath))
	for p, cs := range byPath {
		slices.Sort(cs)
		cs = slices.Compact(cs)
		out = append(out, Classified{Path: p, Classes: cs, at: ParsePointer(p)})
	}
	slices.SortFunc(out, func(a, b Classified) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	return out, nil
}

func walkClassification(v any, at string, depth int, out map[string][]string) error {
	m, ok := v.(map[string]any)
	if !ok || depth > maxSensitiveDepth {
		return nil
	}
	if mark, present := m[ClassificationKeyword]; present {
		cs, err := classes(mark)
		if err != nil {
			where := at
			if where == "" {
				where = "the schema's root"
			}
			return &CompileError{Pointer: at, Reason: ErrInvalid, Detail: fmt.Sprintf("%s at %s: %v", ClassificationKeyword, where, err)}
		}
		if at != "" {
			out[at] = append(out[at], cs...)
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for name, sub := range props {
			if err := walkClassification(sub, at+"/"+escape(name), depth+1, out); err != nil {
				return err
			}
		}
	}
	if items, ok := m["items"].(map[string]any); ok {
		if err := walkClassification(items, at+"/*", depth+1, out); err != nil {
			return err
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[k].([]any); ok {
			for _, sub := range subs {
				if err := walkClassification(sub, at, depth+1, out); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// classes reads one mark: a class, or a non-empty list of them.
func classes(mark any) ([]string, error) {
	switch x := mark.(type) {
	case string:
		if err := checkClass(x); err != nil {
			return nil, err
		}
		return []string{x}, nil
	case []any:
		if len(x) == 0 || len(x) > maxClasses {
			return nil, fmt.Errorf("a list of 1 to %d classes, got %d", maxClasses, len(x))
		}
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("a class is a string, got %T", e)
			}
			if err := checkClass(s); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf(`a class ("pii") or a list of classes, got %T`, mark)
}

// checkClass accepts a class name: lowercase letters, digits, '_' and
// '-', starting with a letter, at most maxClassLength bytes.
func checkClass(s string) error {
	if s == "" || len(s) > maxClassLength {
		return fmt.Errorf("a class name of 1 to %d bytes, got %q", maxClassLength, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z':
		case i > 0 && ('0' <= c && c <= '9' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("class %q: lowercase letters, digits, '_' and '-', starting with a letter", s)
		}
	}
	return nil
}
