package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A listing differs per key: neither its HTTP answer nor its JSON-RPC
// result may be cached beyond the client that asked. The tools/call of the
// fast path is marked the same way.
func TestListingsAreNotPubliclyCacheable(t *testing.T) {
	t.Parallel()
	url, key := demoServer(t, "")
	post := func(sid, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	tests := []struct{ name, body, want string }{
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "demo_search_tickets"},
		{"tools/call", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo_search_tickets","arguments":{"query":"late"}}}`, `"result"`},
	}
	for _, tt := range tests {
		resp, body := post(sid, tt.body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tt.want) {
			t.Fatalf("%s: %d %s", tt.name, resp.StatusCode, body)
		}
		cc := resp.Header.Get("Cache-Control")
		if !strings.Contains(cc, "private") || !strings.Contains(cc, "no-store") {
			t.Errorf("%s: Cache-Control %q; want private, no-store", tt.name, cc)
		}
		if strings.Contains(body, `"cacheScope":"public"`) {
			t.Errorf("%s: the result says any cache may keep it: %s", tt.name, body)
		}
	}
}
