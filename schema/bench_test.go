package schema

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// tenFieldSchema is a realistic argument schema of ten fields: strings with
// patterns and formats, an enum, bounded integers, a number, a boolean, an
// array and a nested object.
const tenFieldSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["order_id", "amount_cents", "reason", "currency"],
  "properties": {
    "order_id": {"type": "string", "pattern": "^ord_[a-zA-Z0-9]{12}$"},
    "amount_cents": {"type": "integer", "minimum": 1, "maximum": 5000000},
    "reason": {"type": "string", "enum": ["defective", "not_as_described", "customer_changed_mind", "other"]},
    "currency": {"type": "string", "minLength": 3, "maxLength": 3},
    "note": {"type": "string", "maxLength": 500},
    "notify": {"type": "boolean"},
    "rate": {"type": "number", "minimum": 0, "maximum": 1},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    "customer": {"type": "object", "properties": {"id": {"type": "string"}, "tier": {"type": "string"}}},
    "requested_by": {"type": "string", "maxLength": 64}
  }
}`

const tenFieldArgs = `{"order_id":"ord_9f8a7c2e1b3d","amount_cents":1500,"reason":"defective","currency":"EUR","note":"Customer reported a cracked screen on arrival.","notify":true,"rate":0.25,"tags":["support","priority"],"customer":{"id":"c-42","tier":"gold"},"requested_by":"agent-7"}`

func BenchmarkValidate10Fields(b *testing.B) {
	s, err := Compile([]byte(tenFieldSchema))
	if err != nil {
		b.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(tenFieldArgs))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, vs := s.Check(v); len(vs) != 0 {
			b.Fatal(vs)
		}
	}
}

func BenchmarkValidateReference(b *testing.B) {
	s, _ := Compile([]byte(tenFieldSchema))
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(tenFieldArgs))
	b.ReportAllocs()
	for b.Loop() {
		_ = s.compiled.Validate(v)
	}
}

func BenchmarkCoerce(b *testing.B) {
	s, _ := Compile([]byte(tenFieldSchema))
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(tenFieldArgs))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Coerce(v)
	}
}

// BenchmarkValidateInvalid10Fields is an ordinary call the fast path
// cannot vouch for: it pays for the work bound's check and the reference
// validator's violations.
func BenchmarkValidateInvalid10Fields(b *testing.B) {
	s, err := Compile([]byte(tenFieldSchema))
	if err != nil {
		b.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(strings.Replace(tenFieldArgs, `"amount_cents":1500`, `"amount_cents":-1`, 1)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if vs := s.Validate(v); len(vs) != 1 {
			b.Fatal(vs)
		}
	}
}
