package compat

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// summary renders changes as "kind path bump" lines, sorted, so a case
// states exactly what it expects and any extra noise fails it.
func summary(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c.Kind) + " " + displayPath(c.Path) + " " + c.Bump.String()
	}
	slices.Sort(out)
	return out
}

// obj builds an object schema from "name": schema members, with the
// listed names required.
func obj(required []string, props ...string) string {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return `{"type":"object","required":` + string(req) + `,"properties":{` + strings.Join(props, ",") + `}}`
}

func TestDiff(t *testing.T) {
	t.Parallel()
	amount := `"amount":{"type":"integer","minimum":1,"maximum":100}`
	base := obj([]string{"amount"}, amount)
	reason := func(vals string) string {
		return obj([]string{"reason"}, `"reason":{"type":"string","enum":[`+vals+`]}`)
	}
	cases := []struct {
		name     string
		side     Side
		old, new string
		want     []string
		bump     Bump
	}{
		// §6.4: add an optional input field.
		{"input optional field added", SideInput, base, obj([]string{"amount"}, amount, `"note":{"type":"string"}`),
			[]string{"field_added_optional note MINOR"}, Minor},
		// §6.4: add a required input field.
		{"input required field added", SideInput, base, obj([]string{"amount", "currency"}, amount, `"currency":{"type":"string"}`),
			[]string{"field_added_required currency MAJOR"}, Major},
		// §6.4: remove or rename any field.
		{"input field removed", SideInput, obj([]string{"amount"}, amount, `"note":{"type":"string"}`), base,
			[]string{"field_removed note MAJOR"}, Major},
		{"input field renamed", SideInput, base, obj([]string{"amount_cents"}, `"amount_cents":{"type":"integer","minimum":1,"maximum":100}`),
			[]string{"field_added_required amount_cents MAJOR", "field_removed amount MAJOR"}, Major},
		{"output field renamed", SideOutput, obj(nil, `"id":{"type":"string"}`), obj(nil, `"ident":{"type":"string"}`),
			[]string{"field_added_optional ident MINOR", "field_removed id MAJOR"}, Major},
		// §6.4: widen a constraint.
		{"input maximum raised", SideInput, base, obj([]string{"amount"}, `"amount":{"type":"integer","minimum":1,"maximum":500}`),
			[]string{"constraint_widened amount MINOR"}, Minor},
		{"input enum values added", SideInput, reason(`"a","b"`), reason(`"a","b","c"`),
			[]string{"enum_values_added reason MINOR"}, Minor},
		// §6.4: narrow a constraint.
		{"input maximum lowered", SideInput, base, obj([]string{"amount"}, `"amount":{"type":"integer","minimum":1,"maximum":50}`),
			[]string{"constraint_narrowed amount MAJOR"}, Major},
		{"input enum values removed", SideInput, reason(`"a","b","c"`), reason(`"a","b"`),
			[]string{"enum_values_removed reason MAJOR"}, Major},
		{"input enum values swapped", SideInput, reason(`"a","b"`), reason(`"a","c"`),
			[]string{"enum_values_added reason MINOR", "enum_values_removed reason MAJOR"}, Major},
		// §6.4: add an optional output field.
		{"output optional field added", SideOutput, obj(nil, `"id":{"type":"string"}`), obj(nil, `"id":{"type":"string"}`, `"url":{"type":"string"}`),
			[]string{"field_added_optional url MINOR"}, Minor},
		{"output required field added", SideOutput, obj(nil, `"id":{"type":"string"}`), obj([]string{"url"}, `"id":{"type":"string"}`, `"url":{"type":"string"}`),
			[]string{"field_added_required url MINOR"}, Minor},
		// §6.4: remove an output field.
		{"output field removed", SideOutput, obj(nil, `"id":{"type":"string"}`, `"url":{"type":"string"}`), obj(nil, `"id":{"type":"string"}`),
			[]string{"field_removed url MAJOR"}, Major},
		// §6.4: any type change, even a widening.
		{"input integer to number", SideInput, base, obj([]string{"amount"}, `"amount":{"type":"number","minimum":1,"maximum":100}`),
			[]string{"type_changed amount MAJOR"}, Major},
		{"output integer to number", SideOutput, base, obj([]string{"amount"}, `"amount":{"type":"number","minimum":1,"maximum":100}`),
			[]string{"type_changed amount MAJOR"}, Major},
		{"input number to integer", SideInput, obj(nil, `"x":{"type":"number"}`), obj(nil, `"x":{"type":"integer"}`),
			[]string{"type_changed x MAJOR"}, Major},
		{"input made nullable", SideInput, obj(nil, `"x":{"type":"string"}`), obj(nil, `"x":{"type":["string","null"]}`),
			[]string{"type_changed x MAJOR"}, Major},
		{"type list reordered", SideInput, obj(nil, `"x":{"type":["string","null"]}`), obj(nil, `"x":{"type":["null","string"]}`),
			nil, Patch},

		// Direction on outputs.
		{"output enum widened", SideOutput, reason(`"a","b"`), reason(`"a","b","c"`),
			[]string{"enum_values_added reason MAJOR"}, Major},
		{"output enum narrowed", SideOutput, reason(`"a","b","c"`), reason(`"a","b"`),
			[]string{"enum_values_removed reason MINOR"}, Minor},
		{"output maximum raised", SideOutput, base, obj([]string{"amount"}, `"amount":{"type":"integer","minimum":1,"maximum":500}`),
			[]string{"constraint_widened amount MAJOR"}, Major},
		{"output maximum lowered", SideOutput, base, obj([]string{"amount"}, `"amount":{"type":"integer","minimum":1,"maximum":50}`),
			[]string{"constraint_narrowed amount MINOR"}, Minor},
		{"output required removed", SideOutput, obj([]string{"id"}, `"id":{"type":"string"}`), obj(nil, `"id":{"type":"string"}`),
			[]string{"required_removed id MAJOR"}, Major},
		{"output required added", SideOutput, obj(nil, `"id":{"type":"string"}`), obj([]string{"id"}, `"id":{"type":"string"}`),
			[]string{"required_added id MINOR"}, Minor},
		{"error side reads like output", SideError, reason(`"a"`), reason(`"a","b"`),
			[]string{"enum_values_added reason MAJOR"}, Major},

		// required on inputs.
		{"input required added", SideInput, obj(nil, `"id":{"type":"string"}`), obj([]string{"id"}, `"id":{"type":"string"}`),
			[]string{"required_added id MAJOR"}, Major},
		{"input required removed", SideInput, obj([]string{"id"}, `"id":{"type":"string"}`), obj(nil, `"id":{"type":"string"}`),
			[]string{"required_removed id MINOR"}, Minor},
		{"required name without property", SideInput, `{"type":"object"}`, `{"type":"object","required":["x"]}`,
			[]string{"required_added x MAJOR"}, Major},

		// Documentation only.
		{"description only", SideInput, obj(nil, `"x":{"type":"string","description":"old"}`), obj(nil, `"x":{"type":"string","description":"new"}`),
			[]string{"description_changed x PATCH"}, Patch},
		{"title examples comment", SideOutput, `{"type":"string","title":"a"}`, `{"type":"string","title":"b","examples":["x"],"$comment":"c"}`,
			[]string{"description_changed (root) PATCH", "description_changed (root) PATCH", "description_changed (root) PATCH"}, Patch},
		{"deprecated", SideInput, obj(nil, `"x":{"type":"string"}`), obj(nil, `"x":{"type":"string","deprecated":true}`),
			[]string{"annotation_changed x PATCH"}, Patch},
		{"formatting and number spelling", SideInput, `{"type":"object","properties":{"a":{"type":"integer","maximum":100}}}`,
			"{\n  \"properties\": {\"a\": {\"maximum\": 1e2, \"type\": \"integer\"}},\n  \"type\": \"object\"\n}",
			nil, Patch},

		// Nesting.
		{"nested field narrowed", SideInput,
			obj(nil, `"customer":`+obj(nil, `"id":{"type":"string","maxLength":64}`)),
			obj(nil, `"customer":`+obj(nil, `"id":{"type":"string","maxLength":32}`)),
			[]string{"constraint_narrowed customer.id MAJOR"}, Major},
		{"nested required added", SideInput,
			obj(nil, `"customer":`+obj(nil, `"id":{"type":"string"}`)),
			obj(nil, `"customer":`+obj([]string{"tier"}, `"id":{"type":"string"}`, `"tier":{"type":"string"}`)),
			[]string{"field_added_required customer.tier MAJOR"}, Major},
		{"array item field removed", SideOutput,
			obj(nil, `"items":{"type":"array","items":`+obj(nil, `"sku":{"type":"string"}`, `"qty":{"type":"integer"}`)+`}`),
			obj(nil, `"items":{"type":"array","items":`+obj(nil, `"qty":{"type":"integer"}`)+`}`),
			[]string{"field_removed items[].sku MAJOR"}, Major},
		{"array item bound widened", SideInput,
			obj(nil, `"items":{"type":"array","items":`+obj(nil, `"qty":{"type":"integer","maximum":10}`)+`}`),
			obj(nil, `"items":{"type":"array","items":`+obj(nil, `"qty":{"type":"integer","maximum":20}`)+`}`),
			[]string{"constraint_widened items[].qty MINOR"}, Minor},
		{"root array items", SideOutput, `{"type":"array","items":{"type":"string"}}`, `{"type":"array","items":{"type":"integer"}}`,
			[]string{"type_changed [] MAJOR"}, Major},
		{"maxItems lowered", SideInput, `{"type":"array","maxItems":10}`, `{"type":"array","maxItems":5}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"minItems lowered", SideInput, `{"type":"array","minItems":2}`, `{"type":"array","minItems":1}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"uniqueItems added", SideInput, `{"type":"array"}`, `{"type":"array","uniqueItems":true}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"uniqueItems dropped", SideInput, `{"type":"array","uniqueItems":true}`, `{"type":"array","uniqueItems":false}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"prefixItems position added", SideInput, `{"type":"array","prefixItems":[{"type":"string"}]}`, `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},
		{"prefixItems position narrowed", SideInput, `{"type":"array","prefixItems":[{"type":"string"}]}`, `{"type":"array","prefixItems":[{"type":"string","maxLength":3}]}`,
			[]string{"constraint_narrowed [0] MAJOR"}, Major},

		// References.
		{"ref target narrowed", SideInput,
			`{"type":"object","properties":{"price":{"$ref":"#/$defs/money"}},"$defs":{"money":{"type":"object","properties":{"amount":{"type":"integer","maximum":100}}}}}`,
			`{"type":"object","properties":{"price":{"$ref":"#/$defs/money"}},"$defs":{"money":{"type":"object","properties":{"amount":{"type":"integer","maximum":10}}}}}`,
			[]string{"constraint_narrowed price.amount MAJOR"}, Major},
		{"inline moved to $defs", SideInput,
			obj(nil, `"price":`+obj(nil, `"amount":{"type":"integer"}`)),
			`{"type":"object","required":[],"properties":{"price":{"$ref":"#/$defs/money"}},"$defs":{"money":` + obj(nil, `"amount":{"type":"integer"}`) + `}}`,
			nil, Patch},
		{"ref description overrides", SideInput,
			`{"type":"object","properties":{"price":{"$ref":"#/$defs/money","description":"a"}},"$defs":{"money":{"type":"integer"}}}`,
			`{"type":"object","properties":{"price":{"$ref":"#/$defs/money","description":"b"}},"$defs":{"money":{"type":"integer"}}}`,
			[]string{"description_changed price PATCH"}, Patch},
		{"ref by anchor", SideInput,
			`{"type":"object","properties":{"p":{"$ref":"#m"}},"$defs":{"money":{"$anchor":"m","type":"integer","minimum":0}}}`,
			`{"type":"object","properties":{"p":{"$ref":"#m"}},"$defs":{"money":{"$anchor":"m","type":"integer","minimum":1}}}`,
			[]string{"constraint_narrowed p MAJOR"}, Major},
		{"ref with overlapping sibling", SideInput,
			`{"properties":{"p":{"$ref":"#/$defs/n","maximum":10}},"$defs":{"n":{"type":"integer","maximum":100}}}`,
			`{"properties":{"p":{"$ref":"#/$defs/n","maximum":10}},"$defs":{"n":{"type":"integer","maximum":50}}}`,
			[]string{"constraint_narrowed p MAJOR"}, Major},
		{"allOf split is no change", SideInput,
			obj([]string{"a"}, `"a":{"type":"string"}`, `"b":{"type":"integer"}`),
			`{"allOf":[{"type":"object","required":["a"]},{"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}]}`,
			nil, Patch},
		{"unused $defs ignored", SideInput, `{"type":"string","$defs":{"x":{"type":"integer"}}}`, `{"type":"string","$defs":{"x":{"type":"string"}}}`,
			nil, Patch},
		{"recursive schema", SideInput,
			`{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`,
			`{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"name":{"type":"string","maxLength":5},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`,
			[]string{"constraint_narrowed children[].name MAJOR", "constraint_narrowed name MAJOR"}, Major},
		{"remote ref unchanged", SideInput, `{"$ref":"https://example.com/s.json","maxLength":3}`, `{"$ref":"https://example.com/s.json","maxLength":3}`,
			nil, Patch},
		{"remote ref changed", SideInput, `{"$ref":"https://example.com/a.json"}`, `{"$ref":"https://example.com/b.json"}`,
			[]string{"unclassified (root) MAJOR"}, Major},

		// Bounds.
		{"minimum lowered", SideInput, `{"type":"number","minimum":5}`, `{"type":"number","minimum":1}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"minimum added", SideInput, `{"type":"number"}`, `{"type":"number","minimum":1}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"maximum removed", SideInput, `{"type":"number","maximum":5}`, `{"type":"number"}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"maximum made exclusive", SideInput, `{"type":"number","maximum":100}`, `{"type":"number","exclusiveMaximum":100}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"exclusive made inclusive", SideInput, `{"type":"number","exclusiveMinimum":0}`, `{"type":"number","minimum":0}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"exclusive bound beyond inclusive", SideInput, `{"type":"number","maximum":100}`, `{"type":"number","exclusiveMaximum":101}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"minLength raised", SideInput, `{"type":"string","minLength":1}`, `{"type":"string","minLength":3}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"maxProperties raised", SideInput, `{"type":"object","maxProperties":3}`, `{"type":"object","maxProperties":4}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"multipleOf finer", SideInput, `{"type":"number","multipleOf":0.01}`, `{"type":"number","multipleOf":0.001}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"multipleOf coarser", SideInput, `{"type":"number","multipleOf":0.01}`, `{"type":"number","multipleOf":0.1}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"multipleOf unrelated", SideOutput, `{"type":"integer","multipleOf":2}`, `{"type":"integer","multipleOf":3}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},

		// Strings.
		{"pattern added", SideInput, `{"type":"string"}`, `{"type":"string","pattern":"^a"}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"pattern added on output", SideOutput, `{"type":"string"}`, `{"type":"string","pattern":"^a"}`,
			[]string{"constraint_narrowed (root) MINOR"}, Minor},
		{"pattern removed", SideInput, `{"type":"string","pattern":"^a"}`, `{"type":"string"}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"pattern changed", SideInput, `{"type":"string","pattern":"^a"}`, `{"type":"string","pattern":"^[ab]"}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},
		{"format changed", SideOutput, `{"type":"string","format":"date-time"}`, `{"type":"string","format":"date"}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},

		// Values.
		{"enum introduced", SideInput, `{"type":"string"}`, `{"type":"string","enum":["a"]}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"enum dropped on output", SideOutput, `{"type":"string","enum":["a"]}`, `{"type":"string"}`,
			[]string{"constraint_widened (root) MAJOR"}, Major},
		{"const is a one-value enum", SideInput, `{"enum":["a"]}`, `{"const":"a"}`, nil, Patch},
		{"const changed", SideInput, `{"const":"a"}`, `{"const":"b"}`,
			[]string{"enum_values_added (root) MINOR", "enum_values_removed (root) MAJOR"}, Major},
		{"enum numbers by value", SideInput, `{"enum":[1,2]}`, `{"enum":[2.0,1e0]}`, nil, Patch},

		// Objects.
		{"input opened", SideInput, `{"type":"object","additionalProperties":false}`, `{"type":"object"}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"input closed", SideInput, `{"type":"object"}`, `{"type":"object","additionalProperties":false}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"output opened", SideOutput, `{"type":"object","additionalProperties":false}`, `{"type":"object","additionalProperties":true}`,
			[]string{"constraint_widened (root) MAJOR"}, Major},
		{"map values narrowed", SideInput,
			obj(nil, `"labels":{"type":"object","additionalProperties":{"type":"string","maxLength":10}}`),
			obj(nil, `"labels":{"type":"object","additionalProperties":{"type":"string","maxLength":5}}`),
			[]string{"constraint_narrowed labels.* MAJOR"}, Major},
		{"map keys narrowed", SideInput,
			obj(nil, `"labels":{"type":"object","propertyNames":{"maxLength":10}}`),
			obj(nil, `"labels":{"type":"object","propertyNames":{"maxLength":5}}`),
			[]string{"constraint_narrowed labels.<key> MAJOR"}, Major},
		{"field declared narrower than old additionalProperties", SideInput,
			`{"type":"object","additionalProperties":{"type":"string"}}`,
			`{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
			[]string{"field_added_optional n MINOR", "type_changed n MAJOR"}, Major},
		{"property made false is removed", SideInput, obj(nil, `"x":{"type":"string"}`), obj(nil, `"x":false`),
			[]string{"field_removed x MAJOR"}, Major},
		{"dependentRequired added", SideInput, `{"type":"object"}`, `{"type":"object","dependentRequired":{"card":["cvv"]}}`,
			[]string{"required_added cvv MAJOR"}, Major},
		{"patternProperties added", SideInput, `{"type":"object"}`, `{"type":"object","patternProperties":{"^x-":{"type":"string"}}}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},

		// Composition.
		{"anyOf alternative added on input", SideInput, `{"anyOf":[{"type":"string"}]}`, `{"anyOf":[{"type":"string"},{"type":"null"}]}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"anyOf alternative added on output", SideOutput, `{"anyOf":[{"type":"string"}]}`, `{"anyOf":[{"type":"string"},{"type":"null"}]}`,
			[]string{"constraint_widened (root) MAJOR"}, Major},
		{"anyOf alternative removed", SideInput, `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `{"anyOf":[{"type":"null"}]}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"anyOf reordered", SideInput, `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `{"anyOf":[{"type":"null"},{"type":"string"}]}`,
			nil, Patch},
		{"anyOf branch widened", SideInput, `{"anyOf":[{"type":"string","maxLength":3},{"type":"null"}]}`, `{"anyOf":[{"type":"string","maxLength":9},{"type":"null"}]}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"oneOf branch widened is escalated", SideInput, `{"oneOf":[{"type":"string","maxLength":3},{"type":"null"}]}`, `{"oneOf":[{"type":"string","maxLength":9},{"type":"null"}]}`,
			[]string{"constraint_widened (root) MAJOR"}, Major},
		{"oneOf description stays patch", SideInput, `{"oneOf":[{"type":"string","description":"a"},{"type":"null"}]}`, `{"oneOf":[{"type":"string","description":"b"},{"type":"null"}]}`,
			[]string{"description_changed (root) PATCH"}, Patch},
		{"oneOf alternative added", SideInput, `{"oneOf":[{"type":"string"}]}`, `{"oneOf":[{"type":"string"},{"type":"null"}]}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},
		{"not changed is escalated", SideInput, `{"not":{"type":"string","maxLength":3}}`, `{"not":{"type":"string","maxLength":9}}`,
			[]string{"constraint_widened (root) MAJOR"}, Major},
		{"if changed is escalated", SideInput, `{"if":{"minimum":3},"then":{"multipleOf":2}}`, `{"if":{"minimum":1},"then":{"multipleOf":2}}`,
			[]string{"constraint_widened (root) MAJOR"}, Major},
		{"then widened", SideInput, `{"if":{"minimum":3},"then":{"maximum":10}}`, `{"if":{"minimum":3},"then":{"maximum":20}}`,
			[]string{"constraint_widened (root) MINOR"}, Minor},
		{"contains with maxContains is escalated", SideInput, `{"type":"array","contains":{"maxLength":3},"maxContains":2}`, `{"type":"array","contains":{"maxLength":9},"maxContains":2}`,
			[]string{"constraint_widened [] MAJOR"}, Major},
		{"minContains raised from default", SideInput, `{"type":"array","contains":{"type":"string"}}`, `{"type":"array","contains":{"type":"string"},"minContains":2}`,
			[]string{"constraint_narrowed (root) MAJOR"}, Major},
		{"unevaluatedProperties added", SideInput, `{"type":"object"}`, `{"type":"object","unevaluatedProperties":false}`,
			[]string{"constraint_changed (root) MAJOR"}, Major},

		// Booleans.
		{"true to false", SideInput, `true`, `false`, []string{"constraint_narrowed (root) MAJOR"}, Major},
		{"false to schema", SideOutput, `false`, `{"type":"string"}`, []string{"constraint_widened (root) MAJOR"}, Major},
		{"true equals empty", SideInput, `true`, `{}`, nil, Patch},
		{"absent equals true", SideInput, ``, `true`, nil, Patch},
		{"null equals absent", SideOutput, `null`, ``, nil, Patch},

		// Platform extension and defaults.
		{"coercion enabled on input", SideInput, obj(nil, `"n":{"type":"integer"}`), obj(nil, `"n":{"type":"integer","x-coerce":true}`),
			[]string{"constraint_widened n MINOR"}, Minor},
		{"coercion disabled on input", SideInput, obj(nil, `"n":{"type":"integer"}`), obj(nil, `"n":{"type":"integer","x-coerce":false}`),
			[]string{"constraint_narrowed n MAJOR"}, Major},
		{"coercion on output", SideOutput, `{"type":"integer"}`, `{"type":"integer","x-coerce":true}`,
			[]string{"annotation_changed (root) PATCH"}, Patch},
		{"input default changed", SideInput, obj(nil, `"n":{"type":"integer","default":10}`), obj(nil, `"n":{"type":"integer","default":20}`),
			[]string{"default_changed n MAJOR"}, Major},
		{"input default documented", SideInput, obj(nil, `"n":{"type":"integer"}`), obj(nil, `"n":{"type":"integer","default":20}`),
			[]string{"default_changed n PATCH"}, Patch},
		{"output default changed", SideOutput, `{"type":"integer","default":1}`, `{"type":"integer","default":2}`,
			[]string{"default_changed (root) PATCH"}, Patch},
		{"unknown keyword", SideInput, `{"type":"string","x-widget":"a"}`, `{"type":"string","x-widget":"b"}`,
			[]string{"unclassified (root) MAJOR"}, Major},
		{"malformed keyword", SideInput, `{"type":"string","maxLength":"3"}`, `{"type":"string","maxLength":"4"}`,
			[]string{"unclassified (root) MAJOR"}, Major},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Diff(json.RawMessage(tc.old), json.RawMessage(tc.new), tc.side)
			if err != nil {
				t.Fatalf("Diff: %v", err)
			}
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if s := summary(got); !slices.Equal(s, want) {
				t.Errorf("changes:\n got %q\nwant %q\n%v", s, want, got)
			}
			if b := maxBump(got); b != tc.bump {
				t.Errorf("required %v, want %v", b, tc.bump)
			}
			for _, c := range got {
				if c.Side != tc.side || c.Detail == "" {
					t.Errorf("change %+v: wrong side or no detail", c)
				}
			}
			// A schema never differs from itself.
			for _, s := range []string{tc.old, tc.new} {
				if same, err := Diff(json.RawMessage(s), json.RawMessage(s), tc.side); err != nil || len(same) != 0 {
					t.Errorf("Diff(x, x) = %v, %v; want nothing", same, err)
				}
			}
		})
	}
}

func TestDiffDetail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, old, new string
		side           Side
		want           string
		pointer        string
	}{
		{"maximum", `{"properties":{"amount":{"maximum":100}}}`, `{"properties":{"amount":{"maximum":50}}}`, SideInput,
			"input amount: maximum lowered from 100 to 50 — needs MAJOR", "/properties/amount/maximum"},
		{"required field", `{"properties":{}}`, `{"required":["amount"],"properties":{"amount":{"type":"integer"}}}`, SideInput,
			"input amount: added as required — needs MAJOR", "/properties/amount"},
		{"exclusive", `{"maximum":100}`, `{"exclusiveMaximum":100}`, SideInput,
			"input (root): upper bound changed from maximum 100 to exclusiveMaximum 100 (narrower) — needs MAJOR", "/exclusiveMaximum"},
		{"enum", `{"enum":["a"]}`, `{"enum":["a","b"]}`, SideOutput,
			`output (root): enum values added: "b" — needs MAJOR`, "/enum"},
		{"pointer into $defs", `{"properties":{"p":{"$ref":"#/$defs/m"}},"$defs":{"m":{"maxLength":3}}}`, `{"properties":{"p":{"$ref":"#/$defs/m"}},"$defs":{"m":{"maxLength":2}}}`, SideInput,
			"input p: maxLength lowered from 3 to 2 — needs MAJOR", "/$defs/m/maxLength"},
		{"oneOf escalation says why", `{"oneOf":[{"maximum":1}]}`, `{"oneOf":[{"maximum":2}]}`, SideInput,
			"input (root): maximum raised from 1 to 2 (inside oneOf, where a wider alternative can overlap another and refuse a value) — needs MAJOR", "/oneOf/0/maximum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Diff(json.RawMessage(tc.old), json.RawMessage(tc.new), tc.side)
			if err != nil || len(got) != 1 {
				t.Fatalf("Diff = %v, %v; want one change", got, err)
			}
			if s := got[0].String(); s != tc.want {
				t.Errorf("String:\n got %s\nwant %s", s, tc.want)
			}
			if got[0].Pointer != tc.pointer {
				t.Errorf("Pointer %q, want %q", got[0].Pointer, tc.pointer)
			}
		})
	}
}

func TestDiffErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		old, new string
		side     Side
		want     string
	}{
		{"old not JSON", `{`, `{}`, SideInput, "old input schema: not JSON"},
		{"new not a schema", `{}`, `42`, SideOutput, "new output schema: not a JSON Schema"},
		{"trailing text", `{} {}`, `{}`, SideInput, "text follows"},
		{"definition side", `{}`, `{}`, SideDefinition, "not a schema side"},
		{"too deep", strings.Repeat(`{"items":`, maxSchemaDepth+1) + "{}" + strings.Repeat("}", maxSchemaDepth+1), `{}`, SideInput, "too complex"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Diff(json.RawMessage(tc.old), json.RawMessage(tc.new), tc.side)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestDiffBounded feeds a small document whose references fan out into
// an exponentially large tree: the walk must stay bounded either way.
func TestDiffBounded(t *testing.T) {
	t.Parallel()
	doc := func(leaf string) string {
		var b strings.Builder
		b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
		const levels = 40
		for i := range levels {
			next := `{"type":"string","maxLength":` + leaf + `}`
			if i < levels-1 {
				next = `{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"}`
			}
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"d` + strconv.Itoa(i) + `":{"type":"object","properties":{"a":` + next + `,"b":` + next + `}}`)
		}
		b.WriteString("}}")
		return b.String()
	}
	same, err := Diff(json.RawMessage(doc("3")), json.RawMessage(doc("3")), SideInput)
	if err != nil || len(same) != 0 {
		t.Fatalf("identical fan-out: %v, %v", same, err)
	}
	_, err = Diff(json.RawMessage(doc("3")), json.RawMessage(doc("4")), SideInput)
	if !errors.Is(err, ErrTooComplex) {
		t.Fatalf("differing fan-out: err %v, want ErrTooComplex", err)
	}
}

// TestDiffSharedDefinition checks that a change to a definition used by
// several fields is reported at each of them, although it is compared once.
func TestDiffSharedDefinition(t *testing.T) {
	t.Parallel()
	doc := func(max string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{
			"price":{"$ref":"#/$defs/money"},
			"lines":{"type":"array","items":{"type":"object","properties":{"total":{"$ref":"#/$defs/money"}}}}},
			"$defs":{"money":{"type":"object","properties":{"amount":{"type":"integer","maximum":` + max + `}}}}}`)
	}
	got, err := Diff(doc("100"), doc("10"), SideInput)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"constraint_narrowed lines[].total.amount MAJOR", "constraint_narrowed price.amount MAJOR"}
	if s := summary(got); !slices.Equal(s, want) {
		t.Fatalf("got %q, want %q", s, want)
	}
	for _, c := range got {
		if c.Pointer != "/$defs/money/properties/amount/maximum" {
			t.Errorf("pointer %q", c.Pointer)
		}
	}
}

func TestRepath(t *testing.T) {
	t.Parallel()
	cases := []struct{ p, from, to, want string }{
		{"a.b", "a", "x", "x.b"},
		{"a[].b", "a", "x.y", "x.y[].b"},
		{"a", "a", "x", "x"},
		{"b", "", "x", "x.b"},
		{"[]", "", "x", "x[]"},
		{"a.b", "a", "", "b"},
		{"a[]", "a", "", "[]"},
		{"", "", "", ""},
	}
	for _, tc := range cases {
		if got := repath(tc.p, tc.from, tc.to); got != tc.want {
			t.Errorf("repath(%q, %q, %q) = %q, want %q", tc.p, tc.from, tc.to, got, tc.want)
		}
	}
}
