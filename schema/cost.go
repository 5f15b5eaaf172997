package schema

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
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
//
// A pattern match is not one unit of work: it costs its input's length
// times its program's size (regex.go). The same count charges every match
// that way, in regular-expression steps, against Limits.MaxRegexWork.

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

	// namePrograms is the program size of all of this subschema's
	// patternProperties names: each member name is matched against each.
	namePrograms int64
	// stringPrograms is the program size of the patterns a string reaching
	// this subschema is matched against: its own and those of the
	// subschemas applied in place, counted as often as they are reached.
	stringPrograms int64
	// stringFormats is the number of subschemas with format "regex" a
	// string reaching this subschema is validated against, counted as
	// often as they are reached: each compiles the string.
	stringFormats int64
	// programs is the program size of every pattern and patternProperties
	// name reachable from this subschema, counted as often as they are
	// reached: no one string or member name is matched against more, so
	// it bounds the steps per byte of the whole instance. A reachable
	// format "regex" saturates it: what compiling a string costs is not a
	// multiple of its length, so only the exact count can tell.
	programs int64

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

func mulCount(a, b int64) int64 {
	if a != 0 && b > maxCount/a {
		return maxCount
	}
	return a * b
}

// costBuilder turns a document whose references all resolve inside it and
// never cycle (collectRefs and checkCycles have passed) into costNodes, one
// per schema pointer, with the program size of each regular expression
// (checkPatterns has measured them).
type costBuilder struct {
	doc     any
	anchors map[string]string
	progs   map[string]int64
	nodes   map[string]*costNode
}

func buildCost(doc any, anchors map[string]string, progs map[string]int64) *costNode {
	b := costBuilder{doc: doc, anchors: anchors, progs: progs, nodes: map[string]*costNode{}}
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
	for name, c := range named("patternProperties") {
		n.patterns = append(n.patterns, c)
		n.namePrograms = addCount(n.namePrograms, b.progs[name])
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
	var own, formats int64
	if p, ok := m["pattern"].(string); ok {
		own = b.progs[p]
	}
	if f, _ := m["format"].(string); f == "regex" {
		formats = 1
	}
	e, all := int64(1), addCount(own, n.namePrograms)
	if formats > 0 {
		all = maxCount
	}
	n.stringPrograms, n.stringFormats = own, formats
	for _, c := range n.same {
		n.stringPrograms = addCount(n.stringPrograms, c.stringPrograms)
		n.stringFormats = addCount(n.stringFormats, c.stringFormats)
	}
	children := slices.Concat(n.same, slices.Collect(maps.Values(n.props)), n.patterns, n.prefix)
	for _, c := range []*costNode{n.additional, n.names, n.unevalProp, n.items, n.contains, n.unevalItem} {
		if c != nil {
			children = append(children, c)
		}
	}
	for _, c := range children {
		e = addCount(e, c.expanded)
		all = addCount(all, c.programs)
	}
	n.expanded, n.programs = e, all
	return n
}

// costKey names one evaluation: a subschema against one container of the
// instance. Scalars need no key: their cost is the subschema's expanded
// count (and, for a string, its length times the programs it meets)
// whatever their value.
type costKey struct {
	n   *costNode
	p   unsafe.Pointer
	len int
}

// work is what validating a value takes: subschema evaluations, and
// regular-expression steps (input bytes times program instructions).
type work struct {
	evals, regex int64
}

// over reports whether w passes either part of lim.
func (w work) over(lim work) bool { return w.evals > lim.evals || w.regex > lim.regex }

// add sums a and b, each part saturated just past its part of lim.
func (a work) add(b, lim work) work {
	return work{evals: min(a.evals+b.evals, lim.evals+1), regex: min(a.regex+b.regex, lim.regex+1)}
}

// estimator counts the work validating one instance takes, an upper bound
// of what the reference validator does (it may stop early; the count
// assumes it never does). Counts saturate just past limit, and a walk stops
// as soon as its own count passes it, so estimating costs at most about
// limit.evals steps whatever the schema and instance.
type estimator struct {
	limit work
	memo  map[costKey]work
}

func containerKey(n *costNode, v any) costKey {
	rv := reflect.ValueOf(v)
	return costKey{n: n, p: rv.UnsafePointer(), len: rv.Len()}
}

// steps is the regular-expression work of matching s against programs
// instructions, saturated just past the limit.
func (e *estimator) steps(s string, programs int64) int64 {
	return min(mulCount(int64(len(s)), programs), e.limit.regex+1)
}

// stringSteps is the regular-expression work of validating s against n:
// matching it against n's patterns, and compiling it for each format
// "regex", saturated just past the limit.
func (e *estimator) stringSteps(n *costNode, s string) int64 {
	w := e.steps(s, n.stringPrograms)
	if n.stringFormats > 0 && w <= e.limit.regex {
		w = min(w+mulCount(n.stringFormats, compileSteps(s, e.limit.regex)), e.limit.regex+1)
	}
	return w
}

func (e *estimator) cost(n *costNode, v any) work {
	if n == nil {
		return work{}
	}
	switch x := v.(type) {
	case map[string]any, []any:
	case string:
		return work{evals: min(n.expanded, e.limit.evals+1), regex: e.stringSteps(n, x)}
	default:
		return work{evals: min(n.expanded, e.limit.evals+1)}
	}
	key := containerKey(n, v)
	if c, ok := e.memo[key]; ok {
		return c
	}
	c := work{evals: 1}
	over := func(add work) bool {
		c = c.add(add, e.limit)
		return c.over(e.limit)
	}
	done := func() work {
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
			if over(e.cost(n.props[k], child).add(e.cost(n.additional, child), e.limit).add(e.cost(n.unevalProp, child), e.limit)) {
				return done()
			}
			for _, p := range n.patterns {
				if over(e.cost(p, child)) {
					return done()
				}
			}
			// The member name is matched against every patternProperties
			// name, and validated against propertyNames.
			if over(work{regex: e.steps(k, n.namePrograms)}) {
				return done()
			}
			if n.names != nil && over(e.cost(n.names, k)) {
				return done()
			}
		}
	case []any:
		for i, child := range x {
			if i < len(n.prefix) && over(e.cost(n.prefix[i], child)) {
				return done()
			}
			if over(e.cost(n.items, child).add(e.cost(n.contains, child), e.limit).add(e.cost(n.unevalItem, child), e.limit)) {
				return done()
			}
		}
	}
	return done()
}

