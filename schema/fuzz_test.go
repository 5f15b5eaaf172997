package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzCheck feeds arbitrary argument objects through coercion and
// validation against the refund schema and the ten-field schema. Whatever
// the input: Check never panics, coercion is idempotent, the violations it
// reports are exactly the reference validator's verdict, and the fast path
// never vouches for what the reference refuses.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		tenFieldArgs,
		`{"order_id":" ord_9f8a7c2e1b3d ","amount_cents":"42","reason":"DEFECTIVE","skus":"a","quantity":"007"}`,
		`{"amount_cents":1e400}`, `{"amount_cents":1e2}`, `{"count":-12.50e1}`, `{"ratio":1e1000000}`, `{"ratio":"-0.0"}`, `[]`, `null`, `{"skus":[" a ",1]}`,
		`{"rate":0.9999999999999999999,"amount_cents":4999999.99999999999}`,
	} {
		f.Add([]byte(seed))
	}
	schemas := []*Schema{mustCompile(f, refundSchema), mustCompile(f, tenFieldSchema)}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, s := range schemas {
			out, _, vs := s.Check(v)
			again, log, _ := s.Check(out)
			a, _ := json.Marshal(out)
			b, _ := json.Marshal(again)
			if !bytes.Equal(a, b) || len(log) != 0 {
				t.Fatalf("coercion not idempotent: %s -> %s (%v)", a, b, log)
			}
			if len(vs) == 1 && (vs[0].Constraint == "number" || vs[0].Constraint == "maxWork") {
				// Refused before the reference runs: a number it would
				// take too long to read, or a value over the work bound.
				return
			}
			ref := s.compiled.Validate(out) == nil
			if (len(vs) == 0) != ref {
				t.Fatalf("violations %+v disagree with the reference (valid=%v) for %s", vs, ref, a)
			}
			if !ref && len(vs) == 0 {
				t.Fatalf("invalid input with no violation listed: %s", a)
			}
			if s.fast != nil && s.fast.valid(out) && !ref {
				t.Fatalf("fast path vouched for an invalid value: %s", a)
			}
		}
	})
}

// validationBudget is the most one compilation or one validation may take
// under the fuzzer. The limits keep the slowest admitted validation to a
// fraction of a second on an idle core; the margin is for instrumented
// code on a shared machine. Unbounded, the seeds below take minutes.
const validationBudget = 3 * time.Second

// FuzzCompileValidate compiles a fuzzed schema under the default limits
// and validates a fuzzed value against it. Whatever the pair, neither step
// panics and neither exceeds validationBudget: a schema whose validation
// could run away must be refused when it is compiled, or the value refused
// unchecked.
func FuzzCompileValidate(f *testing.F) {
	for _, seed := range [][2]string{
		{nestedAnyOf(19, false), `{"x":1}`},
		{nestedAnyOf(11, false), `{"x":1}`},
		{nestedAnyOf(11, true), `{"x":` + numbers(40) + `}`},
		{nestedAnyOf(10, true), `{"x":` + numbers(25) + `}`},
		{strings.ReplaceAll(nestedAnyOf(11, true), "anyOf", "oneOf"), `{"x":["a","b"]}`},
		{fanOut(40), `{"x":"a"}`},
		{fanOut(11), `{"x":1}`},
		{refundSchema, `{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1e400,"reason":"other"}`},
		{tenFieldSchema, tenFieldArgs},
		{`{"type":"array","items":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`, `[[1,"a",true],[null]]`},
		{`{"$defs":{"a":{"$anchor":"x","type":"object","additionalProperties":{"$ref":"#/$defs/b"}},"b":{"not":{"type":"null"}}},"$ref":"#x","propertyNames":{"pattern":"^[a-z]+$"}}`, `{"a":1,"B":null}`},
		{`{"if":{"type":"object"},"then":{"required":["a"]},"else":{"type":"array","prefixItems":[{"const":1}],"unevaluatedItems":false}}`, `[1,2]`},
		// Patterns: matching costs each byte times the program's size.
		{`{"type":"object","properties":{"t":{"type":"string","pattern":"[a-z]{1000}b"}}}`, `{"t":"` + strings.Repeat("a", 100_000) + `"}`},
		{`{"type":"object","properties":{"t":{"type":"string","pattern":"` + largestPattern + `"}}}`, `{"t":"` + strings.Repeat("a", 100_000) + `"}`},
		{`{"type":"object","properties":{"t":{"type":"string","pattern":"^(?:a|[a-z]{990}b)*$"}}}`, `{"t":"` + strings.Repeat("a", 100_000) + `"}`},
		{`{"type":"array","items":{"type":"string","format":"regex"}}`, `[` + strings.Repeat(quote(alternation(50))+",", 150) + `"a"]`},
		{`{"type":"object","patternProperties":{"` + largestPattern + `":{}},"propertyNames":{"pattern":"` + largestPattern + `"}}`, `{"` + strings.Repeat("a", 50_000) + `":1,"` + strings.Repeat("a", 50_001) + `":2}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, rawSchema, rawValue []byte) {
		start := time.Now()
		s, err := Compile(rawSchema)
		if took := time.Since(start); took > validationBudget {
			t.Fatalf("Compile took %v (%d bytes of schema, err %v)", took, len(rawSchema), err)
		}
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile answered %T %v, want a CompileError", err, err)
			}
			return
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(rawValue))
		if err != nil {
			return
		}
		start = time.Now()
		_, _, vs := s.Check(v)
		if took := time.Since(start); took > validationBudget {
			t.Fatalf("one validation took %v (schema %.200s, %d bytes of value, %d violations)", took, rawSchema, len(rawValue), len(vs))
		}
	})
}
