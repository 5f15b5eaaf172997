package compat

import (
	"encoding/json"
	"strconv"
	"strings"
)

// handled are the keywords compareObjects reads itself; any other keyword
// is compared as an opaque value.
var handled = map[string]bool{
	"type": true, "enum": true, "const": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true,
	"pattern": true, "format": true, "uniqueItems": true,
	"properties": true, "required": true, "additionalProperties": true, "patternProperties": true, "propertyNames": true,
	"dependentRequired": true, "dependentSchemas": true,
	"items": true, "prefixItems": true, "contains": true, "minContains": true, "maxContains": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true, "if": true, "then": true, "else": true,
	"$ref": true, "unevaluatedProperties": true, "unevaluatedItems": true,
	"x-coerce": true, "default": true,
}

func (d *differ) compareObjects(o node, oAt string, n node, nAt string, path string) {
	c := &cmp{d: d, o: o, n: n, oAt: oAt, nAt: nAt, path: path}
	c.annotations()
	c.types()
	c.values()
	c.bound("minimum", "exclusiveMinimum", true)
	c.bound("maximum", "exclusiveMaximum", false)
	c.multipleOf()
	c.bound("minLength", "", true)
	c.bound("maxLength", "", false)
	c.text("pattern", "whether one regular expression accepts everything the other did is not decided")
	c.text("format", "formats are asserted, and no format is known to include another")
	c.properties()
	c.additionalProperties()
	c.patternProperties()
	c.optionalSub("propertyNames", joinPath(path, "<key>"))
	c.bound("minProperties", "", true)
	c.bound("maxProperties", "", false)
	c.dependentRequired()
	c.dependentSchemas()
	c.items()
	c.prefixItems()
	c.contains()
	c.bound("minItems", "", true)
	c.bound("maxItems", "", false)
	c.uniqueItems()
	c.allOf()
	c.anyOf()
	c.oneOf()
	c.not()
	c.conditional()
	c.ref()
	c.unevaluated("unevaluatedProperties")
	c.unevaluated("unevaluatedItems")
	c.coerce()
	c.defaultValue()
	c.unknown()
}

// cmp is the comparison of one pair of flattened schema objects.
type cmp struct {
	d        *differ
	o, n     node
	oAt, nAt string
	path     string
}

func (c *cmp) get(x node, k string) (any, bool) {
	kw, ok := x[k]
	return kw.v, ok
}

// at is the pointer of keyword k: where it is in the new document, else
// where it was in the old one, else where it would go.
func (c *cmp) at(k string) string {
	if kw, ok := c.n[k]; ok {
		return kw.at
	}
	if kw, ok := c.o[k]; ok {
		return kw.at
	}
	return c.nAt + "/" + escape(k)
}

// sub answers keyword k as a subschema and its pointer. An absent keyword
// reads as true at the pointer it would have: every keyword this is used
// for constrains nothing when it is left out.
func (c *cmp) sub(x node, base, k string) (any, string) {
	if kw, ok := x[k]; ok {
		return kw.v, kw.at
	}
	return true, base + "/" + escape(k)
}

// same reports whether keyword k is equal on both sides, absent included.
func (c *cmp) same(k string) bool {
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	return oHas == nHas && (!oHas || equalJSON(ov, nv))
}

// unchanged reports whether the subschema keyword k can be skipped: equal
// text is not enough when it holds a reference, because the definition the
// reference names may have changed.
func (c *cmp) unchanged(k string) bool {
	if !c.same(k) {
		return false
	}
	kw, ok := c.n[k]
	return !ok || !hasRef(kw.v)
}

func hasRef(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["$ref"]; ok {
			return true
		}
		if _, ok := x["$dynamicRef"]; ok {
			return true
		}
		for _, e := range x {
			if hasRef(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasRef(e) {
				return true
			}
		}
	}
	return false
}

// opaque reports keyword k as changed without interpreting it: the gate
// cannot tell which direction the change goes, so it needs MAJOR.
func (c *cmp) opaque(k string) {
	if !c.same(k) {
		c.d.add(c.path, c.at(k), KindUnclassified, Major, "%s changed in a form the gate does not read, so it counts as breaking", k)
	}
}

// annotationOrder lists annotationKeys once, sorted, so reports come in a
// stable order without sorting per subschema.
var annotationOrder = sortedKeys(annotationKeys)

func (c *cmp) annotations() {
	for _, k := range annotationOrder {
		if c.same(k) {
			continue
		}
		ov, oHas := c.get(c.o, k)
		nv, nHas := c.get(c.n, k)
		kind := KindAnnotationChanged
		if descriptionKeys[k] {
			kind = KindDescriptionChanged
		}
		switch {
		case !oHas:
			c.d.add(c.path, c.at(k), kind, Patch, "%s added", k)
		case !nHas:
			c.d.add(c.path, c.at(k), kind, Patch, "%s removed", k)
		case kind == KindDescriptionChanged:
			c.d.add(c.path, c.at(k), kind, Patch, "%s changed", k)
		default:
			c.d.add(c.path, c.at(k), kind, Patch, "%s changed from %s to %s", k, show(ov), show(nv))
		}
	}
}

