package boundary_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/boundary"
)

func TestEncodeMatchesSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"null", nil, `null`},
		{"true", true, `true`},
		{"false", false, `false`},
		{"empty string", "", `""`},
		{"escapes", "q\"b\\n\nt\tr\rb\bf\f\x00\x1f", `"q\"b\\n\nt\tr\rb\bf\f\u0000\u001f"`},
		{"no HTML escaping", "<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"line separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"invalid UTF-8", "a\xffb", `"a\ufffdb"`},
		{"DEL stays raw", "a\x7fb", "\"a\x7fb\""},
		{"multibyte", "żółw 🐢", `"żółw 🐢"`},
		{"number", json.Number("-1.5e+10"), `-1.5e+10`},
		{"invalid number", json.Number("01"), `"<unrenderable number>"`},
		{"float64", 2.5, `2.5`},
		{"NaN", math.NaN(), `"<unrenderable float>"`},
		{"empty array", []any{}, `[]`},
		{"empty object", map[string]any{}, `{}`},
		{"nil map", map[string]any(nil), `{}`},
		{"sorted keys", map[string]any{"b": 1, "a": []any{true, nil}, "B": "x", "ä": 0}, `{"B":"x","a":[true,null],"b":1,"ä":0}`},
		{"nested objects", map[string]any{"z": map[string]any{"y": map[string]any{"x": "1", "w": "2"}, "a": "3"}, "k": "4"},
			`{"k":"4","z":{"a":"3","y":{"w":"2","x":"1"}}}`},
		{"not yet normalised", map[string]any{"n": 3, "t": []int{1}, "f": func() {}}, `{"f":"<unrenderable func()>","n":3,"t":[1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := boundary.Encode(nil, tt.in)
			if string(got) != tt.want {
				t.Fatalf("Encode = %s, want %s", got, tt.want)
			}
			if n := boundary.Size(tt.in); n != len(got) {
				t.Fatalf("Size = %d, len(Encode) = %d", n, len(got))
			}
			if !json.Valid(got) {
				t.Fatalf("Encode = %s: not valid JSON", got)
			}
		})
	}
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
	}{
		{"rows", rows(20)},
		{"escapes", map[string]any{"s": "\"\\/\b\f\n\r\t\x01\x7f\u2028<>&\xff", "\x02k": nil}},
		{"deep", tree(t, `{"a":[{"b":[[],{},[1,2,{"c":"d"}]]}],"e":-0.0}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := boundary.Encode(nil, tt.in)
			if want := stdEncode(t, tt.in); string(got) != string(want) {
				t.Fatalf("Encode = %s\nencoding/json = %s", got, want)
			}
		})
	}
}

func TestEncodeAppends(t *testing.T) {
	t.Parallel()
	got := boundary.Encode([]byte("prefix:"), map[string]any{"a": "b"})
	if want := `prefix:{"a":"b"}`; string(got) != want {
		t.Fatalf("Encode = %s, want %s", got, want)
	}
	big := map[string]any{}
	for _, k := range strings.Split("q w e r t y u i o p", " ") {
		big[k] = map[string]any{k + "1": map[string]any{k + "2": k}}
	}
	if got, want := boundary.Encode(nil, big), stdEncode(t, big); string(got) != string(want) {
		t.Fatalf("Encode = %s\nencoding/json = %s", got, want)
	}
}
