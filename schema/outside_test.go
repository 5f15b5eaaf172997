package schema_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/schema"
)

// An output schema says which of its strings are outside text: the
// pointers of the fields marked x-outside-text: true (through properties,
// items and the combinators), whether anything is declared at all, and
// which unmarked strings could hold any text.
func TestOutsideTextMarks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		doc      string
		outside  []string
		free     []string
		declared bool
	}{
		{"nothing marked", `{"type":"object","properties":{"id":{"type":"string","maxLength":20},"body":{"type":"string"},"n":{"type":"integer"}}}`,
			nil, []string{"/body"}, false},
		{"array of tickets", `{"type":["null","array"],"items":{"type":"object","properties":{
			"subject":{"type":"string","x-outside-text":true},
			"status":{"type":"string","x-outside-text":false},
			"kind":{"type":"string","enum":["a","b"]},
			"when":{"type":"string","format":"date-time"},
			"note":{"type":["string","null"]}}}}`,
			[]string{"/*/subject"}, []string{"/*/note"}, true},
		{"the whole answer", `{"type":"string","x-outside-text":true}`, []string{""}, nil, true},
		{"through allOf, an escaped name", `{"type":"object","allOf":[{"properties":{"a/b":{"type":"string","x-outside-text":true}}}]}`,
			[]string{"/a~1b"}, nil, true},
		{"a property named like the keyword is no mark", `{"type":"object","properties":{"x-outside-text":{"type":"string"}}}`,
			nil, []string{"/x-outside-text"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.OutsideText(); !reflect.DeepEqual(got, tt.outside) {
				t.Errorf("OutsideText = %q, want %q", got, tt.outside)
			}
			if got := s.FreeText(); !reflect.DeepEqual(got, tt.free) {
				t.Errorf("FreeText = %q, want %q", got, tt.free)
			}
			if got := s.DeclaresText(); got != tt.declared {
				t.Errorf("DeclaresText = %v, want %v", got, tt.declared)
			}
		})
	}
}

// A mark the boundary could not honour is refused when the schema is
// compiled (so at registration), naming where it is: never ignored.
func TestOutsideTextMarksThatCannotHoldAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, pointer, says string
	}{
		{"not a boolean", `{"type":"object","properties":{"a":{"type":"string","x-outside-text":"yes"}}}`, "/properties/a/x-outside-text", "true or false"},
		{"on an object", `{"type":"object","properties":{"a":{"type":"object","x-outside-text":true}}}`, "/properties/a", "marks a string field"},
		{"a pattern the fence would break", `{"type":"object","properties":{"a":{"type":"string","pattern":"^t-","x-outside-text":true}}}`, "/properties/a", "pattern"},
		{"a maxLength the fence would break", `{"type":"object","properties":{"a":{"type":"string","maxLength":500,"x-outside-text":true}}}`, "/properties/a", "maxLength"},
		{"under $defs", `{"type":"object","properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"string","x-outside-text":true}}}`, "/$defs/t", "mark the field itself"},
		{"in a not", `{"type":"object","not":{"type":"string","x-outside-text":true}}`, "/not", "mark the field itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schema.Compile([]byte(tt.doc))
			var ce *schema.CompileError
			if !errors.As(err, &ce) || !errors.Is(err, schema.ErrInvalid) || ce.Pointer != tt.pointer || !strings.Contains(ce.Detail, tt.says) {
				t.Fatalf("Compile = %v (pointer %q); want invalid at %s saying %q", err, pointerOf(ce), tt.pointer, tt.says)
			}
		})
	}
}

func pointerOf(ce *schema.CompileError) string {
	if ce == nil {
		return ""
	}
	return ce.Pointer
}