func typeNames(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		set, ok := stringSet(t)
		if !ok {
			return nil, false
		}
		return sortedKeys(set), true
	}
	return nil, false
}

func showTypes(ts []string) string {
	if len(ts) == 1 {
		return ts[0]
	}
	return "[" + strings.Join(ts, ", ") + "]"
}

// types reports any change of the type keyword as MAJOR, widening or not:
// integer to number accepts every old value, but a consumer or a generated
// client that checks types strictly still breaks.
func (c *cmp) types() {
	if c.same("type") {
		return
	}
	ov, oHas := c.get(c.o, "type")
	nv, nHas := c.get(c.n, "type")
	var ot, nt []string
	if oHas {
		var ok bool
		if ot, ok = typeNames(ov); !ok {
			c.opaque("type")
			return
		}
	}
	if nHas {
		var ok bool
		if nt, ok = typeNames(nv); !ok {
			c.opaque("type")
			return
		}
	}
	switch {
	case !oHas:
		c.d.add(c.path, c.at("type"), KindTypeChanged, Major, "type %s added where any type was allowed", showTypes(nt))
	case !nHas:
		c.d.add(c.path, c.at("type"), KindTypeChanged, Major, "type %s removed: any type is now allowed", showTypes(ot))
	case !equalStrings(ot, nt):
		c.d.add(c.path, c.at("type"), KindTypeChanged, Major, "type changed from %s to %s", showTypes(ot), showTypes(nt))
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// allowed answers the values enum and const together allow, as a set
// keyed by canonical JSON. present is false when neither keyword is there.
func allowed(x node) (vals map[string]any, present, ok bool) {
	ekw, hasEnum := x["enum"]
	ckw, hasConst := x["const"]
	if !hasEnum && !hasConst {
		return nil, false, true
	}
	var enum map[string]any
	if hasEnum {
		arr, isArr := ekw.v.([]any)
		if !isArr {
			return nil, true, false
		}
		enum = make(map[string]any, len(arr))
		for _, v := range arr {
			enum[valueKey(v)] = v
		}
	}
	if !hasConst {
		return enum, true, true
	}
	k := valueKey(ckw.v)
	if hasEnum {
		if _, in := enum[k]; !in {
			return map[string]any{}, true, true
		}
	}
	return map[string]any{k: ckw.v}, true, true
}

// values compares enum and const as one set of allowed values, so that
// replacing enum: [x] by const: x is not a change.
func (c *cmp) values() {
	if c.same("enum") && c.same("const") {
		return
	}
	k := "enum"
	if _, ok := c.n["enum"]; !ok {
		if _, ok := c.n["const"]; ok {
			k = "const"
		} else if _, ok := c.o["enum"]; !ok {
			k = "const"
		}
	}
	ov, oHas, ok1 := allowed(c.o)
	nv, nHas, ok2 := allowed(c.n)
	if !ok1 || !ok2 {
		c.opaque("enum")
		c.opaque("const")
		return
	}
	switch {
	case !oHas && !nHas:
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "values now limited to %s", showList(setValues(nv)))
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "value limit removed (was %s)", showList(setValues(ov)))
	default:
		if added := setMinus(nv, ov); len(added) > 0 {
			c.d.add(c.path, c.at(k), KindEnumValuesAdded, c.d.widened(), "%s values added: %s", k, showList(added))
		}
		if removed := setMinus(ov, nv); len(removed) > 0 {
			c.d.add(c.path, c.at(k), KindEnumValuesRemoved, c.d.narrowed(), "%s values removed: %s", k, showList(removed))
		}
	}
}

func setValues(s map[string]any) []any {
	out := make([]any, 0, len(s))
	for _, k := range sortedKeys(s) {
		out = append(out, s[k])
	}
	return out
}

func setMinus(a, b map[string]any) []any {
	var out []any
	for _, k := range sortedKeys(a) {
		if _, ok := b[k]; !ok {
			out = append(out, a[k])
		}
	}
	return out
}

// limit is one side's effective bound from an inclusive and an exclusive
// keyword, whichever is tighter.
type limit struct {
	n    json.Number
	excl bool
	kw   string
}

// readLimit answers the effective bound; nil when there is none. ok is
// false when a keyword is not a number or the two cannot be ordered.
func readLimit(x node, incl, excl string, lower bool) (*limit, bool) {
	var out *limit
	for _, k := range []string{incl, excl} {
		if k == "" {
			continue
		}
		kw, has := x[k]
		if !has {
			continue
		}
		num, isNum := kw.v.(json.Number)
		if !isNum {
			return nil, false
		}
		l := &limit{n: num, excl: k == excl, kw: k}
		if out == nil {
			out = l
			continue
		}
		c, ok := compareNumbers(l.n, out.n)
		if !ok {
			return nil, false
		}
		if (lower && c > 0) || (!lower && c < 0) || (c == 0 && l.excl) {
			out = l
		}
	}
	return out, true
}

