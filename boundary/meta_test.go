package boundary

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestMetaMatchesEncodingJSON proves appendMeta writes what encoding/json
// writes of a Meta (without HTML escaping), byte for byte: with no field
// set, each field set alone, and all of them. A field added to Meta that
// appendMeta does not write fails it.
func TestMetaMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	set := func(f reflect.Value) {
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("v2 <soon> & \"then\"\u2028\xff\n")
		case reflect.Pointer:
			n := reflect.New(f.Type().Elem())
			n.Elem().SetInt(-42)
			f.Set(n)
		default:
			t.Fatalf("Meta holds a %s: teach appendMeta and this test", f.Kind())
		}
	}
	metas := []toolplane.Meta{{}}
	var all toolplane.Meta
	for i := range reflect.TypeFor[toolplane.Meta]().NumField() {
		var one toolplane.Meta
		set(reflect.ValueOf(&one).Elem().Field(i))
		set(reflect.ValueOf(&all).Elem().Field(i))
		metas = append(metas, one)
	}
	metas = append(metas, all)
	for _, m := range metas {
		if got, want := appendMeta(nil, &m), appendJSON(nil, m); !bytes.Equal(got, want) {
			t.Errorf("appendMeta = %s\nencoding/json = %s", got, want)
		}
	}
}
