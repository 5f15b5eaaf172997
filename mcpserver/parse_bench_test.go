package mcpserver

import "testing"

func BenchmarkParseCall(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo_search_tickets","arguments":{"query":"cracked"},"_meta":{"progressToken":3}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseCall(body); !ok {
			b.Fatal("not a call")
		}
	}
}