// bound compares a lower or upper bound spelled by an inclusive keyword and
// optionally an exclusive one. They are compared as one effective bound, so
// that maximum: 100 becoming exclusiveMaximum: 101 on an integer reads as
// what it is, not as a removal plus an addition.
func (c *cmp) bound(incl, excl string, lower bool) {
	if c.same(incl) && (excl == "" || c.same(excl)) {
		return
	}
	ob, ok1 := readLimit(c.o, incl, excl, lower)
	nb, ok2 := readLimit(c.n, incl, excl, lower)
	if !ok1 || !ok2 {
		c.opaque(incl)
		if excl != "" {
			c.opaque(excl)
		}
		return
	}
	c.compareLimits(ob, nb, lower)
}

func (c *cmp) compareLimits(ob, nb *limit, lower bool) {
	side := "upper"
	if lower {
		side = "lower"
	}
	switch {
	case ob == nil && nb == nil:
		return
	case ob == nil:
		c.d.add(c.path, c.at(nb.kw), KindConstraintNarrowed, c.d.narrowed(), "%s %s added", nb.kw, nb.n)
		return
	case nb == nil:
		c.d.add(c.path, c.at(ob.kw), KindConstraintWidened, c.d.widened(), "%s %s removed", ob.kw, ob.n)
		return
	}
	at := c.at(nb.kw)
	cv, ok := compareNumbers(nb.n, ob.n)
	if !ok {
		c.d.add(c.path, at, KindConstraintChanged, Major, "%s bound changed from %s %s to %s %s, which cannot be ordered exactly", side, ob.kw, ob.n, nb.kw, nb.n)
		return
	}
	if cv == 0 && ob.excl == nb.excl {
		return
	}
	looser := cv < 0
	if !lower {
		looser = cv > 0
	}
	if cv == 0 {
		looser = ob.excl && !nb.excl
	}
	kind, bump := KindConstraintNarrowed, c.d.narrowed()
	if looser {
		kind, bump = KindConstraintWidened, c.d.widened()
	}
	if ob.kw == nb.kw {
		verb := "raised"
		if cv < 0 {
			verb = "lowered"
		}
		c.d.add(c.path, at, kind, bump, "%s %s from %s to %s", nb.kw, verb, ob.n, nb.n)
		return
	}
	direction := "narrower"
	if looser {
		direction = "wider"
	}
	c.d.add(c.path, at, kind, bump, "%s bound changed from %s %s to %s %s (%s)", side, ob.kw, ob.n, nb.kw, nb.n, direction)
}

// multipleOf widens when the new step divides the old one: every multiple
// of 0.01 is a multiple of 0.001, not the reverse.
func (c *cmp) multipleOf() {
	const k = "multipleOf"
	if c.same(k) {
		return
	}
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	on, ok1 := ov.(json.Number)
	nn, ok2 := nv.(json.Number)
	if (oHas && !ok1) || (nHas && !ok2) {
		c.opaque(k)
		return
	}
	switch {
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "multipleOf %s added", nn)
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "multipleOf %s removed", on)
	case numberKey(on) == numberKey(nn):
	case divides(on, nn):
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "multipleOf changed from %s to %s, which divides it", on, nn)
	case divides(nn, on):
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "multipleOf changed from %s to %s, a multiple of it", on, nn)
	default:
		c.d.add(c.path, c.at(k), KindConstraintChanged, Major, "multipleOf changed from %s to %s; neither divides the other, so some old values are refused and some new ones were never promised", on, nn)
	}
}

// text compares a keyword whose value is a string that cannot be ordered
// (pattern, format): adding it narrows, removing it widens, and replacing
// it is undecided.
func (c *cmp) text(k, why string) {
	if c.same(k) {
		return
	}
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	os, ok1 := ov.(string)
	ns, ok2 := nv.(string)
	if (oHas && !ok1) || (nHas && !ok2) {
		c.opaque(k)
		return
	}
	switch {
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "%s %q added", k, ns)
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "%s %q removed", k, os)
	default:
		c.d.add(c.path, c.at(k), KindConstraintChanged, Major, "%s changed from %q to %q; %s, so it counts as breaking", k, os, ns, why)
	}
}

func (c *cmp) uniqueItems() {
	const k = "uniqueItems"
	if c.same(k) {
		return
	}
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	ob, ok1 := ov.(bool)
	nb, ok2 := nv.(bool)
	if (oHas && !ok1) || (nHas && !ok2) {
		c.opaque(k)
		return
	}
	switch {
	case !ob && nb:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "items must now be unique")
	case ob && !nb:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "items no longer need to be unique")
	}
}

