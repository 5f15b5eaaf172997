package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// FuzzHashKeyOrder builds one object from fuzzed members and writes it as
// JSON text twice, members in opposite orders and spelled differently
// (whitespace, escapes, number forms). Both texts and the Go value must hash
// alike.
func FuzzHashKeyOrder(f *testing.F) {
	f.Add("a", "b", "c", "value", int64(1), 0.5)
	f.Add("", "\x00", "\U0001f600", "\ufb33 <&>", int64(-1), math.Copysign(0, -1))
	f.Add("\ue000", "\U00010000", "é", "\u2028", int64(math.MinInt64), 1e21)
	f.Add("k", "k", "\xff", "\xfe\xff", int64(math.MaxInt64), 5e-324)
	f.Add("\\", "\"", "/", "\t\n", int64(0), 1.7976931348623157e308)
	f.Fuzz(func(t *testing.T, k1, k2, k3, s string, n int64, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			x = 0
		}
		values := []any{s, n, x}
		obj := map[string]any{}
		var names []string
		for i, k := range []string{k1, k2, k3} {
			// Decoding replaces each invalid byte with U+FFFD, so two keys
			// are the same member when they read alike afterwards.
			k = string([]rune(k))
			if _, dup := obj[k]; dup {
				continue
			}
			obj[k] = values[i]
			names = append(names, k)
		}

		var forward, backward strings.Builder
		forward.WriteByte('{')
		for i, k := range names {
			if i > 0 {
				forward.WriteByte(',')
			}
			forward.WriteString(mustJSON(t, k))
			forward.WriteByte(':')
			forward.WriteString(mustJSON(t, obj[k]))
		}
		forward.WriteByte('}')
		backward.WriteString(" {\n")
		for i := len(names) - 1; i >= 0; i-- {
			k := names[i]
			backward.WriteString("\t")
			backward.WriteString(escapeEveryRune(k))
			backward.WriteString(" : ")
			switch v := obj[k].(type) {
			case string:
				backward.WriteString(escapeEveryRune(v))
			case int64:
				backward.WriteString(strconv.FormatInt(v, 10) + ".000e0")
			case float64:
				backward.WriteString(strconv.FormatFloat(v, 'e', -1, 64))
			}
			if i > 0 {
				backward.WriteByte(',')
			}
			backward.WriteString("\r\n")
		}
		backward.WriteString("}\n")

		want, err := Hash(obj)
		if err != nil {
			t.Fatalf("Hash(%#v): %v", obj, err)
		}
		for _, text := range []string{forward.String(), backward.String()} {
			got, err := HashJSON([]byte(text))
			if err != nil {
				t.Fatalf("HashJSON(%q): %v", text, err)
			}
			if got != want {
				canon, _ := Marshal(obj)
				t.Fatalf("HashJSON(%q) = %s, want %s (canonical %q)", text, got, want, canon)
			}
		}

		// The sort must agree with UTF-16 order for any pair of names.
		for _, a := range names {
			for _, b := range names {
				if got, want := compareUTF16(a, b), referenceCompareUTF16(a, b); got != want {
					t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
				}
			}
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%#v): %v", v, err)
	}
	return string(b)
}

// escapeEveryRune writes s as a JSON string with every character escaped as
// \uXXXX (a surrogate pair above U+FFFF), the spelling furthest from the
// canonical one.
func escapeEveryRune(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		for _, u := range utf16.Encode([]rune{r}) {
			b.WriteString(`\u`)
			b.WriteString(strings.ToUpper(strconv.FormatUint(uint64(u)|0x10000, 16)[1:]))
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzCanonicalIdempotent checks that whatever JSON text decodes has a
// canonical form that is itself valid JSON and its own canonical form, with
// the same hash.
func FuzzCanonicalIdempotent(f *testing.F) {
	for _, seed := range []string{
		`null`, `true`, `0`, `-0.0e-0`, `"x"`, `[]`, `{}`,
		`{"b":[1,2.50,{"d":null,"c":"\u00e9"}],"a":-1e-7}`,
		`[12345678901234567890,1e400,-1E-400,0.000001,1e21]`,
		"\"\xff\xfe\"",
		`"\ud800\udc00\ud800"`,
		`{"\u0000":"\u001f","\ufb33":1,"\ud83d\ude00":2}`,
		`{"a":1,"a":2}`,
		` [ 1 , [ 2 , [ 3 ] ] ] `,
		`1 2`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decode(raw)
		if err != nil {
			// Beyond invalid JSON, only what the package refuses on purpose.
			if json.Valid(raw) && !errors.Is(err, ErrDuplicateKey) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("decode(%q) refused valid JSON: %v", raw, err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("decode(%q) accepted invalid JSON", raw)
		}
		out, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal of decoded %q: %v", raw, err)
		}
		if !json.Valid(out) {
			t.Fatalf("canonical form %q of %q is not valid JSON", out, raw)
		}
		v2, err := decode(out)
		if err != nil {
			t.Fatalf("decode of canonical %q: %v", out, err)
		}
		again, err := Marshal(v2)
		if err != nil {
			t.Fatalf("Marshal of canonical %q: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("canonical form is not stable:\n%q\n%q", out, again)
		}
		h1, err1 := HashJSON(raw)
		h2, err2 := HashJSON(out)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("HashJSON differs: %s %v / %s %v", h1, err1, h2, err2)
		}
	})
}

// FuzzKeyRoundTrip checks that Key and SplitKey are exact inverses: parts
// survive a round trip, and every string SplitKey accepts is the key of what
// it returns.
func FuzzKeyRoundTrip(f *testing.F) {
	for _, seed := range []string{"", "a", "run-1,agent", "a:b,c", "5:run-1,5:agent", "0:", "0:,0:", "01:a", "1:a,", "3:a:b,3:c,d"} {
		f.Add(seed, byte(','))
		f.Add(seed, byte(':'))
	}
	f.Fuzz(func(t *testing.T, data string, sep byte) {
		parts := strings.Split(data, string([]byte{sep}))
		key := Key(parts...)
		got, err := SplitKey(key)
		if err != nil {
			t.Fatalf("SplitKey(Key(%q)) = %v", parts, err)
		}
		if !slices.Equal(got, parts) {
			t.Fatalf("SplitKey(Key(%q)) = %q", parts, got)
		}

		split, err := SplitKey(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedKey) {
				t.Fatalf("SplitKey(%q) error %v does not wrap ErrMalformedKey", data, err)
			}
			return
		}
		if again := Key(split...); again != data {
			t.Fatalf("SplitKey(%q) = %q, which Key writes as %q", data, split, again)
		}
	})
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzNumberExact checks the number form against the JSON grammar and an
// exact rational reading of the input, and that a float and its own text
// canonicalise alike.
func FuzzNumberExact(f *testing.F) {
	for _, seed := range []string{"0", "-0", "1.0", "1e21", "1e20", "0.000001", "1e-7", "12345678901234567891", "-1.5e-300", "01", "1.", "1e99999999999999999999", "0.00e5"} {
		f.Add(seed, 0.1)
	}
	f.Fuzz(func(t *testing.T, s string, x float64) {
		out, err := Marshal(json.Number(s))
		if !jsonNumber.MatchString(s) {
			if !errors.Is(err, ErrInvalidNumber) {
				t.Fatalf("Marshal(%q) = %s, %v; want ErrInvalidNumber", s, out, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Marshal(%q): %v", s, err)
		}
		if !jsonNumber.Match(out) {
			t.Fatalf("Marshal(%q) = %q, not a JSON number", s, out)
		}
		again, err := Marshal(json.Number(out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Marshal(%q) = %s, which canonicalises to %s, %v", s, out, again, err)
		}
		if exponentSmall(s) && !sameRational(s, string(out)) {
			t.Fatalf("Marshal(%q) = %s, a different value", s, out)
		}

		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		fromFloat, err := Marshal(x)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", x, err)
		}
		fromText, err := Marshal(json.Number(strconv.FormatFloat(x, 'e', -1, 64)))
		if err != nil || !bytes.Equal(fromFloat, fromText) {
			t.Fatalf("float %v gives %s, its text gives %s, %v", x, fromFloat, fromText, err)
		}
		if back, err := strconv.ParseFloat(string(fromFloat), 64); err != nil || back != x {
			t.Fatalf("float %v canonicalises to %s, which reads back as %v, %v", x, fromFloat, back, err)
		}
	})
}
