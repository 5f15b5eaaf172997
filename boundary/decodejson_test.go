package boundary_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/boundary"
)

// stdNormalized is what Normalize answered for a json.RawMessage when
// encoding/json's decoder (UseNumber, nothing but white space after the
// value) read it: the normalised tree, or the unrenderable marker for a
// text it refuses.
func stdNormalized(data []byte) any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "<unrenderable json>"
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return "<unrenderable json>"
	}
	return boundary.Normalize(v)
}

var rawSeeds = []string{
	`{"data":{"id":"w1","name":"Widget","price":12.50,"tags":["a","b"]}}`,
	`{"a":1,"a":2}`,
	`{"a":{"x":1},"a":{"y":2}}`,
	`"caf\u00e9 \"quoted\" \\ \/"`,
	"\"\xff\xfe bad utf-8\"",
	"{\"k\xff\":\"v\"}",
	`{"\u0000":"nul","a\u0000":"b"}`,
	`[1, -0, 1e400, 1.5E-7, 12345678901234567890]`,
	` [ true , false , null ] `,
	`{"a":1} x`,
	`{"a":1}{"b":2}`,
	`[1,]`,
	``,
	`   `,
	`{"__dropped__":{"reason":"too_large","bytes":1}}`,
	`[[],{},"",[[[[]]]],{"":{"":""}}]`,
}

// TestNormalizeRawReadsAsEncodingJSON holds Normalize's reading of a JSON
// text (a json.RawMessage answer, or a struct rendered through JSON) equal
// to encoding/json's, values and refusals alike.
func TestNormalizeRawReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range rawSeeds {
		got, want := boundary.Normalize(json.RawMessage(s)), stdNormalized([]byte(s))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: Normalize read %#v, encoding/json %#v", s, got, want)
		}
	}
}

// FuzzNormalizeRawReadsAsEncodingJSON is TestNormalizeRawReadsAsEncodingJSON
// over fuzzed texts.
func FuzzNormalizeRawReadsAsEncodingJSON(f *testing.F) {
	for _, s := range append(rawSeeds, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := boundary.Normalize(json.RawMessage(data)), stdNormalized(data)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: Normalize read %#v, encoding/json %#v", data, got, want)
		}
	})
}
