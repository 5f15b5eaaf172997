package schema

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// The coercions toolplane applies to arguments, and nothing else, ever. Two
// run by default because models vary them constantly and the risk is low
// (and a third, RuleIntegerForm in numbers.go, changes only how a number is
// written);
// two run only where the field's schema says "x-coerce": true. A field that
// says "x-coerce": false gets none. Everything else (a type mismatch, a
// missing field, an unknown field) is refused with a correction, never
// repaired: a "helpful" repair is how a malformed argument becomes an
// unbounded write.
const (
	RuleTrim          = "trim"             // default: surrounding whitespace removed from a string
	RuleEnumCase      = "enum_case"        // default: a string matching one enum value case-insensitively
	RuleDigits        = "digits_to_number" // x-coerce: "42" -> 42 for an integer or number field
	RuleSingleToArray = "single_to_array"  // x-coerce: "a" -> ["a"] for an array field
)

// Coercion records one change made to the arguments.
type Coercion struct {
	FieldPath string `json:"field_path"`
	Rule      string `json:"rule"`
}

type typeSet uint8

const (
	tString typeSet = 1 << iota
	tInteger
	tNumber
	tBoolean
	tArray
	tObject
	tNull
)

var typeBits = map[string]typeSet{"string": tString, "integer": tInteger, "number": tNumber, "boolean": tBoolean, "array": tArray, "object": tObject, "null": tNull}

// node is the coercion plan for one schema location: what the location
// says about types, enum, x-coerce and its children, merged across $ref and
// allOf. anyOf and oneOf are not followed: when the schema offers several
// shapes, guessing which one the model meant is exactly the repair
// toolplane refuses to make.
type node struct {
	types      typeSet
	enum       []string
	coerce     int8 // 0 unset, 1 x-coerce true, -1 x-coerce false
	props      map[string]*node
	additional *node
	items      *node
	prefix     []*node
	desc       string
}

func buildPlan(doc any) *node {
	b := planBuilder{doc: doc, memo: map[string]*node{}, anchors: map[string]string{}}
	_ = walkSchemas(doc, "", func(m map[string]any, at string) error {
		if a, ok := m["$anchor"].(string); ok {
			b.anchors[a] = at
		}
		return nil
	})
	return b.build(doc, "")
}

type planBuilder struct {
	doc     any
	memo    map[string]*node
	anchors map[string]string
}

