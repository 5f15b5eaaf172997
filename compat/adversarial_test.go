package compat

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDiffAdversarial feeds shapes that make naive schema walks blow up.
// Each must finish promptly with an answer or ErrTooComplex.
func TestDiffAdversarial(t *testing.T) {
	t.Parallel()
	deep := func(leaf string) string {
		const n = maxSchemaDepth - 2
		return strings.Repeat(`{"items":`, n) + leaf + strings.Repeat("}", n)
	}
	var fan strings.Builder
	fan.WriteString(`{"$ref":"#/$defs/a0","$defs":{`)
	for i := range 40 {
		if i > 0 {
			fan.WriteString(",")
		}
		next := `"#/$defs/a` + strconv.Itoa(i+1) + `"`
		fan.WriteString(`"a` + strconv.Itoa(i) + `":{"allOf":[{"$ref":` + next + `},{"$ref":` + next + `}]}`)
	}
	fan.WriteString(`,"a40":{"type":"string"}}}`)
	branches := func(n int, kw string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"const":"` + kw + strconv.Itoa(i) + `"}`
		}
		return `{"anyOf":[` + strings.Join(parts, ",") + `]}`
	}
	recursive := `{"$ref":"#/$defs/n","$defs":{"n":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"},"b":{"type":"array","items":{"$ref":"#/$defs/n"}}}}}}`
	cases := []struct{ name, a, b string }{
		{"deep chain", deep(`{"maxLength":1}`), deep(`{"maxLength":2}`)},
		{"deep against true", deep(`{}`), `true`},
		{"recursive against true", recursive, `true`},
		{"true against recursive", `{}`, recursive},
		{"recursive against itself changed", recursive, strings.Replace(recursive, `"object"`, `"object","maxProperties":3`, 1)},
		{"allOf fan-out", fan.String(), strings.Replace(fan.String(), `"string"`, `"integer"`, 1)},
		{"wide anyOf", branches(2000, "a"), branches(2000, "b")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			for _, side := range []Side{SideInput, SideOutput} {
				for _, pair := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
					if _, err := Diff(json.RawMessage(pair[0]), json.RawMessage(pair[1]), side); err != nil && !errors.Is(err, ErrTooComplex) {
						t.Fatalf("Diff = %v; want an answer or ErrTooComplex", err)
					}
				}
				if cs, err := Diff(json.RawMessage(tc.a), json.RawMessage(tc.a), side); err != nil || len(cs) != 0 {
					t.Fatalf("Diff(x, x) = %d changes, %v", len(cs), err)
				}
			}
			// Generous for a shared machine under -race; a walk that blew
			// up would take orders of magnitude longer.
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}
