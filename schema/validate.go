package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolplane/toolplane"
)

// Check coerces v under the bounded rules, then validates the coerced value
// strictly. It answers the coerced value (which later steps see and hash),
// the coercions made, and every violation in a stable order; no violations
// means the arguments are valid.
func (s *Schema) Check(v any) (any, []Coercion, []toolplane.Violation) {
	out, log := s.Coerce(v)
	return out, log, s.Validate(out)
}

// Validate validates v strictly, with no coercion, and answers every
// violation sorted by field path, then constraint, then message. A value
// holding a number too large to read, or whose validation would exceed the
// schema's work limit, is answered with that one violation, unchecked.
func (s *Schema) Validate(v any) []toolplane.Violation {
	// The fast path may spend a quarter of the regex work limit: an
	// ordinary call needs a tiny fraction of it, and a value that needs
	// more goes to the reference path, which would match its patterns a
	// second time. So the worst admitted value runs at most 1.25 times the
	// limit's worth of pattern steps.
	if budget := s.maxRegex / 4; s.fast != nil && s.fast.within(v, &budget) {
		return nil
	}
	if at, n, bad := unreadableNumber(v); bad {
		return unreadable(at, n)
	}
	if ok, regex := s.cost.withinWork(v, work{evals: s.maxWork, regex: s.maxRegex}); !ok {
		if regex {
			return overRegexWork(s.maxRegex)
		}
		return overWork(s.maxWork)
	}
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		// The validator only fails with a ValidationError; anything else is
		// an instance it could not read (a Go value outside plain JSON).
		return []toolplane.Violation{{FieldPath: "", Constraint: "type", Message: "arguments are not plain JSON: " + err.Error(), SuggestedFix: "send a JSON object"}}
	}
	var out []toolplane.Violation
	s.collect(ve, v, &out)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.FieldPath != b.FieldPath {
			return a.FieldPath < b.FieldPath
		}
		if a.Constraint != b.Constraint {
			return a.Constraint < b.Constraint
		}
		return a.Message < b.Message
	})
	return dedupe(out)
}

func dedupe(vs []toolplane.Violation) []toolplane.Violation {
	out := vs[:0]
	for i, v := range vs {
		if i > 0 && v == vs[i-1] {
			continue
		}
		out = append(out, v)
	}
	return out
}

func (s *Schema) collect(e *jsonschema.ValidationError, inst any, out *[]toolplane.Violation) {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf, *kind.Not:
		// A failed alternative set is one violation at its location: listing
		// each alternative's own failures would tell the model to satisfy
		// every branch at once.
		*out = append(*out, s.describe(e, inst)...)
		return
	}
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			s.collect(c, inst, out)
		}
		return
	}
	*out = append(*out, s.describe(e, inst)...)
}

