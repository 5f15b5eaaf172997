package schema

import (
	"fmt"
	"slices"
)

// OutsideTextKeyword marks a string field of an output schema whose value
// is text from outside the platform (a customer's message, a web page, an
// email, a ticket): "x-outside-text": true. The result boundary fences and
// labels every such value, whatever runs the tool. false says the field
// was considered and holds the platform's own text (an id, a status), which
// quiets lint's warning about undeclared free text.
const OutsideTextKeyword = "x-outside-text"

// OutsideText answers the JSON pointers of the values the schema marks
// "x-outside-text": true, sorted, in Sensitive's form: object members as
// "/name", every element of an array as "/*" ("/*/subject"); "" is the
// root, for a schema whose whole value is one string.
func (s *Schema) OutsideText() []string { return s.text.outside }

// DeclaresText reports whether the schema marks any field x-outside-text,
// true or false: its author said which of its strings come from outside.
func (s *Schema) DeclaresText() bool { return s.text.declared }

// OwnText answers the pointers of the string fields the schema marks
// "x-outside-text": false: the platform's own text, by its author's word.
func (s *Schema) OwnText() []string { return s.text.own }

// FreeText answers the pointers of the string fields the schema leaves
// unmarked that could hold any text: no enum, const, pattern or format
// constrains them, and no maxLength of at most MaxPlainText bytes. They
// are what `toolplane lint` asks a read tool's author to declare.
func (s *Schema) FreeText() []string { return s.text.free }

// MaxPlainText is the longest maxLength under which an unmarked string
// field is taken for a code or a name rather than free text.
const MaxPlainText = 64

// textMarks is what a schema says of the text its strings hold.
type textMarks struct {
	outside  []string
	own      []string
	free     []string
	declared bool
}

// readTextMarks reads the x-outside-text marks of doc, and refuses a mark
// the boundary could not honour: one that is not a boolean; one on a
// schema that is not a string's (an object or an array is not fenced, its
// strings are, each marked where it is); one on a string whose enum,
// const, pattern, format or maxLength its fenced form would break; and one
// the walk does not reach (under $defs, behind a $ref, in a not or an if),
// which would otherwise be silently ignored.
func readTextMarks(doc any) (textMarks, error) {
	var tm textMarks
	reached := map[string]bool{}
	if err := walkText(doc, "", "", 0, &tm, reached); err != nil {
		return tm, err
	}
	if err := unreachedMark(doc, "", false, reached); err != nil {
		return tm, err
	}
	slices.Sort(tm.outside)
	tm.outside = slices.Compact(tm.outside)
	slices.Sort(tm.free)
	tm.free = slices.Compact(tm.free)
	slices.Sort(tm.own)
	tm.own = slices.Compact(tm.own)
	return tm, nil
}

// constraints a fenced string would break, or that make a string a code
// rather than free text.
var textConstraints = []string{"enum", "const", "pattern", "format", "maxLength"}

// walkText walks the schema v found at schema pointer sp, describing the
// value at data pointer at, the way walkSensitive does.
func walkText(v any, at, sp string, depth int, tm *textMarks, reached map[string]bool) error {
	m, ok := v.(map[string]any)
	if !ok || depth > maxSensitiveDepth {
		return nil
	}
	if mark, present := m[OutsideTextKeyword]; present {
		reached[sp] = true
		tm.declared = true
		b, isBool := mark.(bool)
		switch {
		case !isBool:
			return &CompileError{Pointer: sp + "/" + OutsideTextKeyword, Reason: ErrInvalid, Detail: fmt.Sprintf("%s is true or false, not %v", OutsideTextKeyword, mark)}
		case b && !stringType(m):
			return &CompileError{Pointer: sp, Reason: ErrInvalid, Detail: OutsideTextKeyword + " marks a string field (type: string); mark each string of an object or an array where it is"}
		case !b:
			tm.own = append(tm.own, at)
		default:
			for _, k := range textConstraints {
				if _, has := m[k]; has {
					return &CompileError{Pointer: sp, Reason: ErrInvalid, Detail: fmt.Sprintf("a field marked %s is free text, fenced before a model reads it; %s would not hold for its fenced form: remove %s or the mark", OutsideTextKeyword, k, k)}
				}
			}
			tm.outside = append(tm.outside, at)
		}
	} else if stringType(m) && freeText(m) {
		tm.free = append(tm.free, at)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for name, sub := range props {
			if err := walkText(sub, at+"/"+escape(name), sp+"/properties/"+escape(name), depth+1, tm, reached); err != nil {
				return err
			}
		}
	}
	if items, ok := m["items"].(map[string]any); ok {
		if err := walkText(items, at+"/*", sp+"/items", depth+1, tm, reached); err != nil {
			return err
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[k].([]any); ok {
			for i, sub := range subs {
				if err := walkText(sub, at, fmt.Sprintf("%s/%s/%d", sp, k, i), depth+1, tm, reached); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stringType reports whether schema m is a string's: its type is
// "string", or a list of types holding "string".
func stringType(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		return t == "string"
	case []any:
		return slices.Contains(t, any("string"))
	}
	return false
}

// freeText reports whether the string schema m admits any text.
func freeText(m map[string]any) bool {
	for _, k := range textConstraints {
		if k == "maxLength" {
			continue
		}
		if _, has := m[k]; has {
			return false
		}
	}
	if n, ok := count(m["maxLength"]); ok && n <= MaxPlainText {
		return false
	}
	return true
}

// nameMaps are the keywords whose value maps names (not keywords) to
// schemas.
var nameMaps = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}

// unreachedMark answers an error for the first x-outside-text mark in v
// (at schema pointer sp) that the walk did not reach; names says v's keys
// are names (a property named x-outside-text is no mark).
func unreachedMark(v any, sp string, names bool, reached map[string]bool) error {
	switch x := v.(type) {
	case map[string]any:
		if _, present := x[OutsideTextKeyword]; present && !names && !reached[sp] {
			return &CompileError{Pointer: sp, Reason: ErrInvalid, Detail: OutsideTextKeyword + " is read only on a field reached through properties, items, allOf, anyOf or oneOf; mark the field itself, not a schema under $defs, behind a $ref or in not/if/then/else"}
		}
		for k, c := range x {
			if err := unreachedMark(c, sp+"/"+escape(k), !names && slices.Contains(nameMaps, k), reached); err != nil {
				return err
			}
		}
	case []any:
		for i, c := range x {
			if err := unreachedMark(c, fmt.Sprintf("%s/%d", sp, i), false, reached); err != nil {
				return err
			}
		}
	}
	return nil
}
