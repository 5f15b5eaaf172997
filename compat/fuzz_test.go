package compat

import (
	"encoding/json"
	"testing"
)

// FuzzDiff checks that Diff never panics on any pair of inputs, that every
// change it reports is well formed, and that a schema never differs from
// itself.
func FuzzDiff(f *testing.F) {
	seeds := []string{
		`{}`, `true`, `false`, `null`, `[]`, `1`,
		`{"type":"object","required":["a"],"properties":{"a":{"type":"integer","maximum":10}}}`,
		`{"type":"object","properties":{"a":{"type":"number","exclusiveMaximum":10,"multipleOf":0.5}},"additionalProperties":false}`,
		`{"$ref":"#/$defs/n","$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}}}`,
		`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`,
		`{"anyOf":[{"type":"string"},{"type":"null"}],"oneOf":[{"const":1},{"enum":[1,2]}],"not":{"pattern":"x"}}`,
		`{"allOf":[{"$ref":"#x"},{"properties":{"y":{"$anchor":"x","minLength":2}}}]}`,
		`{"if":{"minimum":1},"then":{"maximum":3},"else":false,"contains":{"type":"string"},"maxContains":2,"prefixItems":[true,{}]}`,
		`{"dependentRequired":{"a":["b"]},"dependentSchemas":{"a":{"required":["c"]}},"patternProperties":{"^x":{}},"propertyNames":{"maxLength":3}}`,
		`{"enum":[1e400,-0,0.0,{"a":[1]}],"minimum":1e-400,"maximum":"x","type":["integer",7],"x-coerce":1,"default":{}}`,
		`{"$ref":"#/properties/a","properties":{"a":{"$ref":"#/properties/a/items","items":{"$ref":"#"}}}}`,
	}
	for _, a := range seeds {
		for _, b := range seeds[:6] {
			f.Add([]byte(a), []byte(b))
		}
		f.Add([]byte(a), []byte(a))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, side := range []Side{SideInput, SideOutput} {
			cs, err := Diff(a, b, side)
			if err != nil {
				continue
			}
			for _, c := range cs {
				if c.Bump < Patch || c.Bump > Major || c.Kind == "" || c.Detail == "" || c.Side != side {
					t.Fatalf("malformed change %+v", c)
				}
			}
		}
		var v any
		if json.Unmarshal(a, &v) != nil {
			return
		}
		if _, ok := v.(map[string]any); !ok || len(a) > maxSchemaBytes || depth(v, maxSchemaDepth+1) > maxSchemaDepth {
			return
		}
		for _, side := range []Side{SideInput, SideOutput} {
			cs, err := Diff(a, a, side)
			if err != nil || len(cs) != 0 {
				t.Fatalf("Diff(x, x, %s) = %v, %v; want nothing\nx = %s", side, cs, err, a)
			}
		}
	})
}