// properties compares declared fields and which of them are required. The
// §6.4 rules are about fields, not about sets of valid values: adding an
// optional field is MINOR on either side even though, under an open
// additionalProperties, it technically constrains a name that used to take
// any value; removing a field is MAJOR on either side even though, under an
// open additionalProperties, it technically accepts more. A caller codes
// against the fields a schema declares, so those rules follow the caller.
func (c *cmp) properties() {
	op, ok1 := c.props(c.o)
	np, ok2 := c.props(c.n)
	or, ok3 := c.required(c.o)
	nr, ok4 := c.required(c.n)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		c.opaque("properties")
		c.opaque("required")
		return
	}
	names := map[string]bool{}
	for _, m := range []map[string]keyword{op, np} {
		for k := range m {
			names[k] = true
		}
	}
	for _, m := range []map[string]bool{or, nr} {
		for k := range m {
			names[k] = true
		}
	}
	oAP, oAPAt := c.sub(c.o, c.oAt, "additionalProperties")
	for _, name := range sortedKeys(names) {
		path := joinPath(c.path, name)
		ow, inO := op[name]
		nw, inN := np[name]
		inO = inO && !isFalse(ow.v)
		inN = inN && !isFalse(nw.v)
		rO, rN := or[name], nr[name]
		switch {
		case inO && !inN:
			at := ow.at
			if inNew := np[name]; inNew.at != "" {
				at = inNew.at
			}
			if rO {
				c.d.add(path, at, KindFieldRemoved, Major, "removed (it was required)")
			} else {
				c.d.add(path, at, KindFieldRemoved, Major, "removed")
			}
		case !inO && inN:
			if rN {
				// A consumer of an output is never hurt by a field that is
				// always there; a caller of an input that does not send it
				// is refused.
				b := Minor
				if c.d.side == SideInput {
					b = Major
				}
				c.d.add(path, nw.at, KindFieldAddedRequired, b, "added as required")
			} else {
				c.d.add(path, nw.at, KindFieldAddedOptional, Minor, "added as optional")
			}
			// When the old schema stated a shape for undeclared fields, a
			// caller could already send this name with that shape; the new
			// declaration must keep those values valid.
			if _, isObj := oAP.(map[string]any); isObj {
				c.d.compare(oAP, oAPAt, nw.v, nw.at, path)
			}
		case inO && inN:
			c.requiredChange(path, c.at("required"), rO, rN)
			c.d.compare(ow.v, ow.at, nw.v, nw.at, path)
		default:
			c.requiredChange(path, c.at("required"), rO, rN)
		}
	}
}

func (c *cmp) requiredChange(path, at string, before, after bool) {
	switch {
	case !before && after:
		if c.d.side == SideInput {
			c.d.add(path, at, KindRequiredAdded, c.d.narrowed(), "now required: a caller that omits it is refused")
		} else {
			c.d.add(path, at, KindRequiredAdded, c.d.narrowed(), "now always present")
		}
	case before && !after:
		if c.d.side == SideInput {
			c.d.add(path, at, KindRequiredRemoved, c.d.widened(), "no longer required")
		} else {
			c.d.add(path, at, KindRequiredRemoved, c.d.widened(), "no longer required: consumers that read it may find it missing")
		}
	}
}

func (c *cmp) props(x node) (map[string]keyword, bool) {
	kw, has := x["properties"]
	if !has {
		return nil, true
	}
	m, ok := kw.v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]keyword, len(m))
	for k, v := range m {
		out[k] = keyword{v: v, at: kw.at + "/" + escape(k)}
	}
	return out, true
}

func (c *cmp) required(x node) (map[string]bool, bool) {
	kw, has := x["required"]
	if !has {
		return nil, true
	}
	return stringSet(kw.v)
}

// additionalProperties compares what undeclared fields may be. Its absence
// is true. Opening a closed object is MINOR for an input, but MAJOR for an
// output: a consumer was promised that no other fields appear.
func (c *cmp) additionalProperties() {
	const k = "additionalProperties"
	if c.unchanged(k) {
		return
	}
	ov, oAt := c.sub(c.o, c.oAt, k)
	nv, nAt := c.sub(c.n, c.nAt, k)
	ob, oBool := ov.(bool)
	nb, nBool := nv.(bool)
	if oBool && nBool {
		if ob != nb {
			if nb {
				c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "undeclared fields are now allowed (additionalProperties was false)")
			} else {
				c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "undeclared fields are no longer allowed (additionalProperties is now false)")
			}
		}
		return
	}
	c.d.compare(ov, oAt, nv, nAt, joinPath(c.path, "*"))
}

