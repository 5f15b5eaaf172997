package compat

import (
	"encoding/json"
	"strings"
	"testing"
)

// twentyFieldSchema is a realistic tool input: twenty fields of every
// common shape (bounded numbers, patterned and formatted strings, enums, a
// nested object, an array of objects, a map, a nullable union and a shared
// definition under $defs).
func twentyFieldSchema(maxAmount, extraReason string) json.RawMessage {
	s := `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["order_id", "amount_cents", "currency", "reason", "customer"],
  "properties": {
    "order_id": {"type": "string", "pattern": "^ord_[a-zA-Z0-9]{12}$", "description": "The order to refund."},
    "amount_cents": {"type": "integer", "minimum": 1, "maximum": MAX},
    "currency": {"type": "string", "minLength": 3, "maxLength": 3},
    "reason": {"type": "string", "enum": ["defective", "not_as_described", "customer_changed_mind", "other"EXTRA]},
    "note": {"type": "string", "maxLength": 500},
    "notify": {"type": "boolean", "default": true},
    "rate": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 10, "uniqueItems": true},
    "customer": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "tier": {"type": "string", "enum": ["free", "gold"]}}},
    "requested_by": {"type": "string", "maxLength": 64},
    "requested_at": {"type": "string", "format": "date-time"},
    "channel": {"type": "string", "enum": ["email", "chat", "phone"]},
    "lines": {"type": "array", "maxItems": 100, "items": {"type": "object", "required": ["sku", "qty"], "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}, "price": {"$ref": "#/$defs/money"}}}},
    "shipping": {"$ref": "#/$defs/money"},
    "tax": {"$ref": "#/$defs/money"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"maxLength": 20}},
    "priority": {"type": "integer", "minimum": 0, "maximum": 5},
    "reference": {"anyOf": [{"type": "string", "maxLength": 40}, {"type": "null"}]},
    "dry_run": {"type": "boolean"},
    "idempotency_hint": {"type": "string", "minLength": 8, "maxLength": 64}
  },
  "$defs": {
    "money": {"type": "object", "required": ["amount", "currency"], "properties": {"amount": {"type": "integer", "minimum": 0}, "currency": {"type": "string", "minLength": 3, "maxLength": 3}}}
  }
}`
	return json.RawMessage(strings.NewReplacer("MAX", maxAmount, "EXTRA", extraReason).Replace(s))
}

func BenchmarkDiff(b *testing.B) {
	old := twentyFieldSchema("5000000", "")
	for _, bc := range []struct {
		name string
		new  json.RawMessage
	}{
		{"identical", twentyFieldSchema("5000000", "")},
		{"changed", twentyFieldSchema("100000", `, "late"`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Diff(old, bc.new, SideInput); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTwentyFieldSchema(t *testing.T) {
	t.Parallel()
	cs, err := Diff(twentyFieldSchema("5000000", ""), twentyFieldSchema("100000", `, "late"`), SideInput)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(cs); len(got) != 2 || got[0] != "constraint_narrowed amount_cents MAJOR" || got[1] != "enum_values_added reason MINOR" {
		t.Fatalf("got %q", got)
	}
}
