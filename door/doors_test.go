package door_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/mcpserver"
)

// Both doors, over one door layer, take a bearer token by the same rule:
// the scheme in any case (RFC 6750), one token after it. The REST door
// once took only "Bearer " as written, the MCP door any case.
func TestBothDoorsTakeTheSameBearerRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	key := f.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.*"}, nil)
	api := &httpapi.Server{Door: f.door, Store: f.store, Log: quiet}
	mcp := &mcpserver.Server{Door: f.door, Log: quiet}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.Handler())
	mux.Handle("/", api.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	status := func(door, authorization string) int {
		t.Helper()
		var req *http.Request
		if door == "rest" {
			req, _ = http.NewRequest(http.MethodGet, srv.URL+"/v1/tools", nil)
		} else {
			req, _ = http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name, authorization string
		want                int
	}{
		{"as the RFC writes it", "Bearer " + key, http.StatusOK},
		{"lower case", "bearer " + key, http.StatusOK},
		{"upper case", "BEARER " + key, http.StatusOK},
		{"spaced out", "  Bearer   " + key + " ", http.StatusOK},
		{"no token", "Bearer", http.StatusUnauthorized},
		{"another scheme", "Basic " + key, http.StatusUnauthorized},
		{"two tokens", "Bearer " + key + " " + key, http.StatusUnauthorized},
		{"no header", "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		for _, door := range []string{"rest", "mcp"} {
			if got := status(door, tt.authorization); got != tt.want {
				t.Errorf("%s on %s: %d, want %d", tt.name, door, got, tt.want)
			}
		}
	}
}
