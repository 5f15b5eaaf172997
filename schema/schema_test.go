package schema

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane"
)

func mustCompile(t testing.TB, src string) *Schema {
	t.Helper()
	s, err := Compile([]byte(src))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func decode(t testing.TB, src string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatalf("decode %s: %v", src, err)
	}
	return v
}

func encode(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const refundSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["order_id", "amount_cents", "reason"],
  "additionalProperties": false,
  "properties": {
    "order_id": {"type": "string", "pattern": "^ord_[a-zA-Z0-9]{12}$", "description": "The order identifier, e.g. ord_9f8a7c2e1b3d."},
    "amount_cents": {"type": "integer", "minimum": 1, "maximum": 5000000},
    "reason": {"type": "string", "enum": ["defective", "not_as_described", "customer_changed_mind", "other"]},
    "quantity": {"type": "integer", "minimum": 1, "x-coerce": true},
    "ratio": {"type": "number", "x-coerce": true},
    "skus": {"type": "array", "items": {"type": "string"}, "x-coerce": true},
    "code": {"type": "string", "x-coerce": false, "enum": ["A1", "b2"]},
    "note": {"type": "string"},
    "count": {"type": "integer"}
  }
}`

func TestCoercionRules(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, refundSchema)
	base := `"order_id":"ord_9f8a7c2e1b3d","amount_cents":100,"reason":"other"`
	tests := []struct {
		name      string
		in        string
		want      string
		rules     []Coercion
		violation string // constraint of the expected first violation, "" for valid
	}{
		{"trim whitespace by default", `{"order_id":"  ord_9f8a7c2e1b3d ","amount_cents":100,"reason":"other"}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, []Coercion{{"/order_id", RuleTrim}}, ""},
		{"case-insensitive enum by default", `{` + base[:len(base)-7] + `"Other"}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, []Coercion{{"/reason", RuleEnumCase}}, ""},
		{"trim then enum case", `{` + base[:len(base)-7] + `" DEFECTIVE "}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","reason":"defective"}`, []Coercion{{"/reason", RuleEnumCase}, {"/reason", RuleTrim}}, ""},
		{"digits to integer only with x-coerce", `{` + base + `,"quantity":"0042"}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","quantity":42,"reason":"other"}`, []Coercion{{"/quantity", RuleDigits}}, ""},
		{"digits to number with a fraction", `{` + base + `,"ratio":" -1.50 "}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","ratio":-1.50,"reason":"other"}`, []Coercion{{"/ratio", RuleDigits}, {"/ratio", RuleTrim}}, ""},
		{"digits never coerced without x-coerce", `{"order_id":"ord_9f8a7c2e1b3d","amount_cents":"100","reason":"other"}`, `{"amount_cents":"100","order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, nil, "type"},
		{"fraction never coerced into an integer", `{` + base + `,"quantity":"4.5"}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","quantity":"4.5","reason":"other"}`, nil, "type"},
		{"exponent is not digits", `{` + base + `,"ratio":"1e3"}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","ratio":"1e3","reason":"other"}`, nil, "type"},
		{"single value to array only with x-coerce", `{` + base + `,"skus":" a "}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d","reason":"other","skus":["a"]}`, []Coercion{{"/skus", RuleSingleToArray}, {"/skus/0", RuleTrim}}, ""},
		{"x-coerce false disables the defaults", `{` + base + `,"code":" a1"}`, `{"amount_cents":100,"code":" a1","order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, nil, "enum"},
		{"ambiguous enum case is not guessed", `{` + base + `,"code":"B2"}`, `{"amount_cents":100,"code":"B2","order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, nil, "enum"},
		{"number is never turned into a string", `{` + base + `,"note":5}`, `{"amount_cents":100,"note":5,"order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, nil, "type"},
		{"missing required is never filled", `{"order_id":"ord_9f8a7c2e1b3d","amount_cents":100}`, `{"amount_cents":100,"order_id":"ord_9f8a7c2e1b3d"}`, nil, "required"},
		{"extra field is never dropped", `{` + base + `,"extra":true}`, `{"amount_cents":100,"extra":true,"order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, nil, "additionalProperties"},
		{"boolean string is never a boolean", `{` + base + `,"count":"true"}`, `{"amount_cents":100,"count":"true","order_id":"ord_9f8a7c2e1b3d","reason":"other"}`, nil, "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := decode(t, tt.in)
			before := encode(t, in)
			out, log, vs := s.Check(in)
			if got := encode(t, out); got != tt.want {
				t.Errorf("coerced = %s, want %s", got, tt.want)
			}
			if encode(t, in) != before {
				t.Errorf("input was modified")
			}
			if !reflect.DeepEqual(log, tt.rules) {
				t.Errorf("coercions = %v, want %v", log, tt.rules)
			}
			switch {
			case tt.violation == "" && len(vs) > 0:
				t.Errorf("unexpected violations %+v", vs)
			case tt.violation != "" && (len(vs) == 0 || vs[0].Constraint != tt.violation):
				t.Errorf("violations = %+v, want first constraint %q", vs, tt.violation)
			}
		})
	}
}

func TestViolationsNameFieldValueAndFix(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, refundSchema)
	_, _, vs := s.Check(decode(t, `{"order_id":"x","amount_cents":15000000,"reason":"lost","extra":1}`))
	want := []struct{ path, constraint, inMessage, inFix string }{
		{"/amount_cents", "maximum", "amount_cents must be <= 5000000 (got 15000000)", "at most 5000000"},
		{"/extra", "additionalProperties", `got 1`, `remove "extra"; the accepted fields are amount_cents, code`},
		{"/order_id", "pattern", `(got "x")`, "e.g. ord_9f8a7c2e1b3d"},
		{"/reason", "enum", `(got "lost")`, "use one of"},
	}
	if len(vs) != len(want) {
		t.Fatalf("got %d violations %+v, want %d", len(vs), vs, len(want))
	}
	for i, w := range want {
		v := vs[i]
		if v.FieldPath != w.path || v.Constraint != w.constraint || !strings.Contains(v.Message, w.inMessage) || !strings.Contains(v.SuggestedFix, w.inFix) {
			t.Errorf("violation %d = %+v, want path %s constraint %s message containing %q fix containing %q", i, v, w.path, w.constraint, w.inMessage, w.inFix)
		}
	}
}

func TestInvalidInputResult(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, refundSchema)
	_, _, vs := s.Check(decode(t, `{"amount_cents":0}`))
	r := toolplane.Invalid(vs)
	e := r.Error
	if r.OK || e.Code != toolplane.CodeInvalidInput || !e.Retryable {
		t.Fatalf("result = %+v", r)
	}
	if e.FieldPath != "/amount_cents" || e.Constraint != "minimum" || e.SuggestedFix == "" || !strings.Contains(e.Message, "(got 0)") {
		t.Errorf("first violation not lifted: %+v", e)
	}
	if len(e.Violations) != 3 || !strings.Contains(e.Message, "2 more") {
		t.Errorf("want all 3 violations listed, got %+v", e.Violations)
	}
}

func TestViolationOrderIsStable(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, refundSchema)
	in := `{"order_id":1,"amount_cents":"x","reason":2,"note":3,"count":"y","skus":[1,2,3],"a":1,"b":2,"c":3}`
	first := encode(t, s.Validate(decode(t, in)))
	for range 50 {
		if got := encode(t, s.Validate(decode(t, in))); got != first {
			t.Fatalf("order changed:\n%s\n%s", first, got)
		}
	}
}

