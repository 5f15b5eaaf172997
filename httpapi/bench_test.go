package httpapi

import (
	"bytes"
	"net/http"
	"testing"
)

// rewound is a request body the benchmark reads again on every round,
// so the round measures the decoding and not the body's own allocation.
type rewound struct{ bytes.Reader }

func (*rewound) Close() error { return nil }

// BenchmarkDecodeInvokeBody decodes the body of a read call as the
// invoke route does, from the request's body to invokeRequest.
func BenchmarkDecodeInvokeBody(b *testing.B) {
	body := []byte(`{"arguments":{"id":"item_0042"}}`)
	var rd rewound
	r := &http.Request{Method: http.MethodPost, Body: &rd}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		var req invokeRequest
		if err := decodeBody(r, &req); err != nil {
			b.Fatal(err)
		}
	}
}
