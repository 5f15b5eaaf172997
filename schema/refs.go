package schema

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Keywords whose value is one subschema, a map of subschemas or a list of
// subschemas. Only these are walked: a "$ref" inside const, enum, default
// or an extension keyword is data, not a reference.
var (
	oneSub  = []string{"additionalProperties", "items", "contains", "propertyNames", "not", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	mapSub  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	listSub = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// ref is one $ref (or $dynamicRef) in a document: where it sits and the
// pointer of the subschema it names.
type ref struct {
	at     string
	target string
}

// walkSchemas calls fn for every subschema object in doc with its pointer.
func walkSchemas(v any, at string, fn func(m map[string]any, at string) error) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if err := fn(m, at); err != nil {
		return err
	}
	for _, k := range oneSub {
		if c, ok := m[k]; ok {
			if err := walkSchemas(c, at+"/"+k, fn); err != nil {
				return err
			}
		}
	}
	for _, k := range mapSub {
		if c, ok := m[k].(map[string]any); ok {
			names := make([]string, 0, len(c))
			for n := range c {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if err := walkSchemas(c[n], at+"/"+k+"/"+escape(n), fn); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range listSub {
		if c, ok := m[k].([]any); ok {
			for i, s := range c {
				if err := walkSchemas(s, at+"/"+k+"/"+strconv.Itoa(i), fn); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// collectRefs lists every reference of doc, resolved to a pointer inside
// doc. A reference that names anything but a fragment of this document is
// refused: toolplane never loads a schema from elsewhere. It also answers
// the document's anchors, by name, with the pointer each names.
func collectRefs(doc any) ([]ref, map[string]string, error) {
	anchors := map[string]string{}
	err := walkSchemas(doc, "", func(m map[string]any, at string) error {
		if _, ok := m["$id"]; ok && at != "" {
			return &CompileError{Pointer: at + "/$id", Reason: ErrRemoteRef, Detail: "an embedded $id starts another resource; keep one resource and reference parts with \"#/$defs/name\""}
		}
		for _, k := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := m[k].(string); ok {
				anchors[a] = at
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var refs []ref
	err = walkSchemas(doc, "", func(m map[string]any, at string) error {
		for _, k := range []string{"$ref", "$dynamicRef"} {
			v, ok := m[k]
			if !ok {
				continue
			}
			s, ok := v.(string)
			if !ok {
				return &CompileError{Pointer: at + "/" + k, Reason: ErrInvalid, Detail: k + " must be a string"}
			}
			target, err := resolveLocal(s, anchors)
			if err != nil {
				return &CompileError{Pointer: at + "/" + k, Reason: ErrRemoteRef, Detail: err.Error()}
			}
			refs = append(refs, ref{at: at, target: target})
		}
		return nil
	})
	return refs, anchors, err
}

func resolveLocal(s string, anchors map[string]string) (string, error) {
	if !strings.HasPrefix(s, "#") {
		return "", fmt.Errorf("%q is outside this schema; only \"#/...\" and \"#anchor\" references are allowed, so inline it under $defs", s)
	}
	frag, err := url.PathUnescape(s[1:])
	if err != nil {
		return "", fmt.Errorf("%q is not a valid fragment: %v", s, err)
	}
	if frag == "" || strings.HasPrefix(frag, "/") {
		return frag, nil
	}
	at, ok := anchors[frag]
	if !ok {
		return "", fmt.Errorf("%q names no $anchor in this schema", s)
	}
	return at, nil
}

// within reports whether pointer p lies inside the subtree at pointer root.
func within(p, root string) bool {
	return root == "" || p == root || strings.HasPrefix(p, root+"/")
}

// checkCycles refuses a document whose references can reach themselves. A
// recursive schema is legal JSON Schema, but every walk toolplane makes over
// a schema (coercion, projection, diffing) must end, and a tool's arguments
// are never meant to be unbounded trees.
func checkCycles(doc any, refs []ref) error {
	// Edge a -> b when ref b sits inside the subschema ref a names: following
	// a, a validator reaches b.
	const (
		unseen = iota
		active
		done
	)
	state := make([]int, len(refs))
	var visit func(i int) *ref
	visit = func(i int) *ref {
		state[i] = active
		for j := range refs {
			if !within(refs[j].at, refs[i].target) {
				continue
			}
			switch state[j] {
			case active:
				return &refs[j]
			case unseen:
				if r := visit(j); r != nil {
					return r
				}
			}
		}
		state[i] = done
		return nil
	}
	for i := range refs {
		if state[i] == unseen {
			if r := visit(i); r != nil {
				return &CompileError{Pointer: r.at + "/$ref", Reason: ErrRefCycle, Detail: fmt.Sprintf("the reference to %q leads back to itself; recursive schemas are not accepted, so bound the depth explicitly", "#"+r.target)}
			}
		}
	}
	return nil
}

// Walk calls fn for every subschema object of the schema doc (the root
// included) with its JSON pointer, map members in name order. Only the
// keywords that hold subschemas are walked: a "$ref" or "$anchor" inside
// const, enum, default or an extension keyword is data. An error from fn
// stops the walk and is answered.
func Walk(doc any, fn func(m map[string]any, pointer string) error) error {
	return walkSchemas(doc, "", fn)
}

// Lookup answers the value at JSON pointer p in doc ("" is doc itself).
func Lookup(doc any, p string) (any, bool) { return lookup(doc, p) }

// EscapeToken writes s as one JSON pointer token.
func EscapeToken(s string) string { return escape(s) }

// UnescapeToken reads one JSON pointer token.
func UnescapeToken(tok string) string { return unescape(tok) }

// lookup returns the value at pointer p in doc.
func lookup(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = unescape(tok)
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
