package httpruntime

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"
)

// BenchmarkDecode decodes a downstream's answer as a 2xx body is read.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"data":{"id":"w1","name":"Widget","price":12.50,"tags":["a","b"]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decode(body); !ok {
			b.Fatal("not decoded")
		}
	}
}

// decodeAsEncodingJSON is what decode must answer: encoding/json's
// reading of b into an any, numbers kept exact.
func decodeAsEncodingJSON(b []byte) (any, bool) {
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

func TestDecodeReadsAsEncodingJSON(t *testing.T) {
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
		want, wantOK := decodeAsEncodingJSON([]byte(body))
		got, ok := decode([]byte(body))
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("decode(%q) = %#v, %v; encoding/json reads %#v, %v", body, got, ok, want, wantOK)
		}
	}
}

// FuzzDecodeReadsAsEncodingJSON: whatever the body, decode answers what
// encoding/json reads, or refuses it as encoding/json does.
func FuzzDecodeReadsAsEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"data":{"id":"w1","name":"Widget","price":12.50,"tags":["a","b"],"x":null,"y":true}}`))
	f.Add([]byte(`[{"a":"\u00e9\\"},-1.5e-3,"\ud800x",false]`))
	f.Add([]byte("{\"\xff\":[\"\xe2\x80\xa8\"]}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantOK := decodeAsEncodingJSON(body)
		got, ok := decode(body)
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("decode(%q) = %#v, %v; encoding/json reads %#v, %v", body, got, ok, want, wantOK)
		}
	})
}
