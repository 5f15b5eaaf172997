package schema

import (
	"fmt"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/toolplane/toolplane"
)

// Validation cost. The reference validator evaluates a subschema once for
// every place it is reached: a subschema reached through two anyOf branches
// that both $ref it is evaluated twice, so nesting such branches doubles the
// work per level, and a two-kilobyte schema can keep a call busy for
// seconds. Toolplane bounds that twice. At compile time the document may
// reach at most Limits.MaxExpanded subschemas once every reference is
// followed (counted with multiplicity, as the validator walks it). At
// validation time the work one instance would take, in subschema
// evaluations, is counted before the validator runs, and a call over
// Limits.MaxWork is refused unchecked instead of keeping a worker busy.

// costNode is one subschema of the document, linked to the subschemas the
// validator evaluates from it: those applied to the same instance location
// (in-place applicators and references) and those applied to its members.
type costNode struct {
	same       []*costNode // allOf, anyOf, oneOf, not, if/then/else, dependentSchemas, $ref, $dynamicRef
	props      map[string]*costNode
	patterns   []*costNode // patternProperties, applied to every member (an upper bound)
	additional *costNode
	names      *costNode // propertyNames, applied to every member name
	unevalProp *costNode
	prefix     []*costNode
	items      *costNode
	contains   *costNode
	unevalItem *costNode

	// expanded is the number of subschema evaluations reachable from this
	// one when every reference is followed, saturated at maxCount: the
	// work of validating a scalar, and the bound on any one instance node.
	expanded int64
}

// maxCount saturates the counts: far above any limit, far below overflow.
const maxCount = 1 << 50

func addCount(a, b int64) int64 {
	if a+b > maxCount {
		return maxCount
	}
	return a + b
}

// costBuilder turns a document whose references all resolve inside it and
// never cycle (collectRefs and checkCycles have passed) into costNodes, one
// per schema pointer.
type costBuilder struct {
	doc     any
	anchors map[string]string
	nodes   map[string]*costNode
}

func buildCost(doc any, anchors map[string]string) *costNode {
	b := costBuilder{doc: doc, anchors: anchors, nodes: map[string]*costNode{}}
	return b.build(doc, "")
}

func (b *costBuilder) build(v any, at string) *costNode {
	if n, ok := b.nodes[at]; ok {
		return n
	}
	n := &costNode{expanded: 1}
	b.nodes[at] = n
	m, ok := v.(map[string]any)
	if !ok {
		return n // true, false, or a value the compiler refused already
	}
	sub := func(k string) *costNode {
		if c, ok := m[k]; ok {
			return b.build(c, at+"/"+k)
		}
		return nil
	}
	list := func(k string) []*costNode {
		l, _ := m[k].([]any)
		out := make([]*costNode, 0, len(l))
		for i, c := range l {
			out = append(out, b.build(c, at+"/"+k+"/"+strconv.Itoa(i)))
		}
		return out
	}
	named := func(k string) map[string]*costNode {
		l, _ := m[k].(map[string]any)
		if len(l) == 0 {
			return nil
		}
		out := make(map[string]*costNode, len(l))
		for name, c := range l {
			out[name] = b.build(c, at+"/"+k+"/"+escape(name))
		}
		return out
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		n.same = append(n.same, list(k)...)
	}
	for _, k := range []string{"not", "if", "then", "else", "contentSchema"} {
		if c := sub(k); c != nil {
			n.same = append(n.same, c)
		}
	}
	for _, c := range named("dependentSchemas") {
		n.same = append(n.same, c)
	}
	for _, k := range []string{"$ref", "$dynamicRef"} {
		r, ok := m[k].(string)
		if !ok {
			continue
		}
		target, err := resolveLocal(r, b.anchors)
		if err != nil {
			continue
		}
		if t, ok := lookup(b.doc, target); ok {
			n.same = append(n.same, b.build(t, target))
		}
	}
	n.props = named("properties")
	for _, c := range named("patternProperties") {
		n.patterns = append(n.patterns, c)
	}
	n.additional = sub("additionalProperties")
	n.names = sub("propertyNames")
	n.unevalProp = sub("unevaluatedProperties")
	n.prefix = list("prefixItems")
	n.items = sub("items")
	n.contains = sub("contains")
	n.unevalItem = sub("unevaluatedItems")

	// $defs and definitions are not evaluated in place; what references
	// them is counted where the reference sits.
	e := int64(1)
	for _, c := range n.same {
		e = addCount(e, c.expanded)
	}
	for _, c := range n.props {
		e = addCount(e, c.expanded)
	}
	for _, c := range n.patterns {
		e = addCount(e, c.expanded)
	}
	for _, c := range n.prefix {
		e = addCount(e, c.expanded)
	}
	for _, c := range []*costNode{n.additional, n.names, n.unevalProp, n.items, n.contains, n.unevalItem} {
		if c != nil {
			e = addCount(e, c.expanded)
		}
	}
	n.expanded = e
	return n
}

