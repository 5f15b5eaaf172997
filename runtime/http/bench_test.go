package httpruntime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// BenchmarkRead is one read call through the runtime against a loopback
// server: build, send over a kept-alive connection, read and decode.
func BenchmarkRead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"id":"w1","name":"Widget","price":12.50,"tags":["a","b"]}}`)
	}))
	b.Cleanup(srv.Close)
	bd := bind(b, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{
		Method: http.MethodGet, URL: srv.URL + "/v1/items/{id}", Query: map[string]string{"q": "{q}"}, Output: "/data"}))
	call := handler.Call{Tool: "billing.item", Version: "1.0.0", Released: connection()}
	args := map[string]any{"id": "w1", "q": "blue widgets"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bd.Invoke(ctx, call, args); err != nil {
			b.Fatal(err)
		}
	}
}