// describe turns one leaf failure into violations. The message names the
// field and the value received; the fix says what to send instead.
func (s *Schema) describe(e *jsonschema.ValidationError, inst any) []toolplane.Violation {
	at := pointer(e.InstanceLocation)
	field := fieldName(at)
	got := show(valueAt(inst, e.InstanceLocation))
	one := func(constraint, msg, fix string) []toolplane.Violation {
		return []toolplane.Violation{{FieldPath: at, Constraint: constraint, Message: msg, SuggestedFix: fix}}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var vs []toolplane.Violation
		for _, m := range k.Missing {
			p := at + "/" + escape(m)
			vs = append(vs, toolplane.Violation{FieldPath: p, Constraint: "required", Message: fmt.Sprintf("%s is required but missing", fieldName(p)), SuggestedFix: s.fixFor(p, fmt.Sprintf("add %q", m))})
		}
		return vs
	case *kind.AdditionalProperties:
		var vs []toolplane.Violation
		allowed := s.allowed(at)
		for _, p := range k.Properties {
			fp := at + "/" + escape(p)
			fix := fmt.Sprintf("remove %q", p)
			if allowed != "" {
				fix += "; the accepted fields are " + allowed
			}
			vs = append(vs, toolplane.Violation{FieldPath: fp, Constraint: "additionalProperties", Message: fmt.Sprintf("%s is not an accepted field (got %s)", fieldName(fp), show(valueAt(inst, append(append([]string(nil), e.InstanceLocation...), p)))), SuggestedFix: fix})
		}
		return vs
	case *kind.DependentRequired:
		var vs []toolplane.Violation
		for _, m := range k.Missing {
			p := at + "/" + escape(m)
			vs = append(vs, toolplane.Violation{FieldPath: p, Constraint: "dependentRequired", Message: fmt.Sprintf("%s is required when %s is present", fieldName(p), k.Prop), SuggestedFix: fmt.Sprintf("add %q, or remove %q", m, k.Prop)})
		}
		return vs
	case *kind.Type:
		want := strings.Join(k.Want, " or ")
		return one("type", fmt.Sprintf("%s must be %s %s (got %s %s)", field, article(want), want, k.Got, got), s.fixFor(at, "send "+article(want)+" "+want))
	case *kind.Enum:
		opts := list(k.Want)
		return one("enum", fmt.Sprintf("%s must be one of %s (got %s)", field, opts, got), "use one of "+opts)
	case *kind.Const:
		return one("const", fmt.Sprintf("%s must be %s (got %s)", field, show(k.Want), got), "send "+show(k.Want))
	case *kind.Pattern:
		return one("pattern", fmt.Sprintf("%s must match the pattern %s (got %s)", field, k.Want, got), s.fixFor(at, "send a value matching "+k.Want))
	case *kind.Format:
		return one("format", fmt.Sprintf("%s must be a valid %s (got %s)", field, k.Want, got), "send a valid "+k.Want)
	case *kind.Minimum:
		return one("minimum", fmt.Sprintf("%s must be >= %s (got %s)", field, rat(k.Want), got), "send a value of at least "+rat(k.Want))
	case *kind.Maximum:
		return one("maximum", fmt.Sprintf("%s must be <= %s (got %s)", field, rat(k.Want), got), "send a value of at most "+rat(k.Want)+"; split the request if it needs more")
	case *kind.ExclusiveMinimum:
		return one("exclusiveMinimum", fmt.Sprintf("%s must be > %s (got %s)", field, rat(k.Want), got), "send a value greater than "+rat(k.Want))
	case *kind.ExclusiveMaximum:
		return one("exclusiveMaximum", fmt.Sprintf("%s must be < %s (got %s)", field, rat(k.Want), got), "send a value less than "+rat(k.Want))
	case *kind.MultipleOf:
		return one("multipleOf", fmt.Sprintf("%s must be a multiple of %s (got %s)", field, rat(k.Want), got), "send a multiple of "+rat(k.Want))
	case *kind.MinLength:
		return one("minLength", fmt.Sprintf("%s must be at least %d characters (got %d)", field, k.Want, k.Got), fmt.Sprintf("send at least %d characters", k.Want))
	case *kind.MaxLength:
		return one("maxLength", fmt.Sprintf("%s must be at most %d characters (got %d)", field, k.Want, k.Got), fmt.Sprintf("shorten it to at most %d characters", k.Want))
	case *kind.MinItems:
		return one("minItems", fmt.Sprintf("%s must have at least %d items (got %d)", field, k.Want, k.Got), fmt.Sprintf("send at least %d items", k.Want))
	case *kind.MaxItems:
		return one("maxItems", fmt.Sprintf("%s must have at most %d items (got %d)", field, k.Want, k.Got), fmt.Sprintf("send at most %d items; split the request into several calls", k.Want))
	case *kind.MinProperties:
		return one("minProperties", fmt.Sprintf("%s must have at least %d fields (got %d)", field, k.Want, k.Got), fmt.Sprintf("send at least %d fields", k.Want))
	case *kind.MaxProperties:
		return one("maxProperties", fmt.Sprintf("%s must have at most %d fields (got %d)", field, k.Want, k.Got), fmt.Sprintf("send at most %d fields", k.Want))
	case *kind.UniqueItems:
		return one("uniqueItems", fmt.Sprintf("%s must not repeat items (items %d and %d are equal)", field, k.Duplicates[0], k.Duplicates[1]), "remove the repeated items")
	case *kind.FalseSchema:
		return one("false", fmt.Sprintf("%s is not allowed (got %s)", field, got), "remove "+field)
	case *kind.AnyOf:
		return one("anyOf", fmt.Sprintf("%s matches none of the accepted shapes (got %s)", field, got), s.fixFor(at, "send a value of one of the shapes the schema describes"))
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return one("oneOf", fmt.Sprintf("%s matches more than one of the exclusive shapes (got %s)", field, got), "send a value that matches exactly one shape")
		}
		return one("oneOf", fmt.Sprintf("%s matches none of the accepted shapes (got %s)", field, got), s.fixFor(at, "send a value of exactly one of the shapes the schema describes"))
	case *kind.Not:
		return one("not", fmt.Sprintf("%s has a form the schema excludes (got %s)", field, got), "send a different value")
	case *kind.PropertyNames:
		return one("propertyNames", fmt.Sprintf("%s has a field name the schema refuses: %q", field, k.Property), fmt.Sprintf("rename or remove %q", k.Property))
	case *kind.Contains:
		return one("contains", fmt.Sprintf("%s must contain at least one matching item", field), "add an item of the described shape")
	case *kind.MinContains:
		return one("minContains", fmt.Sprintf("%s must contain at least %d matching items (got %d)", field, k.Want, len(k.Got)), fmt.Sprintf("add matching items, at least %d", k.Want))
	case *kind.MaxContains:
		return one("maxContains", fmt.Sprintf("%s must contain at most %d matching items (got %d)", field, k.Want, len(k.Got)), fmt.Sprintf("remove matching items, keep at most %d", k.Want))
	}
	kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
	if kw == "" {
		kw = "schema"
	}
	return one(kw, fmt.Sprintf("%s: %s (got %s)", field, strings.TrimPrefix(e.Error(), "jsonschema validation failed with "), got), "correct "+field+" as the schema describes")
}

