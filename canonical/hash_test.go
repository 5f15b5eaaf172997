package canonical

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestKeyOrderWhitespaceAndEscapesNeverChangeTheHash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		texts []string
	}{
		{"key order", []string{
			`{"a":1,"b":2,"c":3}`,
			`{"c":3,"a":1,"b":2}`,
			`{"b":2,"c":3,"a":1}`,
		}},
		{"nested key order", []string{
			`{"x":{"p":[1,{"m":1,"n":2}],"q":null}}`,
			`{"x":{"q":null,"p":[1,{"n":2,"m":1}]}}`,
		}},
		{"whitespace", []string{
			`{"a":[1,2],"b":"x y"}`,
			" {\n\t\"a\" : [ 1 ,\r\n 2 ] ,\"b\":\"x y\" } \n",
		}},
		{"string escapes", []string{
			`{"k":"café <&> / \" \\"}`,
			`{"k":"caf\u00e9 \u003c\u0026\u003e \/ \u0022 \u005c"}`,
			`{"\u006b":"caf\u00E9 <&> \/ \" \\"}`,
		}},
		{"control escapes", []string{
			`"\n\t\u0001"`,
			`"\u000a\u0009\u0001"`,
			`"\u000A\u0009\u0001"`,
		}},
		{"surrogate pair escape", []string{
			`"😀"`,
			`"\ud83d\ude00"`,
			`"\uD83D\uDE00"`,
		}},
		{"number spelling", []string{
			`{"n":[1,0.5,-0,120,12345678901234567890]}`,
			`{"n":[1.0,5e-1,0,1.2e2,12345678901234567890]}`,
			`{"n":[10e-1,0.50,-0.0e3,1200E-1,1.234567890123456789e19]}`,
		}},
		{"everything at once", []string{
			`{"query":"weather in Paris","limit":25,"opts":{"units":"metric","days":7}}`,
			"{ \"opts\" : { \"days\" : 7.0, \"units\" : \"metr\\u0069c\" },\n \"limit\" : 2.5e1, \"query\" : \"weather\\u0020in Paris\" }",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := HashJSON([]byte(tt.texts[0]))
			if err != nil {
				t.Fatalf("HashJSON(%s): %v", tt.texts[0], err)
			}
			for _, text := range tt.texts[1:] {
				got, err := HashJSON([]byte(text))
				if err != nil {
					t.Fatalf("HashJSON(%s): %v", text, err)
				}
				if got != want {
					t.Errorf("HashJSON(%s) = %s, want %s as for %s", text, got, want, tt.texts[0])
				}
			}
		})
	}
}

func TestAnyOtherDifferenceChangesTheHash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
	}{
		{"big integers one apart", `12345678901234567890`, `12345678901234567891`},
		{"integers past float64 precision", `9007199254740992`, `9007199254740993`},
		{"number and string", `1`, `"1"`},
		{"null and string", `null`, `"null"`},
		{"false and zero", `false`, `0`},
		{"empty object and array", `{}`, `[]`},
		{"array order", `[1,2]`, `[2,1]`},
		{"extra null member", `{"a":1}`, `{"a":1,"b":null}`},
		{"nested and dotted", `{"a":{"b":1}}`, `{"a.b":1}`},
		{"split string", `["ab"]`, `["a","b"]`},
		{"trailing space in string", `"a"`, `"a "`},
		{"key case", `{"a":1}`, `{"A":1}`},
		{"value moved to another key", `{"a":1,"b":2}`, `{"a":2,"b":1}`},
		{"tiny difference", `1e-400`, `1.0000000000000000000001e-400`},
		{"huge exponents", `1e99999999999999999999999`, `1e99999999999999999999998`},
		{"sign", `1`, `-1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ha, err := HashJSON([]byte(tt.a))
			if err != nil {
				t.Fatalf("HashJSON(%s): %v", tt.a, err)
			}
			hb, err := HashJSON([]byte(tt.b))
			if err != nil {
				t.Fatalf("HashJSON(%s): %v", tt.b, err)
			}
			if ha == hb {
				t.Errorf("%s and %s both hash to %s", tt.a, tt.b, ha)
			}
		})
	}
}

// Stored idempotency records hold these hashes, so a change to the canonical
// form would make a retried call miss its record after an upgrade. These
// values must never change.
func TestHashIsStable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"null", nil, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"},
		{"empty object", map[string]any{}, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{"mixed", map[string]any{
			"b": map[string]any{"c": json.Number("5e-1")},
			"a": []any{1, "x", true, nil},
		}, "6035f6f271f4cd09a4a78dfaf2b0b17483a444dbdadae09338f9341efa91882b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Hash(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Hash = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestHashAndHashJSONAgree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    any
		text string
	}{
		{"object", map[string]any{"a": 1, "b": []any{"x", 2.5, false}}, `{"b":["x",2.5,false],"a":1}`},
		{"invalid UTF-8 in a string", "a\xffb", "\"a\xffb\""},
		{"escaped lone surrogate reads as U+FFFD", "\uFFFD", `"\ud800"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hv, err := Hash(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			ht, err := HashJSON([]byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if hv != ht {
				t.Errorf("Hash(%#v) = %s, HashJSON(%s) = %s", tt.v, hv, tt.text, ht)
			}
		})
	}
}

func TestHashJSONRefusesWhatIsNotOneJSONValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		wantErr error
	}{
		{"empty", ``, ErrInvalidJSON},
		{"whitespace only", " \n", ErrInvalidJSON},
		{"second value", `{} {}`, ErrInvalidJSON},
		{"trailing number", `1 2`, ErrInvalidJSON},
		{"trailing garbage", `{"a":1}x`, ErrInvalidJSON},
		{"trailing closer", `[1]]`, ErrInvalidJSON},
		{"unclosed array", `[1`, ErrInvalidJSON},
		{"unclosed object", `{"a":1`, ErrInvalidJSON},
		{"trailing comma in array", `[1,]`, ErrInvalidJSON},
		{"trailing comma in object", `{"a":1,}`, ErrInvalidJSON},
		{"missing colon", `{"a" 1}`, ErrInvalidJSON},
		{"missing comma", `[1 2]`, ErrInvalidJSON},
		{"non-string key", `{1:2}`, ErrInvalidJSON},
		{"mismatched closer", `[1}`, ErrInvalidJSON},
		{"bad number", `[01]`, ErrInvalidJSON},
		{"NaN", `NaN`, ErrInvalidJSON},
		{"single quotes", `'a'`, ErrInvalidJSON},
		{"raw control in string", "\"a\nb\"", ErrInvalidJSON},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate key nested", `[{"b":{"x":1,"y":2,"x":1}}]`, ErrDuplicateKey},
		{"duplicate key by escape", `{"é":1,"\u00e9":2}`, ErrDuplicateKey},
		{"duplicate key by replacement", "{\"\xff\":1,\"\xfe\":2}", ErrDuplicateKey},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrTooDeep},
		{"far too deep and unclosed", strings.Repeat(`{"a":[`, 100*MaxDepth), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := HashJSON([]byte(tt.text)); !errors.Is(err, tt.wantErr) {
				t.Errorf("HashJSON(%.40q) error = %v, want %v", tt.text, err, tt.wantErr)
			}
		})
	}
}

func TestHashJSONAcceptsNestingAtTheLimit(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := HashJSON([]byte(text)); err != nil {
		t.Errorf("HashJSON of %d nested arrays: %v", MaxDepth, err)
	}
}