// costKey names one evaluation: a subschema against one container of the
// instance. Scalars need no key: their cost is the subschema's expanded
// count whatever their value.
type costKey struct {
	n   *costNode
	p   unsafe.Pointer
	len int
}

// estimator counts the subschema evaluations validating one instance takes,
// an upper bound of what the reference validator does (it may stop early;
// the count assumes it never does). Counts saturate just past limit, and a
// walk stops as soon as its own count passes it, so estimating costs at
// most about limit steps whatever the schema and instance.
type estimator struct {
	limit int64
	memo  map[costKey]int64
}

func containerKey(n *costNode, v any) costKey {
	rv := reflect.ValueOf(v)
	return costKey{n: n, p: rv.UnsafePointer(), len: rv.Len()}
}

func (e *estimator) cost(n *costNode, v any) int64 {
	if n == nil {
		return 0
	}
	switch v.(type) {
	case map[string]any, []any:
	default:
		return min(n.expanded, e.limit+1)
	}
	key := containerKey(n, v)
	if c, ok := e.memo[key]; ok {
		return c
	}
	c := int64(1)
	over := func(add int64) bool {
		c = min(c+add, e.limit+1)
		return c > e.limit
	}
	done := func() int64 {
		e.memo[key] = c
		return c
	}
	for _, s := range n.same {
		if over(e.cost(s, v)) {
			return done()
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if over(e.cost(n.props[k], child) + e.cost(n.additional, child) + e.cost(n.unevalProp, child)) {
				return done()
			}
			for _, p := range n.patterns {
				if over(e.cost(p, child)) {
					return done()
				}
			}
			if n.names != nil && over(min(n.names.expanded, e.limit+1)) {
				return done()
			}
		}
	case []any:
		for i, child := range x {
			if i < len(n.prefix) && over(e.cost(n.prefix[i], child)) {
				return done()
			}
			if over(e.cost(n.items, child) + e.cost(n.contains, child) + e.cost(n.unevalItem, child)) {
				return done()
			}
		}
	}
	return done()
}

// countNodes counts the values and member names of v, stopping once the
// count passes stop.
func countNodes(v any, stop int64) int64 {
	var n int64
	var walk func(any)
	walk = func(v any) {
		if n > stop {
			return
		}
		n++
		switch x := v.(type) {
		case map[string]any:
			for _, c := range x {
				n++ // the member name: propertyNames evaluates it
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return n
}

// withinWork reports whether validating v takes at most limit subschema
// evaluations. The product of the schema's expanded size and the
// instance's node count bounds the work from above and costs one walk of
// the instance, so an ordinary schema is settled by it; only a schema and
// instance whose product passes the limit pay for the exact count.
func (c *costNode) withinWork(v any, limit int64) bool {
	if c.expanded <= limit && countNodes(v, limit/c.expanded)*c.expanded <= limit {
		return true
	}
	e := estimator{limit: limit, memo: map[costKey]int64{}}
	return e.cost(c, v) <= limit
}

// overWork is the violation a call over the work limit is answered with.
func overWork(limit int64) []toolplane.Violation {
	return []toolplane.Violation{{
		FieldPath:    "",
		Constraint:   "maxWork",
		Message:      fmt.Sprintf("arguments: validating this value against the schema would take more than %d subschema evaluations, the limit for one value; it was refused unchecked", limit),
		SuggestedFix: "send a smaller value (fewer items or fields), or ask the tool's owner to simplify the schema's anyOf/oneOf and $ref nesting",
	}}
}
