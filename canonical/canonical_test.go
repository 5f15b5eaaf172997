package canonical

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestMarshalWritesEachTypeCanonically(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, `null`},
		{"true", true, `true`},
		{"false", false, `false`},
		{"string", "hi", `"hi"`},
		{"json number", json.Number("1.50"), `1.5`},
		{"float64", 2.5, `2.5`},
		{"float32 keeps its own shortest digits", float32(0.1), `0.1`},
		{"int", -7, `-7`},
		{"int8", int8(-128), `-128`},
		{"int16", int16(300), `300`},
		{"int32", int32(-70000), `-70000`},
		{"int64 min", int64(math.MinInt64), `-9223372036854775808`},
		{"uint", uint(7), `7`},
		{"uint8", uint8(255), `255`},
		{"uint16", uint16(65535), `65535`},
		{"uint32", uint32(4294967295), `4294967295`},
		{"uint64 max", uint64(math.MaxUint64), `18446744073709551615`},
		{"uintptr", uintptr(9), `9`},
		{"empty array", []any{}, `[]`},
		{"nil array is null as in encoding/json", []any(nil), `null`},
		{"empty object", map[string]any{}, `{}`},
		{"nil object is null as in encoding/json", map[string]any(nil), `null`},
		{"no whitespace anywhere", map[string]any{"b": []any{1, "x", nil}, "a": map[string]any{"z": true, "y": false}}, `{"a":{"y":false,"z":true},"b":[1,"x",null]}`},
		{"array keeps its order", []any{3, 1, 2}, `[3,1,2]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal(%#v): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal(%#v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestStringsEscapeOnlyQuoteBackslashAndControls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain", "abc", `"abc"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short control escapes", "\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"other controls as lowercase \\u00xx", "\x00\x01\x1f\x0b", `"\u0000\u0001\u001f\u000b"`},
		{"DEL is literal", "\x7f", "\"\x7f\""},
		{"slash is literal", "a/b", `"a/b"`},
		{"html characters are literal", "<&>", `"<&>"`},
		{"non-ASCII is literal UTF-8", "é€😀", `"é€😀"`},
		{"line and paragraph separators are literal", "\u2028\u2029", "\"\u2028\u2029\""},
		{"invalid byte becomes U+FFFD", "a\xffb", "\"a\uFFFDb\""},
		{"each invalid byte is replaced on its own", "\xff\xfe", "\"\uFFFD\uFFFD\""},
		{"truncated sequence is replaced byte by byte", "\xe2\x82", "\"\uFFFD\uFFFD\""},
		{"encoded surrogate is invalid", "\xed\xa0\x80", "\"\uFFFD\uFFFD\uFFFD\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// The member order of RFC 8785 section 3.2.3, where the emoji (a surrogate
// pair in UTF-16) sorts before U+FB33 although its code point is larger.
func TestKeysSortByUTF16CodeUnitsAsRFC8785(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"\u20ac":     "Euro Sign",
		"\r":         "Carriage Return",
		"\ufb33":     "Hebrew Letter Dalet With Dagesh",
		"1":          "One",
		"\U0001f600": "Emoji: Grinning Face",
		"\u0080":     "Control",
		"\u00f6":     "Latin Small Letter O With Diaeresis",
	}
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001f600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	got, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Marshal = %s\nwant      %s", got, want)
	}
}

func TestCompareUTF16AgreesWithUTF16Encoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
	}{
		{"equal", "abc", "abc"},
		{"prefix first", "ab", "abc"},
		{"ascii", "a", "b"},
		{"supplementary before private use", "\U00010000", "\ue000"},
		{"supplementary before U+FFFF", "\U0010ffff", "\uffff"},
		{"supplementary after U+D7FF", "\U00010000", "\ud7ff"},
		{"two supplementary", "\U0001f600", "\U0001f601"},
		{"two supplementary with different lead bytes", "\U0001f600", "\U00100000"},
		{"differ in a continuation byte", "\u00e9", "\u00ea"},
		{"BMP above and below the surrogates", "\ue000", "\ud7ff"},
		{"difference after a shared supplementary", "\U0001f600a", "\U0001f600\uffff"},
		{"empty", "", "\U0001f600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, p := range [][2]string{{tt.a, tt.b}, {tt.b, tt.a}} {
				want := referenceCompareUTF16(p[0], p[1])
				if got := compareUTF16(p[0], p[1]); got != want {
					t.Errorf("compareUTF16(%q, %q) = %d, want %d", p[0], p[1], got, want)
				}
			}
		})
	}
}

func referenceCompareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func TestUnsupportedTypesAreRefused(t *testing.T) {
	t.Parallel()
	type named string
	s := "x"
	tests := []struct {
		name string
		in   any
	}{
		{"struct", struct{ A int }{1}},
		{"pointer", &s},
		{"named string", named("x")},
		{"typed slice", []string{"a"}},
		{"typed map", map[string]string{"a": "b"}},
		{"map with non-string keys", map[int]any{1: 2}},
		{"bytes", []byte("x")},
		{"raw message", json.RawMessage(`1`)},
		{"complex", complex(1, 2)},
		{"channel", make(chan int)},
		{"func", func() {}},
		{"inside an array", []any{1, make(chan int)}},
		{"inside an object", map[string]any{"a": map[string]any{"b": struct{}{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Marshal(tt.in); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Marshal(%T) error = %v, want ErrUnsupported", tt.in, err)
			}
			if _, err := Hash(tt.in); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Hash(%T) error = %v, want ErrUnsupported", tt.in, err)
			}
		})
	}
}

func TestUnsupportedErrorNamesTheType(t *testing.T) {
	t.Parallel()
	_, err := Marshal([]any{map[string]any{"a": make(chan int)}})
	if err == nil || !strings.Contains(err.Error(), "chan int") {
		t.Errorf("error = %v, want it to name chan int", err)
	}
}

func TestNonFiniteFloatsAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
	}{
		{"NaN", math.NaN()},
		{"+Inf", math.Inf(1)},
		{"-Inf", math.Inf(-1)},
		{"float32 NaN", float32(math.NaN())},
		{"float32 +Inf", float32(math.Inf(1))},
		{"NaN nested", map[string]any{"a": []any{math.NaN()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Marshal(tt.in); !errors.Is(err, ErrInvalidNumber) {
				t.Errorf("Marshal(%v) error = %v, want ErrInvalidNumber", tt.in, err)
			}
		})
	}
}

func nestArrays(levels int) any {
	var v any = "leaf"
	for range levels {
		v = []any{v}
	}
	return v
}

func nestObjects(levels int) any {
	var v any = "leaf"
	for range levels {
		v = map[string]any{"k": v}
	}
	return v
}

func TestNestingDeeperThanMaxDepthIsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      any
		wantErr error
	}{
		{"arrays at the limit", nestArrays(MaxDepth), nil},
		{"arrays past the limit", nestArrays(MaxDepth + 1), ErrTooDeep},
		{"objects at the limit", nestObjects(MaxDepth), nil},
		{"objects past the limit", nestObjects(MaxDepth + 1), ErrTooDeep},
		{"far past the limit", nestArrays(100 * MaxDepth), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Marshal(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Marshal error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestKeysEqualAfterUTF8ReplacementAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      map[string]any
		want    string
		wantErr error
	}{
		{"invalid key is replaced", map[string]any{"a\xff": 1}, "{\"a\uFFFD\":1}", nil},
		{"replaced key sorts by its written form", map[string]any{"\xff": 1, "\uFFFE": 2, "\U00010000": 3}, "{\"\U00010000\":3,\"\uFFFD\":1,\"\uFFFE\":2}", nil},
		{"two invalid keys collide", map[string]any{"\xff": 1, "\xfe": 2}, "", ErrDuplicateKey},
		{"invalid key collides with U+FFFD", map[string]any{"\xff": 1, "\uFFFD": 2}, "", ErrDuplicateKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Marshal error = %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAppendExtendsDstAndKeepsItOnError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      any
		want    string
		wantErr error
	}{
		{"appends after existing bytes", map[string]any{"a": 1}, `prefix{"a":1}`, nil},
		{"returns dst unchanged on error", []any{1, 2, math.Inf(1)}, `prefix`, ErrInvalidNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Append([]byte("prefix"), tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Append error = %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("Append = %q, want %q", got, tt.want)
			}
		})
	}
}