// patternProperties compares the schemas of patterns present on both sides.
// A pattern added or removed changes which fields fall to
// additionalProperties, which is not analysed, so it needs MAJOR.
func (c *cmp) patternProperties() {
	const k = "patternProperties"
	if c.unchanged(k) {
		return
	}
	ov, _ := c.get(c.o, k)
	nv, _ := c.get(c.n, k)
	om, ok1 := asMap(ov)
	nm, ok2 := asMap(nv)
	if !ok1 || !ok2 {
		c.opaque(k)
		return
	}
	base := c.at(k)
	for _, p := range sortedKeys(union(om, nm)) {
		o, inO := om[p]
		n, inN := nm[p]
		switch {
		case inO && inN:
			c.d.compare(o, c.o[k].at+"/"+escape(p), n, c.n[k].at+"/"+escape(p), joinPath(c.path, "*"))
		case inN:
			c.d.add(c.path, base+"/"+escape(p), KindConstraintChanged, Major, "patternProperties %q added; how it shares fields with properties and additionalProperties is not analysed", p)
		default:
			c.d.add(c.path, base+"/"+escape(p), KindConstraintChanged, Major, "patternProperties %q removed; how it shares fields with properties and additionalProperties is not analysed", p)
		}
	}
}

// asMap reads an optional object-valued keyword; absent is empty.
func asMap(v any) (map[string]any, bool) {
	if v == nil {
		return map[string]any{}, true
	}
	m, ok := v.(map[string]any)
	return m, ok
}

func union(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// optionalSub compares a keyword whose subschema constrains more the more
// it says, and whose absence is true.
func (c *cmp) optionalSub(k, path string) {
	if c.unchanged(k) {
		return
	}
	ov, oAt := c.sub(c.o, c.oAt, k)
	nv, nAt := c.sub(c.n, c.nAt, k)
	c.d.compare(ov, oAt, nv, nAt, path)
}

func (c *cmp) dependentRequired() {
	const k = "dependentRequired"
	if c.same(k) {
		return
	}
	ov, _ := c.get(c.o, k)
	nv, _ := c.get(c.n, k)
	om, ok1 := asMap(ov)
	nm, ok2 := asMap(nv)
	if !ok1 || !ok2 {
		c.opaque(k)
		return
	}
	at := c.at(k)
	for _, name := range sortedKeys(union(om, nm)) {
		os, ok1 := optionalStrings(om[name])
		ns, ok2 := optionalStrings(nm[name])
		if !ok1 || !ok2 {
			c.opaque(k)
			return
		}
		for _, r := range sortedKeys(ns) {
			if !os[r] {
				c.d.add(joinPath(c.path, r), at+"/"+escape(name), KindRequiredAdded, c.d.narrowed(), "now required whenever %s is present", name)
			}
		}
		for _, r := range sortedKeys(os) {
			if !ns[r] {
				c.d.add(joinPath(c.path, r), at+"/"+escape(name), KindRequiredRemoved, c.d.widened(), "no longer required whenever %s is present", name)
			}
		}
	}
}

func optionalStrings(v any) (map[string]bool, bool) {
	if v == nil {
		return map[string]bool{}, true
	}
	return stringSet(v)
}

func (c *cmp) dependentSchemas() {
	const k = "dependentSchemas"
	if c.unchanged(k) {
		return
	}
	ov, _ := c.get(c.o, k)
	nv, _ := c.get(c.n, k)
	om, ok1 := asMap(ov)
	nm, ok2 := asMap(nv)
	if !ok1 || !ok2 {
		c.opaque(k)
		return
	}
	for _, name := range sortedKeys(union(om, nm)) {
		o, inO := om[name]
		n, inN := nm[name]
		switch {
		case inO && inN:
			c.d.compare(o, c.o[k].at+"/"+escape(name), n, c.n[k].at+"/"+escape(name), c.path)
		case inN:
			c.d.add(c.path, c.n[k].at+"/"+escape(name), KindConstraintNarrowed, c.d.narrowed(), "when %s is present, another schema now applies", name)
		default:
			c.d.add(c.path, c.o[k].at+"/"+escape(name), KindConstraintWidened, c.d.widened(), "when %s is present, a schema no longer applies", name)
		}
	}
}

func (c *cmp) items() {
	const k = "items"
	if c.unchanged(k) {
		return
	}
	ov, _ := c.get(c.o, k)
	nv, _ := c.get(c.n, k)
	_, oArr := ov.([]any)
	_, nArr := nv.([]any)
	if oArr || nArr {
		// The array form belongs to older drafts; its meaning depends on
		// the draft, so it is not read.
		c.opaque(k)
		return
	}
	c.optionalSub(k, c.path+"[]")
}

// prefixItems compares position by position. A change in the number of
// positions moves items between prefixItems and items, which is not
// analysed.
func (c *cmp) prefixItems() {
	const k = "prefixItems"
	if c.unchanged(k) {
		return
	}
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	ol, ok1 := ov.([]any)
	nl, ok2 := nv.([]any)
	if (oHas && !ok1) || (nHas && !ok2) {
		c.opaque(k)
		return
	}
	if len(ol) != len(nl) {
		c.d.add(c.path, c.at(k), KindConstraintChanged, Major, "prefixItems changed from %d to %d positions; which schema governs which position shifts, which is not analysed", len(ol), len(nl))
		return
	}
	for i := range ol {
		c.d.compare(ol[i], c.o[k].at+"/"+strconv.Itoa(i), nl[i], c.n[k].at+"/"+strconv.Itoa(i), c.path+"["+strconv.Itoa(i)+"]")
	}
}

// contains is monotone on its own: a wider contains is easier to satisfy.
// With maxContains it is not (a wider contains can match too many items),
// so then any change needs MAJOR.
func (c *cmp) contains() {
	const k = "contains"
	if c.unchanged(k) && c.same("minContains") && c.same("maxContains") {
		return
	}
	_, oHas := c.get(c.o, k)
	_, nHas := c.get(c.n, k)
	switch {
	case !oHas && !nHas:
		// minContains and maxContains mean nothing without contains.
		c.opaque("minContains")
		c.opaque("maxContains")
		return
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "arrays must now contain an item matching contains")
		return
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "arrays no longer need to contain an item matching contains")
		return
	}
	start := len(c.d.changes)
	c.d.compare(c.o[k].v, c.o[k].at, c.n[k].v, c.n[k].at, c.path+"[]")
	_, oMax := c.o["maxContains"]
	_, nMax := c.n["maxContains"]
	if oMax || nMax {
		c.d.escalate(start, "contains is bounded by maxContains, where a wider match can exceed the bound")
	}
	one := keyword{v: json.Number("1")}
	withDefault := func(x node) node {
		if _, ok := x["minContains"]; ok {
			return x
		}
		y := node{"minContains": one}
		if m, ok := x["maxContains"]; ok {
			y["maxContains"] = m
		}
		return y
	}
	ob, ok1 := readLimit(withDefault(c.o), "minContains", "", true)
	nb, ok2 := readLimit(withDefault(c.n), "minContains", "", true)
	if !ok1 || !ok2 {
		c.opaque("minContains")
	} else {
		c.compareLimits(ob, nb, true)
	}
	c.bound("maxContains", "", false)
}