// measureInstance counts the values and member names of v, and the bytes
// of its strings and member names, stopping once either count passes its
// stop.
func measureInstance(v any, stop work) work {
	var n work
	var walk func(any)
	walk = func(v any) {
		if n.evals > stop.evals || n.regex > stop.regex {
			return
		}
		n.evals++
		switch x := v.(type) {
		case string:
			n.regex += int64(len(x))
		case map[string]any:
			for k, c := range x {
				n.evals++ // the member name: propertyNames evaluates it
				n.regex += int64(len(k))
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

// withinWork reports whether validating v takes at most lim: its
// subschema evaluations and its regular-expression steps; when it does not,
// regex says the steps are what passed. The schema's expanded size times
// the instance's node count, and its reachable programs times the
// instance's string bytes, bound the work from above and cost one walk of
// the instance, so an ordinary schema is settled by them; only a schema and
// instance whose product passes the limit pay for the exact count.
func (c *costNode) withinWork(v any, lim work) (ok, regex bool) {
	if c.expanded <= lim.evals && c.programs <= lim.regex {
		stop := work{evals: lim.evals / c.expanded, regex: math.MaxInt64}
		if c.programs > 0 {
			stop.regex = lim.regex / c.programs
		}
		m := measureInstance(v, stop)
		if m.evals*c.expanded <= lim.evals && mulCount(m.regex, c.programs) <= lim.regex {
			return true, false
		}
	}
	e := estimator{limit: lim, memo: map[costKey]work{}}
	w := e.cost(c, v)
	return !w.over(lim), w.regex > lim.regex
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

// overRegexWork is the violation a call over the regular-expression work
// limit is answered with: the same constraint, since the cure is the same
// kind (a smaller value, or a simpler schema).
func overRegexWork(limit int64) []toolplane.Violation {
	return []toolplane.Violation{{
		FieldPath:    "",
		Constraint:   "maxWork",
		Message:      fmt.Sprintf("arguments: matching this value's strings against the schema's patterns (or compiling those it declares format \"regex\") would take more than %d regular-expression steps (bytes matched times pattern instructions), the limit for one value; it was refused unchecked", limit),
		SuggestedFix: "send shorter strings (or fewer of them), or ask the tool's owner to simplify the schema's patterns: a counted repeat such as {1000} multiplies the work for every character",
	}}
}
