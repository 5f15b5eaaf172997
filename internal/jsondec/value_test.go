package jsondec_test

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/internal/jsondec"
)

// valueAsEncodingJSON is what Value must answer: encoding/json's
// reading of b into an any, numbers kept exact.
func valueAsEncodingJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func TestValueReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{}`, `[]`, `""`, `0`, `-0.5e+10`, `1E400`, `true`, `false`, `null`, ` {"a" : [ 1 , 2 ] } `,
		`{"data":{"id":"w1","name":"Widget","price":12.50,"tags":["a","b"]}}`,
		`{"a":1,"a":2}`, `{"a":{"b":1},"a":"x"}`, `[[],{},[{}],""]`,
		`"\u00e9\n\"quoted\"\\"`, `{"k\u0000ey":"v\/al"}`, `"caf\u00e9 café"`, "\"\xff\xfe\"", "{\"\xc3\":\"\xed\xa0\x80\"}",
		`"\ud800"`, `"\ud83d\ude00 😀"`, `{"":""}`, "\t\r\n[ ]\n",
		// Not JSON: refused by both.
		``, `{`, `[1,]`, `{"a":1,}`, `01`, `1 2`, `tru`, `"\x"`, "\"a\x01\"", `{"a" 1}`, `'a'`, `NaN`, `[1]]`, `{}x`,
	} {
		want, wantOK := valueAsEncodingJSON([]byte(body))
		got, ok := jsondec.Value([]byte(body))
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("Value(%q) = %#v, %v; encoding/json reads %#v, %v", body, got, ok, want, wantOK)
		}
	}
}

// FuzzValueReadsAsEncodingJSON: whatever the text, Value answers what
// encoding/json reads, or refuses it as encoding/json does.
func FuzzValueReadsAsEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"data":{"id":"w1","name":"Widget","price":12.50,"tags":["a","b"],"x":null,"y":true}}`))
	f.Add([]byte(`[{"a":"\u00e9\\"},-1.5e-3,"\ud800x",false]`))
	f.Add([]byte("{\"\xff\":[\"\xe2\x80\xa8\"]}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantOK := valueAsEncodingJSON(body)
		got, ok := jsondec.Value(body)
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("Value(%q) = %#v, %v; encoding/json reads %#v, %v", body, got, ok, want, wantOK)
		}
	})
}

// BenchmarkValue reads the load generator's item, as a runtime reads a
// small JSON API's answer: by Value, and by encoding/json's pooled
// decoder, which Value replaced there.
func BenchmarkValue(b *testing.B) {
	body := []byte(`{"id":"w1","name":"Widget, blue, large","sku":"WDG-BLU-L-0001","price_cents":1299,"currency":"EUR","in_stock":true,` +
		`"quantity":42,"warehouse":"loopback-1","tags":["hardware","blue","large"],"updated_at":"2026-01-01T00:00:00Z",` +
		`"description":"A plain item record of about three hundred bytes, as a small JSON API answers."}`)
	b.Run("Value", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := jsondec.Value(body); !ok {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		pool := jsondec.New(jsondec.Options{UseNumber: true})
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := pool.DecodeOnly(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
