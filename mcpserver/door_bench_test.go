package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/ratelimit"
)

// BenchmarkFastPathCall is one tools/call of an established session
// through the whole door, as serve wires it: host check, authentication
// from the key cache, the rate limits, the fast path and the invoker. The
// network is left out, so what the door itself costs is what is measured.
func BenchmarkFastPathCall(b *testing.B) {
	f := newFastFixture(b, 0)
	f.s.Door.Keys = apikey.NewCache(0, time.Hour)
	f.s.Door.Limiter = ratelimit.New(1<<30, time.Minute)
	h := f.s.Handler()
	cs := f.connect(b)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`
	req := func() *http.Request {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
		r.RemoteAddr = "127.0.0.1:40000"
		for k, v := range map[string]string{"Authorization": "Bearer " + f.keyA, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": version} {
			r.Header.Set(k, v)
		}
		return r
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req())
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Ada") {
		b.Fatalf("%d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req())
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