// match pairs the branches of two subschema lists: equal ones first,
// wherever they moved, then the rest in order. Unpaired indexes are
// branches that were added or removed.
func match(ol, nl []any) (pairs [][2]int, oExtra, nExtra []int) {
	usedN := make([]bool, len(nl))
	pairedO := make([]bool, len(ol))
	byKey := make(map[string][]int, len(nl))
	for j, n := range nl {
		k := valueKey(n)
		byKey[k] = append(byKey[k], j)
	}
	for i, o := range ol {
		k := valueKey(o)
		if js := byKey[k]; len(js) > 0 {
			j := js[0]
			byKey[k] = js[1:]
			usedN[j], pairedO[i] = true, true
			pairs = append(pairs, [2]int{i, j})
		}
	}
	j := 0
	for i := range ol {
		if pairedO[i] {
			continue
		}
		for j < len(nl) && usedN[j] {
			j++
		}
		if j == len(nl) {
			oExtra = append(oExtra, i)
			continue
		}
		usedN[j] = true
		pairs = append(pairs, [2]int{i, j})
	}
	for j := range nl {
		if !usedN[j] {
			nExtra = append(nExtra, j)
		}
	}
	return pairs, oExtra, nExtra
}

// list reads a keyword whose value is a list of subschemas.
func (c *cmp) list(k string) (ol, nl []any, oHas, nHas, ok bool) {
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	ol, ok1 := ov.([]any)
	nl, ok2 := nv.([]any)
	return ol, nl, oHas, nHas, (!oHas || ok1) && (!nHas || ok2)
}

// branches answers keyword k's lists on both sides, and whether they are
// to be compared branch by branch: not when unchanged, nor when either is
// not a list (reported as opaque).
func (c *cmp) branches(k string) (ol, nl []any, oHas, nHas, ok bool) {
	if c.unchanged(k) {
		return nil, nil, false, false, false
	}
	if ol, nl, oHas, nHas, ok = c.list(k); !ok {
		c.opaque(k)
	}
	return ol, nl, oHas, nHas, ok
}

// pairBranches compares the branches match pairs, and answers the indexes
// of the old and the new branches left unpaired.
func (c *cmp) pairBranches(k string, ol, nl []any) (oExtra, nExtra []int) {
	pairs, oExtra, nExtra := match(ol, nl)
	for _, p := range pairs {
		c.d.compare(ol[p[0]], c.o[k].at+"/"+strconv.Itoa(p[0]), nl[p[1]], c.n[k].at+"/"+strconv.Itoa(p[1]), c.path)
	}
	return oExtra, nExtra
}

// unpaired records each branch only one side has: the new side's when
// added, the old side's otherwise; msg formats the branch's index.
func (c *cmp) unpaired(k string, idx []int, added bool, kind Kind, bump Bump, msg string) {
	side := c.o[k].at
	if added {
		side = c.n[k].at
	}
	for _, i := range idx {
		c.d.add(c.path, side+"/"+strconv.Itoa(i), kind, bump, msg, i)
	}
}

