package schema_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/schema"
)

const classifiedSchema = `{"type":"object","properties":{
	"order_id":{"type":"string"},
	"email":{"type":"string","x-classification":"pii"},
	"card":{"type":"object","x-classification":["financial","pii"],"properties":{"number":{"type":"string"}}},
	"people":{"type":"array","items":{"type":"object","properties":{"ssn":{"type":"string","x-classification":"pii"}}}}}}`

func TestClassificationTouchedFields(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile([]byte(classifiedSchema))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Classified() {
		got = append(got, c.Path)
	}
	if want := []string{"/card", "/email", "/people/*/ssn"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Classified paths = %v, want %v", got, want)
	}
	tests := []struct {
		name           string
		args           map[string]any
		paths, classes []string
	}{
		{name: "none carried", args: map[string]any{"order_id": "o-1"}},
		{name: "one pii field", args: map[string]any{"order_id": "o-1", "email": "a@example.com"},
			paths: []string{"/email"}, classes: []string{"pii"}},
		{name: "a listed mark", args: map[string]any{"card": map[string]any{"number": "4111"}},
			paths: []string{"/card"}, classes: []string{"financial", "pii"}},
		{name: "in an array element", args: map[string]any{"people": []any{map[string]any{}, map[string]any{"ssn": "1"}}, "email": "x"},
			paths: []string{"/email", "/people/*/ssn"}, classes: []string{"pii"}},
		{name: "an empty array", args: map[string]any{"people": []any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths, classes := s.Touched(tt.args)
			if !reflect.DeepEqual(paths, tt.paths) || !reflect.DeepEqual(classes, tt.classes) {
				t.Errorf("Touched = %v %v, want %v %v", paths, classes, tt.paths, tt.classes)
			}
		})
	}
}

func TestClassificationRefusesBadMarks(t *testing.T) {
	t.Parallel()
	for _, mark := range []string{`""`, `[]`, `true`, `"PII"`, `["pii", 3]`, `"1pii"`, `"p i i"`} {
		_, err := schema.Compile([]byte(`{"type":"object","properties":{"email":{"type":"string","x-classification":` + mark + `}}}`))
		if !errors.Is(err, schema.ErrInvalid) {
			t.Errorf("mark %s: err = %v, want ErrInvalid", mark, err)
		}
	}
}

func TestClassificationValidatorAcceptsKeyword(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile([]byte(classifiedSchema))
	if err != nil {
		t.Fatal(err)
	}
	if vs := s.Validate(map[string]any{"email": "a@example.com"}); len(vs) != 0 {
		t.Fatalf("Validate = %v, want no violation", vs)
	}
	if vs := s.Validate(map[string]any{"email": 7}); len(vs) == 0 {
		t.Fatal("Validate accepted a number for a string field")
	}
}

func TestClassificationNoneAllocatesNothing(t *testing.T) {
	s, err := schema.Compile([]byte(`{"type":"object","properties":{"q":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"q": "x"}
	if n := testing.AllocsPerRun(100, func() { s.Touched(args) }); n != 0 {
		t.Fatalf("Touched on an unclassified schema allocates %v times", n)
	}
}
