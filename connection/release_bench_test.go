package connection_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// unwatched is a store that tells no changes: the broker reads it on
// every call.
type unwatched struct{ connection.Store }

// BenchmarkRelease releases a shared static bearer connection for an HTTP
// tool's call, with the opened secret kept (warm): on the SQLite store
// read on every call (a store telling no changes), and with the broker
// watching the store's changes and answering from its memory, as a server
// does.
func BenchmarkRelease(b *testing.B) {
	store := sqlitetest.Open(b, filepath.Join(b.TempDir(), "toolplane.db"))
	keys := ring(b, "k1")
	d := &toolplane.Definition{Name: "crm.read", Connection: "crm",
		Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "GET", URL: "http://127.0.0.1:9090/v1/contacts/{id}"}}}
	inv := call("")
	args := map[string]any{"id": "c-1"}
	admin0, _, err := connection.New(connection.Config{Store: store, Keys: keys, BaseURL: baseURL, Node: "n0"})
	if err != nil {
		b.Fatal(err)
	}
	in := static("crm", "crm", secretToken("crm"))
	in.Config.Egress = toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}}
	if _, err := admin0.Create(b.Context(), admin, in); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		store connection.Store
	}{
		{"sqlite", unwatched{store}},
		{"memory", store},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, s, err := connection.New(connection.Config{Store: bc.store, Keys: keys, BaseURL: baseURL, Node: "n1",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			watch(b, s, bc.store)
			// The first release opens the seal and fills the cache.
			rel, err := s.Release(b.Context(), releaseOf(inv, d, args))
			if err != nil || rel.Secrets.Token == "" {
				b.Fatalf("Release = %v, %v", rel, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Release(b.Context(), releaseOf(inv, d, args)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
