package schema

import (
	"encoding/json"
	"testing"
)

// A pointer is parsed once, its tokens unescaped, and rewrites what it
// reaches in a copy, every element of an array at "*", leaving the value
// it was given as it was.
func TestPointerRewrite(t *testing.T) {
	t.Parallel()
	mark := func(any) any { return "X" }
	tests := []struct {
		pointer, in, want string
	}{
		{"", `{"a":1}`, `"X"`},
		{"/a", `{"a":1,"b":2}`, `{"a":"X","b":2}`},
		{"/a~1b/c~0d", `{"a/b":{"c~d":1,"e":2}}`, `{"a/b":{"c~d":"X","e":2}}`},
		{"/*/name", `[{"name":"x","id":1},{"id":2}]`, `[{"id":1,"name":"X"},{"id":2}]`},
		{"/rows/*", `{"rows":[1,[2],{"c":3}]}`, `{"rows":["X","X","X"]}`},
		{"/missing", `{"a":1}`, `{"a":1}`},
		{"/*", `{"*":1}`, `{"*":"X"}`},
		{"/a/*", `{"a":{"b":1}}`, `{"a":{"b":1}}`},
	}
	for _, tt := range tests {
		var in any
		if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ParsePointer(tt.pointer).Rewrite(in, mark))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%q over %s = %s, want %s", tt.pointer, tt.in, got, tt.want)
		}
		if again, _ := json.Marshal(in); string(again) != mustCompact(t, tt.in) {
			t.Errorf("%q modified its input: %s", tt.pointer, again)
		}
	}
}

func mustCompact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Each visits what a pointer reaches, every element of an array at "*",
// and stops when told to.
func TestPointerEach(t *testing.T) {
	t.Parallel()
	var in any
	if err := json.Unmarshal([]byte(`{"rows":[{"n":1},{"m":2},{"n":3}],"n":4}`), &in); err != nil {
		t.Fatal(err)
	}
	var seen []any
	all := ParsePointer("/rows/*/n").Each(in, func(v any) bool { seen = append(seen, v); return true })
	if !all || len(seen) != 2 || seen[0] != 1.0 || seen[1] != 3.0 {
		t.Fatalf("Each = %v, %v; want [1 3], not stopped", seen, all)
	}
	seen = nil
	if ParsePointer("/rows/*/n").Each(in, func(v any) bool { seen = append(seen, v); return false }) || len(seen) != 1 {
		t.Fatalf("a stopped walk saw %v", seen)
	}
}
