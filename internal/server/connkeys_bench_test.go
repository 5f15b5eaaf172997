package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

// BenchmarkCallLookups is what every call through an http tool looks up
// in the wiring: the definition's binding and the connection's egress
// client.
func BenchmarkCallLookups(b *testing.B) {
	r, err := newRuntimes(httpruntime.New(httpruntime.Config{Client: func(*toolplane.Released) (*http.Client, error) { return http.DefaultClient, nil }}).Contract())
	if err != nil {
		b.Fatal(err)
	}
	d := &toolplane.Definition{
		Name: "load.get_item", Version: "1.0.0", SchemaHash: "sha256:0123456789abcdef0123456789abcdef", Description: "An item.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind:         toolplane.KindInternal, Effect: toolplane.EffectRead, Connection: "loadapi", Timeout: toolplane.Duration(time.Second),
		Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: http.MethodGet, URL: "http://127.0.0.1:8080/items/{id}"}},
	}
	rel := &toolplane.Released{Connection: &toolplane.Connection{ID: "con_1", Config: toolplane.ConnectionConfig{Auth: toolplane.AuthBearer,
		Egress: toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}}}}}
	clients := &egressClients{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Binding(d); err != nil {
			b.Fatal(err)
		}
		if _, err := clients.forReleased(rel); err != nil {
			b.Fatal(err)
		}
	}
}
