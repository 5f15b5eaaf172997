package schema_test

import (
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/schema"
)

func TestSensitiveFindsMarkedValues(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile([]byte(`{"type":"object","properties":{
		"order_id":{"type":"string"},
		"card":{"type":"object","x-sensitive":true,"properties":{"number":{"type":"string"}}},
		"to~account":{"type":"string","x-sensitive":true},
		"people":{"type":"array","items":{"type":"object","properties":{"ssn":{"type":"string","x-sensitive":true}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/card", "/people/*/ssn", "/to~0account"}
	if got := s.Sensitive(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Sensitive = %v, want %v", got, want)
	}
	args := map[string]any{"order_id": "o-1", "card": map[string]any{"number": "4111"}, "to~account": "acct-9",
		"people": []any{map[string]any{"ssn": "123"}, map[string]any{"ssn": ""}}}
	tests := []struct {
		paths []string
		want  []string
	}{
		{want: nil},
		{paths: []string{"/card"}, want: []string{"4111"}},
		{paths: []string{"/people/*/ssn"}, want: []string{"123"}},
		{paths: []string{"/to~0account"}, want: []string{"acct-9"}},
		{paths: []string{"/missing"}, want: nil},
	}
	for _, tt := range tests {
		if got := schema.SensitiveValues(args, tt.paths); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SensitiveValues(%v) = %v, want %v", tt.paths, got, tt.want)
		}
	}
}

func TestHolds(t *testing.T) {
	t.Parallel()
	args := map[string]any{"card": map[string]any{"number": "4111"}, "to~account": "acct-9", "none": nil,
		"people": []any{map[string]any{"ssn": nil}, map[string]any{"ssn": "123"}}, "nobody": []any{map[string]any{"ssn": nil}}}
	tests := []struct {
		pointer string
		want    bool
	}{
		{"/card", true},
		{"/card/number", true},
		{"/card/cvc", false},
		{"/to~0account", true},
		{"/none", false},
		{"/missing", false},
		{"/people/*/ssn", true},
		{"/nobody/*/ssn", false},
		{"/people/0/ssn", false}, // an element is named by "*" only
	}
	for _, tt := range tests {
		if got := schema.Holds(args, tt.pointer); got != tt.want {
			t.Errorf("Holds(%s) = %v, want %v", tt.pointer, got, tt.want)
		}
	}
}

func TestMask(t *testing.T) {
	t.Parallel()
	args := func() map[string]any {
		return map[string]any{"order_id": "o-1", "card": map[string]any{"number": 4111111111111111.0, "pin": "12"},
			"to~account": true, "people": []any{map[string]any{"ssn": 123.0, "name": "a"}, "x"}}
	}
	tests := []struct {
		paths []string
		want  map[string]any
	}{
		{paths: nil, want: args()},
		{paths: []string{"/card/number", "/to~0account"}, want: map[string]any{"order_id": "o-1",
			"card": map[string]any{"number": "*", "pin": "12"}, "to~account": "*",
			"people": []any{map[string]any{"ssn": 123.0, "name": "a"}, "x"}}},
		{paths: []string{"/card", "/people/*/ssn"}, want: map[string]any{"order_id": "o-1", "card": "*", "to~account": true,
			"people": []any{map[string]any{"ssn": "*", "name": "a"}, "x"}}},
		{paths: []string{"/missing", "/card/cvc", "/people/0/ssn"}, want: args()},
	}
	for _, tt := range tests {
		in := args()
		if got := schema.Mask(in, tt.paths, "*"); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Mask(%v) = %v, want %v", tt.paths, got, tt.want)
		}
		if !reflect.DeepEqual(in, args()) {
			t.Errorf("Mask(%v) changed its argument: %v", tt.paths, in)
		}
	}
}

// A value marked x-sensitive in any branch of allOf, anyOf or oneOf is
// sensitive: a schema that offers alternative shapes hides its secret in
// each.
func TestSensitiveFindsMarksInEveryCombinator(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile([]byte(`{"type":"object","properties":{
		"pay":{"oneOf":[{"type":"object","properties":{"card":{"type":"string","x-sensitive":true}}},
			{"type":"object","properties":{"iban":{"type":"string","x-sensitive":true}}}]},
		"auth":{"anyOf":[{"type":"string","x-sensitive":true},{"type":"null"}]},
		"who":{"allOf":[{"type":"object","properties":{"pin":{"type":"string","x-sensitive":true}}}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/auth", "/pay/card", "/pay/iban", "/who/pin"}
	if got := s.Sensitive(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Sensitive = %v, want %v", got, want)
	}
}
