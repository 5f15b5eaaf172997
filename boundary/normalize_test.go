package boundary_test

import (
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/toolplane/toolplane/boundary"
)

type withFunc struct {
	Name string
	F    func()
}

type withNaN struct {
	Score float64 `json:"score"`
}

type person struct {
	ID    string    `json:"id"`
	Name  string    `json:"name"`
	Stage stage     `json:"stage"`
	Born  time.Time `json:"born"`
	Skip  string    `json:"-"`
	Note  string    `json:"note,omitempty"`
}

type stage string

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("boom") }

type failing struct{}

func (failing) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

type ptrMarshaler struct{ v string }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return json.Marshal("ptr:" + p.v) }

type graph map[string]graph

type ptrLoop *ptrLoop

type blob []byte

func TestNormalizeIsTotal(t *testing.T) {
	t.Parallel()

	selfMap := map[string]any{"name": "loop"}
	selfMap["self"] = selfMap
	fanOut := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		fanOut[k] = fanOut
	}
	selfSlice := make([]any, 2)
	selfSlice[0] = "x"
	selfSlice[1] = selfSlice
	g := graph{}
	g["next"] = g
	var loop ptrLoop
	loop = &loop

	var deep any = "bottom"
	for range 100 {
		deep = []any{deep}
	}
	deepWant := any("<unrenderable depth>")
	for range 65 {
		deepWant = []any{deepWant}
	}

	at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	zone := time.FixedZone("x", 2*3600)

	tests := []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"NaN", math.NaN(), "<unrenderable float>"},
		{"+Inf", math.Inf(1), "<unrenderable float>"},
		{"-Inf float32", float32(math.Inf(-1)), "<unrenderable float>"},
		{"func", func() {}, "<unrenderable func()>"},
		{"chan", make(chan int), "<unrenderable chan int>"},
		{"complex", complex(1, 2), "<unrenderable complex128>"},
		{"unsafe pointer", unsafe.Pointer(&at), "<unrenderable unsafe.Pointer>"},
		{"bytes", []byte("secret"), "<unrenderable bytes>"},
		{"named bytes", blob("x"), "<unrenderable bytes>"},
		{"nil bytes", []byte(nil), "<unrenderable bytes>"},
		{"struct with func field", withFunc{Name: "x", F: func() {}}, "<unrenderable boundary_test.withFunc>"},
		{"struct with NaN field", withNaN{Score: math.NaN()}, "<unrenderable boundary_test.withNaN>"},
		{"panicking marshaler", panicky{}, "<unrenderable boundary_test.panicky>"},
		{"failing marshaler", failing{}, "<unrenderable boundary_test.failing>"},
		{"pointer-receiver marshaler", &ptrMarshaler{v: "a"}, "ptr:a"},
		{"pointer cycle via map", selfMap, map[string]any{"name": "loop", "self": "<unrenderable cycle>"}},
		{"fan-out cycle", fanOut, map[string]any{
			"a": "<unrenderable cycle>", "b": "<unrenderable cycle>", "c": "<unrenderable cycle>", "d": "<unrenderable cycle>",
			"e": "<unrenderable cycle>", "f": "<unrenderable cycle>", "g": "<unrenderable cycle>", "h": "<unrenderable cycle>",
		}},
		{"slice cycle", selfSlice, []any{"x", "<unrenderable cycle>"}},
		{"typed map cycle", g, map[string]any{"next": "<unrenderable cycle>"}},
		{"pointer loop", loop, "<unrenderable depth>"},
		{"deep nesting", deep, deepWant},
		{"invalid UTF-8", "a\xffb\xc0", "a\uFFFDb\uFFFD"},
		{"control characters", "a\x00b\x1bc\r\n\td\u0085e\x7f\u200bf", "abc\n\tde\u200bf"},
		{"control characters in keys", map[string]any{"k\x00e\x1by": "v\x07"}, map[string]any{"key": "v"}},
		{"clean key beats cleaned key", map[string]any{"a\x00": "1", "a": "2"}, map[string]any{"a": "2"}},
		{"smaller raw key wins", map[string]any{"a\x02": "2", "a\x01": "1"}, map[string]any{"a": "1"}},
		{"typed key collision", map[string]int{"b\x01": 1, "b": 2}, map[string]any{"b": json.Number("2")}},
		{"valid number", json.Number("-0.5e+10"), json.Number("-0.5e+10")},
		{"invalid number", json.Number("1e"), "<unrenderable number>"},
		{"empty number", json.Number(""), "<unrenderable number>"},
		{"number with spaces", json.Number(" 1"), "<unrenderable number>"},
		{"raw message", json.RawMessage(`{"a":[1,2.50,"\u0001x"]}`), map[string]any{"a": []any{json.Number("1"), json.Number("2.50"), "x"}}},
		{"invalid raw message", json.RawMessage(`{"a"`), "<unrenderable json>"},
		{"raw message with trailing data", json.RawMessage(`1 2`), "<unrenderable json>"},
		{"nil raw message", json.RawMessage(nil), nil},
		{"time UTC", at, "2024-05-01T12:00:00.123456789Z"},
		{"time in zone", at.In(zone), "2024-05-01T14:00:00.123456789+02:00"},
		{"time pointer", &at, "2024-05-01T12:00:00.123456789Z"},
		{"time year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "10000-01-01T00:00:00Z"},
		{"nil pointer", (*int)(nil), nil},
		{"pointer", func() *int { i := 7; return &i }(), json.Number("7")},
		{"int8", int8(-8), json.Number("-8")},
		{"uint16", uint16(16), json.Number("16")},
		{"uintptr", uintptr(9), json.Number("9")},
		{"max uint64", uint64(math.MaxUint64), json.Number("18446744073709551615")},
		{"min int64", int64(math.MinInt64), json.Number("-9223372036854775808")},
		{"float", 0.1, json.Number("0.1")},
		{"float32", float32(0.1), json.Number("0.1")},
		{"big float", 1e21, json.Number("1e+21")},
		{"small float", 1e-7, json.Number("1e-7")},
		{"negative zero", math.Copysign(0, -1), json.Number("-0")},
		{"named string", stage("active\x00"), "active"},
		{"nil slice", []int(nil), []any{}},
		{"nil map", map[string]int(nil), map[string]any{}},
		{"nil plain slice", []any(nil), []any{}},
		{"nil plain map", map[string]any(nil), map[string]any{}},
		{"int keys", map[int]string{1: "a", -2: "b"}, map[string]any{"1": "a", "-2": "b"}},
		{"text marshaler keys", map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true}, map[string]any{"10.0.0.1": true}},
		{"float keys", map[float64]int{1.5: 1}, "<unrenderable map>"},
		{"array keys", map[[2]int]int{{1, 2}: 1}, "<unrenderable map>"},
		{"nil map with bad keys", map[bool]int(nil), "<unrenderable map>"},
		{"interface keys", map[any]any{"a": 1, 2: "b"}, map[string]any{"a": json.Number("1"), "2": "b"}},
		{"interface key without a name", map[any]any{"a": 1, 1.5: "b"}, "<unrenderable map>"},
		{"interface keys colliding", map[any]any{"1": "s", 1: "i"}, map[string]any{"1": "i"}},
		{"array", [3]int{1, 2, 3}, []any{json.Number("1"), json.Number("2"), json.Number("3")}},
		{"text marshaler value", netip.MustParseAddr("::1"), "::1"},
		{"struct", person{ID: "p-1", Name: "A\x00", Stage: "active", Born: at, Skip: "x"},
			map[string]any{"id": "p-1", "name": "A", "stage": "active", "born": "2024-05-01T12:00:00.123456789Z"}},
		{"nested mixed", map[string]any{"a": []int{1}, "b": []any{int64(2), 2.5, nil, true}},
			map[string]any{"a": []any{json.Number("1")}, "b": []any{json.Number("2"), json.Number("2.5"), nil, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := boundary.Normalize(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Normalize = %#v, want %#v", got, tt.want)
			}
			assertPlain(t, got)
			if b := boundary.Encode(nil, got); !json.Valid(b) {
				t.Fatalf("Encode = %s: not valid JSON", b)
			}
			if again := boundary.Normalize(got); !reflect.DeepEqual(again, got) {
				t.Fatalf("Normalize is not idempotent: %#v then %#v", got, again)
			}
		})
	}
}

