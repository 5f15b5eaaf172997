package schema

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unsafe"
)

// Keywords whose value is one subschema, a map of subschemas or a list of
// subschemas. Only these are walked: a "$ref" inside const, enum, default
// or an extension keyword is data, not a reference.
var (
	oneSub  = []string{"additionalProperties", "items", "contains", "propertyNames", "not", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	mapSub  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	listSub = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

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

// collectRefs checks every reference of doc resolves to a pointer inside
// doc, and answers the document's anchors, by name, with the pointer each
// names. A reference that names anything but a fragment of this document is
// refused: toolplane never loads a schema from elsewhere.
func collectRefs(doc any) (map[string]string, error) {
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
		return nil, err
	}
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
			if _, err := resolveLocal(s, anchors); err != nil {
				return &CompileError{Pointer: at + "/" + k, Reason: ErrRemoteRef, Detail: err.Error()}
			}
		}
		return nil
	})
	return anchors, err
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

// checkCycles refuses a document whose references can reach themselves. A
// recursive schema is legal JSON Schema, but every walk toolplane makes over
// a schema (coercion, projection, diffing) must end, and a tool's arguments
// are never meant to be unbounded trees.
//
// It is one depth-first walk over the document's subschemas, following
// each reference to its target: a target still on the walk's path closes a
// cycle. Every subschema is walked once, so the check is linear in the
// document, however many references it holds.
func checkCycles(doc any, anchors map[string]string) error {
	const (
		active = iota + 1
		done
	)
	// Keyed by the subschema itself, not its pointer: a target may spell
	// the same place differently (#/allOf/00).
	state := map[unsafe.Pointer]int{}
	var visit func(v any, at string) error
	visit = func(v any, at string) error {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		id := reflect.ValueOf(m).UnsafePointer()
		switch state[id] {
		case active:
			return errCycle
		case done:
			return nil
		}
		state[id] = active
		for _, k := range []string{"$ref", "$dynamicRef"} {
			r, ok := m[k].(string)
			if !ok {
				continue
			}
			target, err := resolveLocal(r, anchors)
			if err != nil {
				continue // collectRefs refused it already
			}
			t, ok := lookup(doc, target)
			if !ok {
				continue
			}
			if err := visit(t, target); err == errCycle {
				return &CompileError{Pointer: at + "/" + k, Reason: ErrRefCycle, Detail: fmt.Sprintf("the reference to %q leads back to itself; recursive schemas are not accepted, so bound the depth explicitly", "#"+target)}
			} else if err != nil {
				return err
			}
		}
		err := eachSub(m, at, func(c any, cat string) error { return visit(c, cat) })
		if err == errCycle {
			// A child is the cycle's own start: the reference that closes
			// it is reported where it sits, below.
			return err
		}
		if err != nil {
			return err
		}
		state[id] = done
		return nil
	}
	if err := visit(doc, ""); err != nil && err != errCycle {
		return err
	}
	return nil
}

// errCycle tells a walk's caller that the subschema it entered is on the
// walk's path.
var errCycle = errors.New("cycle")

// eachSub calls fn for each direct subschema of m, as walkSchemas visits
// them.
func eachSub(m map[string]any, at string, fn func(v any, at string) error) error {
	for _, k := range oneSub {
		if c, ok := m[k]; ok {
			if err := fn(c, at+"/"+k); err != nil {
				return err
			}
		}
	}
	for _, k := range mapSub {
		if c, ok := m[k].(map[string]any); ok {
			for n, s := range c {
				if err := fn(s, at+"/"+k+"/"+escape(n)); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range listSub {
		if c, ok := m[k].([]any); ok {
			for i, s := range c {
				if err := fn(s, at+"/"+k+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
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
