package httpruntime

import "testing"

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
