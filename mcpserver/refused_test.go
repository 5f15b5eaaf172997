package mcpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// The MCP door refuses a token in the words every door uses: what the
// token was taken for, not which check failed.
func TestMCPRefusesATokenForWhatItWasTakenFor(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, _, _ := registry.Build(nil, registry.Options{})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
	srv := httptest.NewServer((&mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, store)}).Handler())
	t.Cleanup(srv.Close)
	id, _, _ := apikey.New(toolplane.CredentialAgent)
	tests := []struct{ name, token, want string }{
		{"an unknown API key", apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "the API key is not valid"},
		{"a token that is no key, where only keys are accepted", "eyJhbGciOiJFUzI1NiJ9.e30.sig", "the bearer token is not a valid API key"},
	}
	for _, tt := range tests {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tt.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(got), tt.want) {
			t.Errorf("%s: %d %q; want 401 saying %q", tt.name, resp.StatusCode, got, tt.want)
		}
	}
}