func (b *planBuilder) build(v any, at string) *node {
	if n, ok := b.memo[at]; ok {
		return n
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	n := &node{}
	b.memo[at] = n
	b.merge(n, m, at)
	return n
}

// merge folds the facts of the schema m (at pointer at) into n; facts
// already set win, except x-coerce false, which always wins.
func (b *planBuilder) merge(n *node, m map[string]any, at string) {
	switch t := m["type"].(type) {
	case string:
		if n.types == 0 {
			n.types = typeBits[t]
		}
	case []any:
		if n.types == 0 {
			for _, x := range t {
				if s, ok := x.(string); ok {
					n.types |= typeBits[s]
				}
			}
		}
	}
	if e, ok := m["enum"].([]any); ok && n.enum == nil {
		n.enum = []string{}
		for _, x := range e {
			if s, ok := x.(string); ok {
				n.enum = append(n.enum, s)
			}
		}
	}
	if c, ok := m["x-coerce"].(bool); ok {
		if !c {
			n.coerce = -1
		} else if n.coerce == 0 {
			n.coerce = 1
		}
	}
	if d, ok := m["description"].(string); ok && n.desc == "" {
		n.desc = d
	}
	if p, ok := m["properties"].(map[string]any); ok {
		if n.props == nil {
			n.props = map[string]*node{}
		}
		for k, s := range p {
			if _, seen := n.props[k]; !seen {
				if c := b.build(s, at+"/properties/"+escape(k)); c != nil {
					n.props[k] = c
				}
			}
		}
	}
	if a, ok := m["additionalProperties"].(map[string]any); ok && n.additional == nil {
		n.additional = b.build(a, at+"/additionalProperties")
	}
	if it, ok := m["items"].(map[string]any); ok && n.items == nil {
		n.items = b.build(it, at+"/items")
	}
	if pi, ok := m["prefixItems"].([]any); ok && n.prefix == nil {
		for i, s := range pi {
			n.prefix = append(n.prefix, b.build(s, at+"/prefixItems/"+strconv.Itoa(i)))
		}
	}
	for _, k := range []string{"$ref", "$dynamicRef"} {
		if r, ok := m[k].(string); ok {
			if target, err := resolveLocal(r, b.anchors); err == nil {
				if t, ok := lookup(b.doc, target); ok {
					if tm, ok := t.(map[string]any); ok {
						b.merge(n, tm, target)
					}
				}
			}
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		for i, s := range all {
			if sm, ok := s.(map[string]any); ok {
				b.merge(n, sm, at+"/allOf/"+strconv.Itoa(i))
			}
		}
	}
}

// child returns the plan for property key of an object location.
func (n *node) child(key string) *node {
	if n == nil {
		return nil
	}
	if c, ok := n.props[key]; ok {
		return c
	}
	return n.additional
}

// elem returns the plan for index i of an array location.
func (n *node) elem(i int) *node {
	if n == nil {
		return nil
	}
	if i < len(n.prefix) {
		return n.prefix[i]
	}
	return n.items
}

// Coerce applies the bounded coercion rules to v and returns the coerced
// value and what changed. v is never modified: a changed container is
// copied, an unchanged one is returned as is.
func (s *Schema) Coerce(v any) (any, []Coercion) {
	var log []Coercion
	out, _ := coerce(v, s.plan, loc{root: true}, &log)
	if len(log) > 1 {
		sort.Slice(log, func(i, j int) bool {
			if log[i].FieldPath != log[j].FieldPath {
				return log[i].FieldPath < log[j].FieldPath
			}
			return log[i].Rule < log[j].Rule
		})
	}
	return out, log
}

// loc is a field location built only when it is needed: most arguments
// are scalars that no rule touches, and building every pointer string up
// front would cost an allocation per field on the hot path.
type loc struct {
	parent string
	key    string
	index  int // -1: key names an object member
	root   bool
}

func (l loc) String() string {
	switch {
	case l.root:
		return ""
	case l.index >= 0:
		return l.parent + "/" + strconv.Itoa(l.index)
	default:
		return l.parent + "/" + escape(l.key)
	}
}

func coerce(v any, n *node, l loc, log *[]Coercion) (any, bool) {
	if n == nil {
		return v, false
	}
	changed := false
	if n.coerce == 1 && n.types&tArray != 0 {
		if _, isArr := v.([]any); !isArr && v != nil && !n.accepts(v) {
			v = []any{v}
			changed = true
			*log = append(*log, Coercion{l.String(), RuleSingleToArray})
		}
	}
	switch x := v.(type) {
	case string:
		out, c := n.coerceString(x, l, log)
		return out, changed || c
	case json.Number:
		// Only where the field takes integers and nothing else: a number
		// field keeps its text, which a float decodes as written.
		if n.coerce >= 0 && n.types&tInteger != 0 && n.types&tNumber == 0 {
			if d, ok := integerForm(x); ok {
				*log = append(*log, Coercion{l.String(), RuleIntegerForm})
				return d, true
			}
		}
	case map[string]any:
		at := l.String()
		var out map[string]any
		for k, c := range x {
			nc, ch := coerce(c, n.child(k), loc{parent: at, key: k, index: -1}, log)
			if !ch {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(x))
				for k2, v2 := range x {
					out[k2] = v2
				}
			}
			out[k] = nc
		}
		if out != nil {
			return out, true
		}
	case []any:
		at := l.String()
		var out []any
		for i, c := range x {
			nc, ch := coerce(c, n.elem(i), loc{parent: at, index: i}, log)
			if !ch {
				continue
			}
			if out == nil && !changed {
				out = append([]any(nil), x...)
			} else if out == nil {
				out = x // freshly wrapped by single_to_array: ours to edit
			}
			out[i] = nc
		}
		if out != nil {
			return out, true
		}
	}
	return v, changed
}

// accepts reports whether v already has one of the location's types.
func (n *node) accepts(v any) bool {
	switch x := v.(type) {
	case string:
		return n.types&tString != 0
	case bool:
		return n.types&tBoolean != 0
	case json.Number:
		if n.types&tNumber != 0 {
			return true
		}
		return n.types&tInteger != 0 && !strings.ContainsAny(string(x), ".eE")
	case float64, int, int64:
		return n.types&(tNumber|tInteger) != 0
	case map[string]any:
		return n.types&tObject != 0
	case []any:
		return n.types&tArray != 0
	case nil:
		return n.types&tNull != 0
	}
	return false
}

func (n *node) coerceString(s string, at loc, log *[]Coercion) (any, bool) {
	if n.coerce < 0 {
		return s, false
	}
	orig := s
	if n.types&tString != 0 || len(n.enum) > 0 || n.coerce == 1 {
		if t := strings.TrimSpace(s); t != s {
			s = t
			*log = append(*log, Coercion{at.String(), RuleTrim})
		}
	}
	if len(n.enum) > 0 && !contains(n.enum, s) {
		match := ""
		for _, e := range n.enum {
			if strings.EqualFold(e, s) {
				if match != "" {
					match = ""
					break
				}
				match = e
			}
		}
		if match != "" {
			s = match
			*log = append(*log, Coercion{at.String(), RuleEnumCase})
		}
	}
	if n.coerce == 1 && n.types&tString == 0 && n.types&(tInteger|tNumber) != 0 {
		if num, ok := digits(s, n.types&tNumber != 0); ok {
			*log = append(*log, Coercion{at.String(), RuleDigits})
			return num, true
		}
	}
	return s, s != orig
}

// digits reads an optional minus sign and decimal digits (and, for a number
// field, one decimal fraction) and answers the JSON number it spells, with
// leading zeros removed so the result is valid JSON.
func digits(s string, fraction bool) (json.Number, bool) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(body, ".")
	if intPart == "" || !allDigits(intPart) || (hasFrac && (!fraction || frac == "" || !allDigits(frac))) {
		return "", false
	}
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	out := intPart
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return json.Number(out), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