func TestMessageBoundsReceivedValue(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, refundSchema)
	long := strings.Repeat("é", 1000)
	vs := s.Validate(decode(t, `{"order_id":"`+long+`","amount_cents":1,"reason":"other"}`))
	if len(vs) != 1 || len(vs[0].Message) > 300 {
		t.Fatalf("message not bounded: %d bytes", len(vs[0].Message))
	}
	if !strings.Contains(vs[0].Message, "…") {
		t.Errorf("message does not mark the cut: %q", vs[0].Message)
	}
}

func TestCompileBounds(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 20) + `{}` + strings.Repeat(`}}`, 20)
	big := `{"description":"` + strings.Repeat("x", DefaultLimits.MaxBytes) + `"}`
	tests := []struct {
		name   string
		schema string
		want   error
	}{
		{"size cap", big, ErrTooLarge},
		{"depth cap", deep, ErrTooDeep},
		{"remote ref refused", `{"$ref":"https://example.com/s.json"}`, ErrRemoteRef},
		{"relative file ref refused", `{"properties":{"a":{"$ref":"other.json#/x"}}}`, ErrRemoteRef},
		{"embedded id refused", `{"$defs":{"a":{"$id":"https://example.com/a"}}}`, ErrRemoteRef},
		{"metaschema of another draft refused", `{"$schema":"http://json-schema.org/draft-07/schema#"}`, ErrDialect},
		{"self cycle refused", `{"properties":{"next":{"$ref":"#"}}}`, ErrRefCycle},
		{"two-step cycle refused", `{"$defs":{"a":{"items":{"$ref":"#/$defs/b"}},"b":{"properties":{"x":{"$ref":"#/$defs/a"}}}},"$ref":"#/$defs/a"}`, ErrRefCycle},
		{"anchor cycle refused", `{"$defs":{"n":{"$anchor":"node","properties":{"c":{"$ref":"#node"}}}}}`, ErrRefCycle},
		{"unknown type refused", `{"type":"nope"}`, ErrInvalid},
		{"bad pattern refused", `{"type":"string","pattern":"(?<=a)b"}`, ErrInvalid},
		{"not an object", `[1,2]`, ErrInvalid},
		{"not JSON", `{`, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]byte(tt.schema))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var ce *CompileError
			if !errors.As(err, &ce) || ce.Detail == "" {
				t.Fatalf("want a CompileError with detail, got %T %v", err, err)
			}
		})
	}
}

