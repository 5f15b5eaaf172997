package handler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/schema"
)

type numbersIn struct {
	I64   int64            `json:"i64,omitempty"`
	I8    int8             `json:"i8,omitempty"`
	U64   uint64           `json:"u64,omitempty"`
	U32   uint32           `json:"u32,omitempty"`
	F64   float64          `json:"f64,omitempty"`
	Ptr   *int32           `json:"ptr,omitempty"`
	List  []int16          `json:"list,omitempty"`
	Map   map[string]uint8 `json:"map,omitempty"`
	Inner struct {
		N int `json:"n,omitempty"`
	} `json:"inner,omitzero"`
}

// A schema derived from Go types admits exactly the numbers the types
// hold: the validator refuses what decoding would fail on.
func TestDefineBoundsNumbersToTheGoType(t *testing.T) {
	t.Parallel()
	d, err := Define[numbersIn, refundOut](toolplane.Definition{Name: "a.b"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.Compile(d.InputSchema)
	if err != nil {
		t.Fatalf("compile %s: %v", d.InputSchema, err)
	}
	tests := []struct {
		args  string
		valid bool
	}{
		{`{"i64":9223372036854775807}`, true},
		{`{"i64":-9223372036854775808}`, true},
		{`{"i64":9223372036854775808}`, false},
		{`{"i64":-9223372036854775809}`, false},
		{`{"i64":1e400}`, false},
		{`{"i64":18446744073709551617}`, false},
		{`{"i8":127}`, true},
		{`{"i8":128}`, false},
		{`{"i8":-129}`, false},
		{`{"u64":18446744073709551615}`, true},
		{`{"u64":18446744073709551616}`, false},
		{`{"u64":-1}`, false},
		{`{"u32":4294967296}`, false},
		{`{"f64":1.5e308}`, true},
		{`{"f64":1e400}`, false},
		{`{"ptr":2147483648}`, false},
		{`{"list":[1,32768]}`, false},
		{`{"map":{"a":256}}`, false},
		{`{"inner":{"n":9223372036854775808}}`, false},
		{`{"inner":{"n":-9223372036854775808}}`, true},
	}
	b, err := Bind("a.b", func(context.Context, Call, numbersIn) (refundOut, error) { return refundOut{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		v, err := sjs.UnmarshalJSON(strings.NewReader(tt.args))
		if err != nil {
			t.Fatal(err)
		}
		out, _, vs := s.Check(v)
		if (len(vs) == 0) != tt.valid {
			t.Errorf("%s: violations %+v, want valid=%v", tt.args, vs, tt.valid)
			continue
		}
		if tt.valid {
			// What the schema admits, the handler decodes.
			if _, err := b.Invoke(context.Background(), Call{Tool: "a.b"}, out); err != nil {
				t.Errorf("%s: admitted but not decoded: %v", tt.args, err)
			}
		}
	}
}

// A value a typed handler cannot hold is the model's to fix: an *Invalid
// naming the field, never an error the invoker raises as a fault.
func TestTypedDecodeFailureIsInvalidInput(t *testing.T) {
	t.Parallel()
	b, err := Bind("payments.refund", func(context.Context, Call, refundIn) (refundOut, error) { return refundOut{}, nil }, nil,
		WithPreview(TypedPreview(func(_ context.Context, _ Call, in refundIn) (string, error) { return "refund " + in.OrderID, nil })))
	if err != nil {
		t.Fatal(err)
	}
	for _, amount := range []string{"1e400", "9223372036854775808", "1.5", "1e2"} {
		args := map[string]any{"order_id": "o1", "amount_cents": json.Number(amount)}
		_, invokeErr := b.Invoke(context.Background(), Call{Tool: "payments.refund"}, args)
		_, _, previewErr := b.Preview(context.Background(), Call{Tool: "payments.refund"}, args)
		for _, err := range []error{invokeErr, previewErr} {
			var inv *Invalid
			if !errors.As(err, &inv) || inv.FieldPath != "/amount_cents" || !strings.Contains(inv.Message, "whole number") {
				t.Fatalf("%s: err = %#v, want *Invalid at /amount_cents", amount, err)
			}
		}
		o := b.Classify(invokeErr)
		if o.Kind != Definite || o.Result.Error.Code != toolplane.CodeInvalidInput || o.Result.Error.FieldPath != "/amount_cents" {
			t.Fatalf("%s: outcome %+v", amount, o)
		}
	}
}
