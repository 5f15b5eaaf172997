package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// largestPattern is the costliest pattern the default limits admit: its
// program is exactly MaxPatternProgram instructions, every one of them live
// for every byte of a string of a's.
const largestPattern = `[a-z]{997}b`

// quote writes s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// alternation is a short pattern whose counted repeat expands it to
// hundreds of thousands of instructions.
func alternation(n int) string {
	alts := make([]string, n)
	for i := range alts {
		alts[i] = fmt.Sprintf("x%dy", i)
	}
	return "(?:" + strings.Join(alts, "|") + "){1000}"
}

func TestCompileBoundsPatterns(t *testing.T) {
	t.Parallel()
	manyLarge := make([]string, 60)
	for i := range manyLarge {
		manyLarge[i] = fmt.Sprintf(`"f%02d":{"type":"string","pattern":%s}`, i, quote(fmt.Sprintf(`^x%02d[a-z]{980}b`, i)))
	}
	tests := []struct {
		name, schema string
		pointer      string // "" when the schema is accepted
		limit        string // the limit the refusal names
	}{
		{"a large counted repeat", `{"type":"object","properties":{"text":{"type":"string","pattern":"[a-z]{1000}b"}}}`, "/properties/text/pattern", "MaxPatternProgram"},
		{"as a patternProperties name", `{"type":"object","patternProperties":{"[a-z]{1000}b":{"type":"string"}}}`, "/patternProperties/[a-z]{1000}b", "MaxPatternProgram"},
		{"under propertyNames", `{"type":"object","propertyNames":{"pattern":"^[a-z]{1000}b"}}`, "/propertyNames/pattern", "MaxPatternProgram"},
		{"in a definition", `{"$defs":{"t":{"type":"string","pattern":"(a{1,50}){1,20}"}},"type":"object","properties":{"text":{"$ref":"#/$defs/t"}}}`, "/$defs/t/pattern", "MaxPatternProgram"},
		{"a short pattern that expands a hundredfold", `{"type":"object","properties":{"text":{"type":"string","pattern":` + quote(alternation(300)) + `}}}`, "/properties/text/pattern", "MaxPatternProgram"},
		{"many admitted patterns", `{"type":"object","properties":{` + strings.Join(manyLarge, ",") + `}}`, "/properties/f50/pattern", "MaxPatternTotal"},
		{"the largest admitted pattern", `{"type":"object","properties":{"text":{"type":"string","pattern":` + quote(largestPattern) + `}}}`, "", ""},
		{"ordinary patterns", `{"type":"object","properties":{
			"order_id":{"type":"string","pattern":"^ord_[a-zA-Z0-9]{12}$"},
			"email":{"type":"string","pattern":"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$"},
			"uuid":{"type":"string","pattern":"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
			"day":{"type":"string","pattern":"^\\d{4}-\\d{2}-\\d{2}$"},
			"at":{"type":"string","pattern":"^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$"},
			"phone":{"type":"string","pattern":"^\\+?[1-9]\\d{1,14}$"},
			"iban":{"type":"string","pattern":"^[A-Z]{2}\\d{2}[A-Z0-9]{1,30}$"},
			"name":{"type":"string","pattern":"^[\\p{L}\\p{N} .'-]{1,100}$"},
			"handle":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,256}$"}},
			"patternProperties":{"^x-[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$":{"type":"string"}}}`, "", ""},
		{"the refund schema", refundSchema, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := Compile([]byte(tt.schema))
			// Milliseconds on an idle core; the margin is for -race on a
			// shared machine. Compiling the expanding alternation alone
			// takes about a second.
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Compile took %v", took)
			}
			if tt.pointer == "" {
				if err != nil {
					t.Fatalf("Compile = %v, want it accepted", err)
				}
				return
			}
			var ce *CompileError
			if !errors.As(err, &ce) || !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Compile = %v, want a CompileError for ErrTooComplex", err)
			}
			if ce.Pointer != tt.pointer {
				t.Errorf("refusal points at %q, want %q", ce.Pointer, tt.pointer)
			}
			want := fmt.Sprint(DefaultLimits.MaxPatternProgram)
			if tt.limit == "MaxPatternTotal" {
				want = fmt.Sprint(DefaultLimits.MaxPatternTotal)
			}
			if !strings.Contains(ce.Detail, tt.limit) || !strings.Contains(ce.Detail, want) {
				t.Errorf("the refusal does not name %s (%s): %v", tt.limit, want, err)
			}
		})
	}
}

func TestLargestPatternIsAtTheLimit(t *testing.T) {
	t.Parallel()
	n, err := programSize(largestPattern, DefaultLimits.MaxPatternProgram)
	if err != nil || n != DefaultLimits.MaxPatternProgram {
		t.Fatalf("programSize(%s) = %d, %v; want %d", largestPattern, n, err, DefaultLimits.MaxPatternProgram)
	}
}

