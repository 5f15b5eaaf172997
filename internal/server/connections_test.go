package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestEgressClientDropsKeyHeaderOnRedirect proves that the HTTP client a
// call through a connection uses drops the connection's own key header
// when a redirect leaves the host the request was sent to, as it drops
// Authorization: a redirect to another host of the connection's list (a
// subdomain another party may hold) must not learn the key.
func TestEgressClientDropsKeyHeaderOnRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range []string{"X-Api-Key", "Authorization", "X-Shop-Token"} {
			seen[h] = r.Header.Get(h)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
	}))
	defer origin.Close()

	rules := toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.0/8"}}
	tests := []struct {
		name   string
		config toolplane.ConnectionConfig
		header string
	}{
		{"header scheme", toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "X-API-Key", Egress: rules}, "X-Api-Key"},
		{"header scheme, other name, same rules", toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "x-shop-token", Egress: rules}, "X-Shop-Token"},
		{"bearer", toolplane.ConnectionConfig{Auth: toolplane.AuthBearer, Egress: rules}, "Authorization"},
	}
	clients := &egressClients{}
	for _, tc := range tests {
		rel := &toolplane.Released{Connection: &toolplane.Connection{ID: "con_1", Config: tc.config}}
		c, err := clients.forReleased(rel)
		if err != nil {
			t.Fatalf("%s: client: %v", tc.name, err)
		}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, origin.URL+"/start", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(tc.header, "s3cr3t-key")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: request: %v", tc.name, err)
		}
		resp.Body.Close()
		mu.Lock()
		got := seen[tc.header]
		mu.Unlock()
		if got != "" {
			t.Errorf("%s: the redirect to another host received %s: %q", tc.name, tc.header, got)
		}
	}
}
