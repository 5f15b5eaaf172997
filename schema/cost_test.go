package schema

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// nestedAnyOf writes a schema whose property x is levels of anyOf, each
// offering the level below twice through $ref: every level doubles what a
// validator walks. With items, x is an array of such values.
func nestedAnyOf(levels int, items bool) string {
	var b strings.Builder
	x := fmt.Sprintf(`{"$ref":"#/$defs/l%d"}`, levels)
	if items {
		x = `{"type":"array","items":` + x + `}`
	}
	b.WriteString(`{"type":"object","properties":{"x":` + x + `},"$defs":{"l0":{"type":"string"}`)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, `,"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1)
	}
	b.WriteString(`}}`)
	return b.String()
}

// fanOut is the same doubling through allOf, which the coercion plan also
// follows.
func fanOut(levels int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{"type":"string"}}}`, levels)
	return b.String()
}

func numbers(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]"
}

func TestCompileRefusesExpansion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		refuse bool
	}{
		{"19 levels of anyOf over $ref", nestedAnyOf(19, false), true},
		{"12 levels of anyOf over $ref", nestedAnyOf(12, false), true},
		{"40 levels of allOf over $ref", fanOut(40), true},
		{"oneOf doubling", strings.ReplaceAll(nestedAnyOf(19, false), "anyOf", "oneOf"), true},
		{"11 levels of anyOf over $ref", nestedAnyOf(11, false), false},
		{"shared definitions", `{"$defs":{"m":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/$defs/m"},"b":{"$ref":"#/$defs/m"}}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if len(tt.schema) > 4096 {
				t.Fatalf("the case should be a small document, got %d bytes", len(tt.schema))
			}
			start := time.Now()
			_, err := Compile([]byte(tt.schema))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Compile took %v", took)
			}
			if !tt.refuse {
				if err != nil {
					t.Fatalf("Compile = %v, want it accepted", err)
				}
				return
			}
			if !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Compile = %v, want ErrTooComplex", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(DefaultLimits.MaxExpanded)) {
				t.Errorf("the refusal does not name the bound %d: %v", DefaultLimits.MaxExpanded, err)
			}
		})
	}
}

// An accepted schema near the expansion bound, given an instance that
// multiplies its work, is refused before the validator runs, and promptly;
// under the bound the same schema is validated for real.
func TestValidateWorkBound(t *testing.T) {
	t.Parallel()
	src := nestedAnyOf(11, true)
	tests := []struct {
		name      string
		lim       Limits
		items     int
		wantOver  bool
		wantFirst string // the constraint of the first violation
	}{
		{"default limits, many items", DefaultLimits, 2000, true, "maxWork"},
		{"default limits, a few items", DefaultLimits, 2, false, "anyOf"},
		{"lowered limit, over", Limits{MaxBytes: 1 << 20, MaxDepth: 32, MaxWork: 50_000}, 10, true, "maxWork"},
		{"lowered limit, under", Limits{MaxBytes: 1 << 20, MaxDepth: 32, MaxWork: 50_000}, 5, false, "anyOf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := CompileLimits([]byte(src), tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			v := decode(t, `{"x":`+numbers(tt.items)+`}`)
			start := time.Now()
			vs := s.Validate(v)
			took := time.Since(start)
			if len(vs) == 0 {
				t.Fatal("an invalid value was accepted")
			}
			if vs[0].Constraint != tt.wantFirst {
				t.Fatalf("first violation = %+v, want constraint %s", vs[0], tt.wantFirst)
			}
			if tt.wantOver {
				if vs[0].FieldPath != "" || !strings.Contains(vs[0].Message, fmt.Sprint(s.maxWork)) || vs[0].SuggestedFix == "" {
					t.Errorf("the refusal does not name the limit: %+v", vs[0])
				}
				// Refused by counting, not by running the validator.
				if took > time.Second {
					t.Errorf("refusal took %v", took)
				}
			}
		})
	}
}

// The most work the default limits admit finishes in a bounded time: the
// schema at the expansion bound, with as many items as the work bound
// lets through, every one of them invalid.
func TestValidateWorstAdmittedIsBounded(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, nestedAnyOf(11, true))
	n := int(DefaultLimits.MaxWork/s.cost.expanded) - 1
	v := decode(t, `{"x":`+numbers(n)+`}`)
	start := time.Now()
	vs := s.Validate(v)
	took := time.Since(start)
	if len(vs) == 0 || vs[0].Constraint == "maxWork" {
		t.Fatalf("want the value validated and refused for its items, got %+v", vs[:min(len(vs), 1)])
	}
	// The bound is a fraction of a second on an idle core; the margin is
	// for a shared machine under -race. Unbounded, the same schema with
	// 2000 items takes over half a minute.
	if took > 15*time.Second {
		t.Errorf("the worst admitted validation took %v", took)
	}
	t.Logf("%d items, %d evaluations at most: %v", n, int64(n)*s.cost.expanded, took)
}

// The estimate is an upper bound of the reference validator's work, so a
// value it admits never exceeds the limit; this compares it with a count of
// the schema's expansion for shapes whose exact work is known.
func TestWorkEstimate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, value string
		want                int64
	}{
		{"scalar against a leaf", `{"type":"string"}`, `"a"`, 1},
		{"object of two fields", `{"type":"object","properties":{"a":{"type":"string"},"b":{}}}`, `{"a":"x","b":1,"c":2}`, 3},
		{"array items", `{"type":"array","items":{"type":"integer"}}`, `[1,2,3]`, 4},
		{"shared ref counted per use", `{"$defs":{"m":{"type":"integer"}},"anyOf":[{"$ref":"#/$defs/m"},{"$ref":"#/$defs/m"}]}`, `{}`, 5},
		{"additional and names per member", `{"additionalProperties":{"type":"string"},"propertyNames":{"maxLength":3}}`, `{"ab":"x","cd":"y"}`, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			e := estimator{limit: work{evals: 1 << 40, regex: 1 << 40}, memo: map[costKey]work{}}
			if got := e.cost(s.cost, decode(t, tt.value)).evals; got != tt.want {
				t.Fatalf("estimate = %d, want %d", got, tt.want)
			}
		})
	}
}

// The reference checks are linear in the document: a schema near the size
// limit holding eighteen thousand references is read (and refused for its
// expansion) in about nine times the time of one holding two thousand.
// The cycle check used to compare every reference with every other, which
// took seconds for this document, eighty times the smaller one's. The
// ratio, of the faster of two runs each, holds on a loaded machine and
// under -race, where a bound on the time itself does not.
func TestCompileIsLinearInReferences(t *testing.T) {
	doc := func(n int) []byte {
		return []byte(`{"type":"object","properties":{"x":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#a"},`, n), ",") + `]}},"$defs":{"a":{"$anchor":"a","type":"string"}}}`)
	}
	fastest := func(src []byte) time.Duration {
		best := time.Duration(math.MaxInt64)
		for range 2 {
			start := time.Now()
			_, err := Compile(src)
			took := time.Since(start)
			if err != nil && !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Compile = %v, want it compiled or refused for its expansion", err)
			}
			best = min(best, took)
		}
		return best
	}
	large := doc(18000)
	if len(large) > DefaultLimits.MaxBytes {
		t.Fatalf("%d bytes, over the size limit", len(large))
	}
	small, big := fastest(doc(2000)), fastest(large)
	if ratio := float64(big) / float64(small); ratio > 30 {
		t.Errorf("nine times the references took %.0f times as long (%v against %v): not linear", ratio, big, small)
	}
}

func TestCyclesSpelledOtherwiseAreRefused(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"allOf":[{"$ref":"#/allOf/00"}]}`,
		`{"$defs":{"a":{"not":{"$ref":"#/%24defs/a"}}}}`,
		`{"$defs":{"a":{"$dynamicAnchor":"n","items":{"$dynamicRef":"#n"}}}}`,
		`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"$ref":"#/$defs/c"}]},"c":{"properties":{"d":{"$ref":"#/$defs/a"}}}}}`,
	} {
		if _, err := Compile([]byte(src)); !errors.Is(err, ErrRefCycle) {
			t.Errorf("%s: Compile = %v, want ErrRefCycle", src, err)
		}
	}
}