// fixFor extends a fix with the field's own description, which is where a
// tool author writes the example a model needs.
func (s *Schema) fixFor(at, fix string) string {
	n := s.nodeAt(at)
	if n == nil {
		return fix
	}
	if len(n.enum) > 0 && n.types&^tString == 0 {
		fix += " (one of " + strings.Join(n.enum, ", ") + ")"
	}
	if n.desc != "" {
		d := n.desc
		if len(d) > 160 {
			d = d[:160] + "…"
		}
		fix += ": " + strings.TrimSpace(d)
	}
	return fix
}

// allowed lists the declared fields of the object at pointer at.
func (s *Schema) allowed(at string) string {
	n := s.nodeAt(at)
	if n == nil || len(n.props) == 0 {
		return ""
	}
	names := make([]string, 0, len(n.props))
	for k := range n.props {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// nodeAt finds the coercion plan for an instance pointer: the same walk the
// coercion makes, so a fix reads the schema location the model must fix.
func (s *Schema) nodeAt(at string) *node {
	n := s.plan
	if at == "" {
		return n
	}
	for _, tok := range strings.Split(at[1:], "/") {
		if n == nil {
			return nil
		}
		tok = unescape(tok)
		if c, ok := n.props[tok]; ok {
			n = c
		} else if i, err := strconv.Atoi(tok); err == nil && (n.items != nil || i < len(n.prefix)) {
			n = n.elem(i)
		} else {
			n = n.additional
		}
	}
	return n
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

// fieldName is how a message names a field: its pointer without the leading
// slash, or "arguments" for the whole object.
func fieldName(at string) string {
	if at == "" {
		return "arguments"
	}
	return at[1:]
}

func valueAt(v any, loc []string) any {
	cur := v
	for _, t := range loc {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// maxShown bounds how much of a received value a message repeats: enough to
// recognise it, never a second copy of a large payload.
const maxShown = 80

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := string(b)
	if len(s) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func list(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = show(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