// Every pattern match of one value is charged its length times its
// program, and a value over the regex work limit is refused before any
// pattern runs. Unbounded, the refused values below take from several
// seconds to over a minute each.
func TestValidatePatternWorkIsBounded(t *testing.T) {
	t.Parallel()
	a := func(n int) string { return strings.Repeat("a", n) }
	largest := quote(largestPattern)
	admitted := int(DefaultLimits.MaxRegexWork) / DefaultLimits.MaxPatternProgram
	names := func(count, length int) string {
		members := make([]string, count)
		for i := range members {
			members[i] = fmt.Sprintf(`"%s%d":1`, a(length), i)
		}
		return "{" + strings.Join(members, ",") + "}"
	}
	strs := func(count, length int) string {
		items := make([]string, count)
		for i := range items {
			items[i] = `"` + a(length) + `"`
		}
		return `{"t":[` + strings.Join(items, ",") + `]}`
	}
	tests := []struct {
		name, schema, value string
		want                string // the first violation's constraint; "" for valid
	}{
		{"a 900 KB string", `{"type":"object","properties":{"t":{"type":"string","pattern":` + largest + `}}}`, `{"t":"` + a(900_000) + `"}`, "maxWork"},
		{"a matching string the fast path would check", `{"type":"object","properties":{"t":{"type":"string","pattern":"^(?:a|[a-z]{990}b)*$"}}}`, `{"t":"` + a(300_000) + `"}`, "maxWork"},
		{"many strings, each admitted alone", `{"type":"object","properties":{"t":{"type":"array","items":{"type":"string","pattern":` + largest + `}}}}`, strs(100, admitted), "maxWork"},
		{"long member names against patternProperties", `{"type":"object","patternProperties":{` + largest + `:{}}}`, names(300, 1000), "maxWork"},
		{"long member names against propertyNames", `{"type":"object","propertyNames":{"pattern":` + largest + `}}`, names(300, 1000), "maxWork"},
		{"a string compiled for format regex", `{"type":"object","properties":{"t":{"type":"string","format":"regex"}}}`, `{"t":` + quote(alternation(300)) + `}`, "maxWork"},
		{"many strings compiled for format regex", `{"type":"object","properties":{"t":{"type":"array","items":{"type":"string","format":"regex"}}}}`, `{"t":[` + strings.Repeat(quote(alternation(40))+",", 40) + `"a"]}`, "maxWork"},
		{"an ordinary regex for format regex", `{"type":"object","properties":{"t":{"type":"string","format":"regex"}}}`, `{"t":"^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$"}`, ""},
		{"the largest admitted string", `{"type":"object","properties":{"t":{"type":"string","pattern":` + largest + `}}}`, `{"t":"` + a(admitted) + `"}`, "pattern"},
		{"an ordinary long string", `{"type":"object","properties":{"t":{"type":"string","pattern":"^[^<>]*$"}}}`, `{"t":"` + a(500_000) + `"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			v := decode(t, tt.value)
			start := time.Now()
			vs := s.Validate(v)
			took := time.Since(start)
			switch {
			case tt.want == "" && len(vs) != 0:
				t.Fatalf("Validate = %+v, want valid", vs)
			case tt.want != "" && (len(vs) == 0 || vs[0].Constraint != tt.want):
				t.Fatalf("Validate = %+v, want first constraint %s", vs[:min(len(vs), 1)], tt.want)
			}
			if tt.want == "maxWork" && !strings.Contains(vs[0].Message, fmt.Sprint(DefaultLimits.MaxRegexWork)) {
				t.Errorf("the refusal does not name the limit: %+v", vs[0])
			}
			// A refusal is a count, milliseconds on an idle core. The worst
			// admitted value takes 25–55 ms of CPU there; the margin is for
			// -race, which slows matching about tenfold, on a shared
			// machine.
			bound := 3 * time.Second
			if tt.want != "maxWork" {
				bound = 15 * time.Second
			}
			if took > bound {
				t.Errorf("Validate took %v", took)
			}
			t.Logf("%v", took)
		})
	}
}

// The regex part of the estimate is each string's and member name's length
// times the programs it meets.
func TestRegexWorkEstimate(t *testing.T) {
	t.Parallel()
	size := func(p string) int64 {
		n, err := programSize(p, DefaultLimits.MaxPatternProgram)
		if err != nil {
			t.Fatal(err)
		}
		return int64(n)
	}
	ab, cd := size("^ab$"), size("c+d")
	tests := []struct {
		name, schema, value string
		want                int64
	}{
		{"a string against a pattern", `{"pattern":"^ab$"}`, `"abcd"`, 4 * ab},
		{"a number is never matched", `{"pattern":"^ab$"}`, `1234`, 0},
		{"alternatives in place add up", `{"anyOf":[{"pattern":"^ab$"},{"pattern":"c+d"}]}`, `"abc"`, 3 * (ab + cd)},
		{"items per string", `{"items":{"pattern":"c+d"}}`, `["ab","cde"]`, 5 * cd},
		{"a string compiled for format regex", `{"format":"regex"}`, `"a{3}b"`, compileSteps("a{3}b", 1<<40)},
		{"member names against patternProperties and propertyNames", `{"patternProperties":{"^ab$":{"pattern":"c+d"}},"propertyNames":{"pattern":"c+d"}}`, `{"ab":"xyz","abc":1}`, 5*ab + 3*cd + 5*cd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			e := estimator{limit: work{evals: 1 << 40, regex: 1 << 40}, memo: map[costKey]work{}}
			if got := e.cost(s.cost, decode(t, tt.value)).regex; got != tt.want {
				t.Fatalf("regex estimate = %d, want %d", got, tt.want)
			}
		})
	}
}
