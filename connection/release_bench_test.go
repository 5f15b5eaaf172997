package connection_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// readOnce is a store whose connection reads answer what the first read
// of each found: what Release costs once the row is read, with the read
// itself taken away. Only a benchmark may use it; the broker reads the
// store on every call so that a revocation takes effect on the next one.
type readOnce struct {
	connection.Store
	lists map[toolplane.ConnectionFilter][]toolplane.Connection
}

func (s *readOnce) ListConnections(ctx context.Context, org string, f toolplane.ConnectionFilter, after string, limit int) ([]toolplane.Connection, string, error) {
	if cs, ok := s.lists[f]; ok {
		// A copy, as a read answers: the broker may change what it
		// holds.
		return append([]toolplane.Connection(nil), cs...), "", nil
	}
	cs, next, err := s.Store.ListConnections(ctx, org, f, after, limit)
	if err == nil && next == "" {
		s.lists[f] = append([]toolplane.Connection(nil), cs...)
	}
	return cs, next, err
}

// BenchmarkRelease releases a shared static bearer connection for an HTTP
// tool's call, with the opened secret cached (warm): on the SQLite store,
// which the broker reads on every call, and with the store's answers
// replayed from memory, which leaves the part after the read (choosing,
// the scope and egress checks, opening from the cache).
func BenchmarkRelease(b *testing.B) {
	store := sqlitetest.Open(b, filepath.Join(b.TempDir(), "toolplane.db"))
	keys := ring(b, "k1")
	d := &toolplane.Definition{Name: "crm.read", Connection: "crm",
		Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "GET", URL: "http://127.0.0.1:9090/v1/contacts/{id}"}}}
	inv := call("")
	args := map[string]any{"id": "c-1"}
	admin0, err := connection.New(connection.Config{Store: store, Keys: keys, BaseURL: baseURL, Node: "n0"})
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
		{"sqlite", store},
		{"after-read", &readOnce{Store: store, lists: map[toolplane.ConnectionFilter][]toolplane.Connection{}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := connection.New(connection.Config{Store: bc.store, Keys: keys, BaseURL: baseURL, Node: "n1",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
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