// allOf, when it could not be folded into its parent, is compared branch
// by branch: every branch must hold, so a wider branch widens the whole.
func (c *cmp) allOf() {
	const k = "allOf"
	ol, nl, oHas, nHas, ok := c.branches(k)
	switch {
	case !ok:
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "allOf added: values must also match %d more schema(s)", len(nl))
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "allOf removed: %d schema(s) no longer apply", len(ol))
	default:
		oExtra, nExtra := c.pairBranches(k, ol, nl)
		c.unpaired(k, nExtra, true, KindConstraintNarrowed, c.d.narrowed(), "allOf: schema %d, which values must also match, was added")
		c.unpaired(k, oExtra, false, KindConstraintWidened, c.d.widened(), "allOf: schema %d, which values had to match, was removed")
	}
}

// anyOf is compared branch by branch: one branch must hold, so a wider
// branch or a new branch widens the whole. Pairing branches by position is
// only a guess when several changed, but any pairing gives a sound verdict,
// because the whole only narrows if some branch narrows or goes away.
func (c *cmp) anyOf() {
	const k = "anyOf"
	ol, nl, oHas, nHas, ok := c.branches(k)
	switch {
	case !ok:
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "anyOf added: values must now match one of %d alternatives", len(nl))
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "anyOf removed: values no longer need to match one of %d alternatives", len(ol))
	default:
		oExtra, nExtra := c.pairBranches(k, ol, nl)
		c.unpaired(k, nExtra, true, KindConstraintWidened, c.d.widened(), "anyOf: alternative %d added")
		c.unpaired(k, oExtra, false, KindConstraintNarrowed, c.d.narrowed(), "anyOf: alternative %d removed")
	}
}

// oneOf is not monotone: widening one branch can make a value match two,
// which refuses it. So only documentation changes inside it keep their
// bump; everything else needs MAJOR.
func (c *cmp) oneOf() {
	const k = "oneOf"
	ol, nl, oHas, nHas, ok := c.branches(k)
	switch {
	case !ok:
	case !oHas || !nHas:
		verb := "added"
		if !nHas {
			verb = "removed"
		}
		c.d.add(c.path, c.at(k), KindConstraintChanged, Major, "oneOf %s; exactly-one-of alternatives are not analysed", verb)
	default:
		start := len(c.d.changes)
		oExtra, nExtra := c.pairBranches(k, ol, nl)
		c.d.escalate(start, "inside oneOf, where a wider alternative can overlap another and refuse a value")
		c.unpaired(k, nExtra, true, KindConstraintChanged, Major, "oneOf: alternative %d added; it may overlap an existing one and refuse values that matched exactly one")
		c.unpaired(k, oExtra, false, KindConstraintChanged, Major, "oneOf: alternative %d removed")
	}
}

// not inverts direction: a wider schema under not refuses more.
// Rather than track the inversion, every non-documentation change under it
// needs MAJOR.
func (c *cmp) not() {
	const k = "not"
	if c.unchanged(k) {
		return
	}
	_, oHas := c.get(c.o, k)
	_, nHas := c.get(c.n, k)
	switch {
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "not added: values matching it are now refused")
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "not removed: values matching it are accepted again")
	default:
		start := len(c.d.changes)
		c.d.compare(c.o[k].v, c.o[k].at, c.n[k].v, c.n[k].at, c.path)
		c.d.escalate(start, "inside not, where a wider schema refuses more")
	}
}

// conditional compares if/then/else. then and else are monotone; if is not
// (it chooses which of the two applies), so changes to it need MAJOR.
func (c *cmp) conditional() {
	if !c.unchanged("if") {
		_, oHas := c.get(c.o, "if")
		_, nHas := c.get(c.n, "if")
		if oHas && nHas {
			start := len(c.d.changes)
			c.d.compare(c.o["if"].v, c.o["if"].at, c.n["if"].v, c.n["if"].at, c.path)
			c.d.escalate(start, "inside if, which chooses between then and else")
		} else {
			c.d.add(c.path, c.at("if"), KindConstraintChanged, Major, "if added or removed; conditional schemas are not analysed")
		}
	}
	c.optionalSub("then", c.path)
	c.optionalSub("else", c.path)
}

