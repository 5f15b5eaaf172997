package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The served doors answer auth as curl sees them: a Bearer challenge
// naming the protected resource metadata of the resource asked (the MCP
// endpoint's, or the server's for the REST API), that metadata served,
// and JSON bodies. The metadata names toolplane's own authorization
// server (the public URL) with the scope "tools", or the JWT issuer when
// the operator chose it (--oauth-external-issuer); with neither (serve
// --oauth=false, no issuer) there is no metadata and no challenge names it.
func TestServeAuthAnswers(t *testing.T) {
	t.Parallel()
	const (
		issuer = "https://issuer.example"
		public = "http://toolplane.test:8443"
	)
	oauthBase := startServe(t, "--jwt-issuer", issuer, "--jwt-audience", "toolplane", "--jwt-jwks-url", "http://127.0.0.1:1/jwks", "--public-url", public, "--oauth-external-issuer").base
	plain := startServe(t)
	plainBase, admin := plain.base, plain.admin
	none := startServe(t, "--oauth=false").base
	tests := []struct {
		name, base, method, path, key string
		status                        int
		challenge                     string
		// resource is the metadata document's; "" when the answer is an
		// error. issuer is the authorization server it names.
		resource, issuer string
	}{
		{"/mcp without a key", oauthBase, "POST", "/mcp", "", 401,
			`Bearer realm="toolplane", resource_metadata="` + public + `/.well-known/oauth-protected-resource/mcp"`, "", ""},
		{"the REST API without a key", oauthBase, "GET", "/v1/tools", "", 401,
			`Bearer realm="toolplane", resource_metadata="` + public + `/.well-known/oauth-protected-resource"`, "", ""},
		{"the MCP endpoint's metadata", oauthBase, "GET", "/.well-known/oauth-protected-resource/mcp", "", 200, "", public + "/mcp", issuer},
		{"the server's metadata", oauthBase, "GET", "/.well-known/oauth-protected-resource", "", 200, "", public, issuer},
		{"an upstream that is not served", oauthBase, "GET", "/.well-known/oauth-protected-resource/mcp/nothing", "", 404, "", "", ""},
		{"/mcp without a key, own issuer", plainBase, "POST", "/mcp", "", 401, `Bearer realm="toolplane", resource_metadata="` + plainBase + `/.well-known/oauth-protected-resource/mcp"`, "", ""},
		{"the REST API without a key, own issuer", plainBase, "GET", "/v1/tools", "", 401, `Bearer realm="toolplane", resource_metadata="` + plainBase + `/.well-known/oauth-protected-resource"`, "", ""},
		{"a person's key on /mcp", plainBase, "POST", "/mcp", admin, 403, "", "", ""},
		{"own issuer: the MCP endpoint's metadata", plainBase, "GET", "/.well-known/oauth-protected-resource/mcp", "", 200, "", plainBase + "/mcp", plainBase},
		{"/mcp without a key, no authorization server", none, "POST", "/mcp", "", 401, `Bearer realm="toolplane"`, "", ""},
		{"no authorization server: no metadata", none, "GET", "/.well-known/oauth-protected-resource/mcp", "", 404, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
			req, _ := http.NewRequest(tt.method, tt.base+tt.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%d %s %s; want %d application/json", resp.StatusCode, resp.Header.Get("Content-Type"), raw, tt.status)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("not JSON: %v: %s", err, raw)
			}
			if tt.resource == "" {
				if doc["error"] == nil {
					t.Errorf("no error in %s", raw)
				}
				return
			}
			if servers, _ := doc["authorization_servers"].([]any); doc["resource"] != tt.resource || len(servers) != 1 || servers[0] != tt.issuer {
				t.Errorf("metadata %s; want resource %q and authorization_servers [%q]", raw, tt.resource, tt.issuer)
			}
			// Toolplane's own server is asked for the scope "tools"; an
			// external issuer's scopes are its own.
			scopes, _ := doc["scopes_supported"].([]any)
			if own := tt.issuer != issuer; own != (len(scopes) == 1 && scopes[0] == "tools") {
				t.Errorf("scopes_supported %v for issuer %s", scopes, tt.issuer)
			}
		})
	}
}
