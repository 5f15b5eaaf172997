package registry

import "testing"

// BenchmarkDecodeArguments decodes a read call's argument text as
// invocation does before validating it.
func BenchmarkDecodeArguments(b *testing.B) {
	raw := []byte(`{"id":"item_0042"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, refusal := DecodeArguments(raw); refusal != nil {
			b.Fatal(refusal)
		}
	}
}