// ref compares a $ref that could not be folded into its schema (it has
// sibling keywords that overlap its target, or it does not resolve inside
// the document). Both must hold, so it behaves like one more allOf branch.
func (c *cmp) ref() {
	const k = "$ref"
	if c.same(k) {
		// Equal strings still need their targets compared: the definition
		// they name may have changed.
		kw, has := c.o[k]
		if !has {
			return
		}
		s, _ := kw.v.(string)
		ot, oAt, ok1 := c.d.old.resolve(s)
		nt, nAt, ok2 := c.d.new.resolve(s)
		if ok1 && ok2 {
			c.d.compare(ot, oAt, nt, nAt, c.path)
		} else if ok1 != ok2 {
			c.d.add(c.path, c.at(k), KindUnclassified, Major, "$ref %q resolves in only one of the documents", s)
		}
		return
	}
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	os, ok1 := ov.(string)
	ns, ok2 := nv.(string)
	if (oHas && !ok1) || (nHas && !ok2) {
		c.opaque(k)
		return
	}
	switch {
	case !oHas:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "values must now also match %s", ns)
	case !nHas:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "values no longer need to match %s", os)
	default:
		ot, oAt, r1 := c.d.old.resolve(os)
		nt, nAt, r2 := c.d.new.resolve(ns)
		if r1 && r2 {
			c.d.compare(ot, oAt, nt, nAt, c.path)
			return
		}
		c.d.add(c.path, c.at(k), KindUnclassified, Major, "$ref changed from %q to %q, and a reference outside the document cannot be compared", os, ns)
	}
}

// unevaluated compares unevaluatedProperties or unevaluatedItems. Which
// fields count as evaluated depends on every applicator around it, so only
// documentation changes inside keep their bump.
func (c *cmp) unevaluated(k string) {
	if c.unchanged(k) {
		return
	}
	_, oHas := c.get(c.o, k)
	_, nHas := c.get(c.n, k)
	if !oHas || !nHas {
		c.d.add(c.path, c.at(k), KindConstraintChanged, Major, "%s added or removed; what counts as evaluated is not analysed", k)
		return
	}
	start := len(c.d.changes)
	c.d.compare(c.o[k].v, c.o[k].at, c.n[k].v, c.n[k].at, c.path+"[unevaluated]")
	c.d.escalate(start, "inside "+k+", whose reach depends on every other keyword")
}

// coerce compares the platform's x-coerce extension. On an input it
// decides which repairs the platform makes to arguments: false turns off
// even the default trims, true adds digit and single-value coercions. So
// it orders false < absent < true by how much is accepted. Outputs are
// never coerced, so there it is documentation.
func (c *cmp) coerce() {
	const k = "x-coerce"
	if c.same(k) {
		return
	}
	level := func(x node) (int, bool) {
		kw, has := x[k]
		if !has {
			return 0, true
		}
		b, ok := kw.v.(bool)
		if !ok {
			return 0, false
		}
		if b {
			return 1, true
		}
		return -1, true
	}
	ol, ok1 := level(c.o)
	nl, ok2 := level(c.n)
	if !ok1 || !ok2 {
		c.opaque(k)
		return
	}
	switch {
	case c.d.side != SideInput:
		c.d.add(c.path, c.at(k), KindAnnotationChanged, Patch, "x-coerce changed; outputs are never coerced")
	case nl > ol:
		c.d.add(c.path, c.at(k), KindConstraintWidened, c.d.widened(), "argument coercion loosened (x-coerce)")
	case nl < ol:
		c.d.add(c.path, c.at(k), KindConstraintNarrowed, c.d.narrowed(), "argument coercion tightened (x-coerce): values that used to be repaired are now refused")
	}
}

// defaultValue compares default. It asserts nothing, but on an input it
// documents what the tool does when a caller leaves the field out: a new or
// withdrawn default there changes behaviour for callers that rely on it,
// so it needs MAJOR. Documenting a default where none was stated only
// describes existing behaviour.
func (c *cmp) defaultValue() {
	const k = "default"
	if c.same(k) {
		return
	}
	ov, oHas := c.get(c.o, k)
	nv, nHas := c.get(c.n, k)
	switch {
	case c.d.side != SideInput:
		c.d.add(c.path, c.at(k), KindDefaultChanged, Patch, "default changed; on an output it only documents")
	case !oHas:
		c.d.add(c.path, c.at(k), KindDefaultChanged, Patch, "default %s documented", show(nv))
	case !nHas:
		c.d.add(c.path, c.at(k), KindDefaultChanged, Major, "default %s withdrawn: callers that leave the field out can no longer rely on it", show(ov))
	default:
		c.d.add(c.path, c.at(k), KindDefaultChanged, Major, "default changed from %s to %s: callers that leave the field out get different behaviour", show(ov), show(nv))
	}
}

// unknown compares every keyword nothing above reads: extension keywords,
// keywords of other drafts, misspellings. The gate cannot tell what they
// do, so any change to one needs MAJOR.
func (c *cmp) unknown() {
	var keys map[string]bool
	for _, x := range []node{c.o, c.n} {
		for k := range x {
			if !handled[k] && !annotationKeys[k] {
				if keys == nil {
					keys = map[string]bool{}
				}
				keys[k] = true
			}
		}
	}
	for _, k := range sortedKeys(keys) {
		if !c.same(k) {
			c.d.add(c.path, c.at(k), KindUnclassified, Major, "keyword %s changed; the gate does not know what it asserts, so it counts as breaking", k)
		}
	}
}