func TestCompileAcceptsSharedDefinitions(t *testing.T) {
	t.Parallel()
	// A DAG of references (one definition used twice) is not a cycle.
	s := mustCompile(t, `{"$defs":{"money":{"type":"integer","minimum":0}},"type":"object","properties":{"a":{"$ref":"#/$defs/money"},"b":{"$ref":"#/$defs/money","x-coerce":true}}}`)
	out, _, vs := s.Check(decode(t, `{"a":1,"b":"2"}`))
	if len(vs) != 0 || encode(t, out) != `{"a":1,"b":2}` {
		t.Fatalf("out=%s vs=%+v", encode(t, out), vs)
	}
	if vs := s.Validate(decode(t, `{"a":-1}`)); len(vs) != 1 || vs[0].Constraint != "minimum" || vs[0].FieldPath != "/a" {
		t.Fatalf("ref target not enforced: %+v", vs)
	}
}

func TestFormatsAsserted(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"email":{"type":"string","format":"email"},"at":{"type":"string","format":"date-time"}}}`)
	vs := s.Validate(decode(t, `{"email":"not-an-email","at":"yesterday"}`))
	if len(vs) != 2 || vs[0].Constraint != "format" || vs[1].Constraint != "format" {
		t.Fatalf("violations = %+v", vs)
	}
}

func TestAlternativesReportOnce(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"id":{"anyOf":[{"type":"string","minLength":3},{"type":"integer"}]}}}`)
	vs := s.Validate(decode(t, `{"id":true}`))
	if len(vs) != 1 || vs[0].Constraint != "anyOf" || vs[0].FieldPath != "/id" {
		t.Fatalf("violations = %+v", vs)
	}
}

// The fast path must agree with the reference validator on every case the
// reference accepts or refuses; fast-path soundness is also fuzzed.
func TestFastPathAgreesWithReference(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, tenFieldSchema)
	if s.fast == nil {
		t.Fatal("ten-field schema should take the fast path")
	}
	cases := []string{
		tenFieldArgs,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":5000000,"reason":"other","currency":"EUR"}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":5000001,"reason":"other","currency":"EUR"}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1.0,"reason":"other","currency":"EUR"}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1e2,"reason":"other","currency":"EUR"}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1,"reason":"other","currency":"EURO"}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1,"reason":"other","currency":"€€€"}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1,"reason":"other","currency":"EUR","rate":1}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1,"reason":"other","currency":"EUR","rate":1.0000000000000001}`,
		`{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1,"reason":"other","currency":"EUR","customer":{"id":1}}`,
	}
	for _, c := range cases {
		v := decode(t, c)
		ref := s.compiled.Validate(v) == nil
		if fast := s.fast.valid(v); fast && !ref {
			t.Errorf("fast path accepted what the reference refuses: %s", c)
		}
		if got := len(s.Validate(v)) == 0; got != ref {
			t.Errorf("Validate = %v, reference = %v for %s", got, ref, c)
		}
	}
}