// assertPlain fails unless v is built only from the plain tree types, with
// clean strings.
func assertPlain(t *testing.T, v any) {
	t.Helper()
	walk(v, func(x any) {
		switch s := x.(type) {
		case nil, bool, json.Number, []any:
		case string:
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f }) {
				t.Fatalf("control character left in %q", s)
			}
		case map[string]any:
			for k := range s {
				if strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }) {
					t.Fatalf("control character left in key %q", k)
				}
			}
		default:
			t.Fatalf("%T is not a plain tree type", x)
		}
	})
}

func TestNormalizeFloatsMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	tests := []float64{
		0, 1, -1, 0.1, 1.5, 1e-6, 9.99999e-7, 1e20, 1e21, 123456789012345678, 1e-300,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 3.141592653589793, -2.5e-8, 100,
	}
	for _, f := range tests {
		for _, v := range []any{f, float32(f)} {
			want, err := json.Marshal(v)
			if err != nil {
				continue // float32 overflow to +Inf
			}
			if got := boundary.Normalize(v); got != json.Number(want) {
				t.Errorf("Normalize(%T %v) = %v, want %s", v, v, got, want)
			}
		}
	}
}

// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestNormalizePlainValueIsNotCopied(t *testing.T) {
	v := map[string]any{"rows": rows(50), "next": nil, "n": json.Number("3"), "ok": true}
	got := boundary.Normalize(v)
	if reflect.ValueOf(got).Pointer() != reflect.ValueOf(v).Pointer() {
		t.Fatal("a plain map was copied")
	}
	allocs := testing.AllocsPerRun(20, func() { boundary.Normalize(v) })
	if allocs > 0 {
		t.Fatalf("Normalize of a plain tree allocated %v times", allocs)
	}
}

func TestNormalizeDoesNotModifyInput(t *testing.T) {
	t.Parallel()
	in := map[string]any{"a\x00": []any{1, "x\x01"}, "b": map[string]any{"c": 2.5}}
	before := boundary.Encode(nil, in)
	_ = boundary.Normalize(in)
	if after := boundary.Encode(nil, in); string(before) != string(after) {
		t.Fatalf("input changed: %s became %s", before, after)
	}
}
