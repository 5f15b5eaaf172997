package policytest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
)

// FilledRequest answers a Request with every field set to a value that is
// not its zero: strings "set", true, 7, lists of one element, objects of
// one member "key", a time, and a user. A field added to policy.Request
// is filled too (fill panics on a kind it does not know, so a new kind is
// taught here rather than silently left zero).
func FilledRequest() *policy.Request {
	return filled(reflect.TypeFor[policy.Request]()).Interface().(*policy.Request)
}

// filled answers a pointer to a value of type t with every field set.
func filled(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	fill(p.Elem())
	return p
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("set")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		if e.Kind() == reflect.Interface {
			e.Set(reflect.ValueOf("set"))
		} else {
			fill(e)
		}
		m.SetMapIndex(reflect.ValueOf("key"), e)
		v.Set(m)
	case reflect.Pointer:
		v.Set(filled(v.Type().Elem()))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	default:
		panic("fill: no value for a field of kind " + v.Kind().String() + "; teach fill and every Request mapping about it")
	}
}

// MapsEveryField is the guard each hand-written mapping of policy.Request
// runs: the Rego input, the Cedar entities and request, the decision
// record's JSON. For every field of Request (walked by reflection, so a
// field added later is walked too) it maps FilledRequest and the same
// request with only that field zero, and fails t when equal finds the two
// mappings the same: that field never reaches what the engine or the
// record sees. mapping must be deterministic; equal compares its answers
// by meaning (for a Cedar record or a Rego object, not by their text,
// whose member order may vary).
func MapsEveryField[T any](t testing.TB, mapping func(*policy.Request) (T, error), equal func(a, b T) bool) {
	t.Helper()
	base, err := mapping(FilledRequest())
	if err != nil {
		t.Fatalf("mapping a filled Request: %v", err)
	}
	// The same request mapped twice must compare equal, or no field's
	// absence could ever be seen.
	if again, err := mapping(FilledRequest()); err != nil || !equal(base, again) {
		t.Fatalf("a filled Request maps differently twice (error %v): the mapping or equal is not deterministic", err)
	}
	fields := leaves(reflect.TypeFor[policy.Request](), nil, nil)
	if len(fields) == 0 {
		t.Fatal("policy.Request has no fields to check")
	}
	for _, f := range fields {
		r := FilledRequest()
		v := reflect.ValueOf(r).Elem()
		for _, i := range f.index {
			if v.Kind() == reflect.Pointer {
				v = v.Elem()
			}
			v = v.Field(i)
		}
		v.Set(reflect.Zero(v.Type()))
		got, err := mapping(r)
		if err != nil {
			t.Errorf("mapping a Request without %s: %v", f.name, err)
			continue
		}
		if equal(base, got) {
			t.Errorf("Request.%s does not reach the mapping: a request with it zero maps as one with it set", f.name)
		}
	}
}

// field is one leaf of Request: the field indexes leading to it (through
// pointers) and its dotted Go name.
type field struct {
	index []int
	name  string
}

// leaves answers every field of struct type t that is not itself a struct
// of fields (a time is a leaf), following pointers to structs.
func leaves(t reflect.Type, index []int, names []string) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		nm := append(append([]string(nil), names...), sf.Name)
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			out = append(out, leaves(ft, idx, nm)...)
			continue
		}
		out = append(out, field{index: idx, name: strings.Join(nm, ".")})
	}
	return out
}
