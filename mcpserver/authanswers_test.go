package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// authFixture is an MCP endpoint on loopback, served the way toolplane
// serve mounts it (the endpoint at /mcp, the protected resource metadata
// beside it), with an agent's key and a person's key.
type authFixture struct {
	url           string
	agent, person string
}

func newAuthFixture(t *testing.T, issuer string) *authFixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, _, _ := registry.Build(nil, registry.Options{})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
	f := &authFixture{}
	for _, k := range []struct {
		kind toolplane.CredentialKind
		key  *string
	}{{toolplane.CredentialAgent, &f.agent}, {toolplane.CredentialPerson, &f.person}} {
		id, secret, _ := apikey.New(k.kind)
		if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: k.kind, Subject: string(k.kind) + "-1",
			Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		*k.key = apikey.Key(id, secret)
	}
	door := &mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, store), Version: "test",
		PublicURL: "https://tp.example", AuthorizationServer: issuer}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door.Handler())
	mux.Handle(mcpserver.MetadataPath, door.ResourceMetadataHandler())
	mux.Handle(mcpserver.MetadataPath+"/", door.ResourceMetadataHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// rawAnswer is an HTTP answer as curl shows it.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
}

func send(t *testing.T, method, url, key, session, body string) rawAnswer {
	t.Helper()
	return sendTo(t, "", method, url, key, session, body)
}

// sendTo is send with the Host header host, when not "".
func sendTo(t *testing.T, host, method, url, key, session, body string) rawAnswer {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if host != "" {
		req.Host = host
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, resp.Header, b}
}

// Every refusal of the MCP endpoint's HTTP layer is JSON: a JSON-RPC error
// for the id of the request it refused, or the REST error envelope when
// the request had none. A 401 carries a Bearer challenge in toolplane's
// realm, naming the endpoint's protected resource metadata only where an
// authorization server is configured, and error="invalid_token" when a
// token was refused; a person's valid key is a 403 saying an agent's key
// is needed.
func TestMCPAuthAnswersAreStandard(t *testing.T) {
	t.Parallel()
	const (
		initialize = `{"jsonrpc":"2.0","id":%s,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		list       = `{"jsonrpc":"2.0","method":"tools/list","params":{},"id":%s}`
		meta       = "https://tp.example/.well-known/oauth-protected-resource/mcp"
	)
	plain, oauth := newAuthFixture(t, ""), newAuthFixture(t, "https://issuer.example")
	id, _, _ := apikey.Parse(plain.agent)
	wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	tests := []struct {
		name                   string
		f                      *authFixture
		method, key, sid, body string
		status                 int
		challenge              string
		// id is the JSON-RPC id the answer is for; "" for the envelope.
		id         string
		code, says string
	}{
		{"no key", plain, "POST", "", "", strings.ReplaceAll(initialize, "%s", "1"), 401,
			`Bearer realm="toolplane"`, "1", "unauthenticated", "send an agent's API key"},
		{"a wrong key", plain, "POST", wrong, "", strings.ReplaceAll(initialize, "%s", `"init-1"`), 401,
			`Bearer realm="toolplane", error="invalid_token"`, `"init-1"`, "unauthenticated", "the API key is not valid"},
		{"a wrong key, an authorization server configured", oauth, "POST", wrong, "", strings.ReplaceAll(initialize, "%s", "2"), 401,
			`Bearer realm="toolplane", resource_metadata="` + meta + `", error="invalid_token"`, "2", "unauthenticated", "not valid"},
		{"no key, an authorization server configured", oauth, "POST", "", "", strings.ReplaceAll(initialize, "%s", "3"), 401,
			`Bearer realm="toolplane", resource_metadata="` + meta + `"`, "3", "unauthenticated", "Bearer"},
		{"no key, a notification", plain, "POST", "", "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 401,
			`Bearer realm="toolplane"`, "", "unauthenticated", "send an agent's API key"},
		{"no key, a GET", plain, "GET", "", "", "", 401, `Bearer realm="toolplane"`, "", "unauthenticated", "send an agent's API key"},
		{"a person's key", plain, "POST", plain.person, "", strings.ReplaceAll(initialize, "%s", "4"), 403,
			"", "4", "denied", "tools are called with an agent's key"},
		{"a person's key, no id", plain, "GET", plain.person, "", "", 403, "", "", "denied", "this is a person's key"},
		{"an unknown session", plain, "POST", plain.agent, "no-such-session", strings.ReplaceAll(list, "%s", "5"), 404,
			"", "5", "not_found", "session not found"},
		{"an unknown session, a GET", plain, "GET", plain.agent, "no-such-session", "", 404, "", "", "not_found", "session not found"},
		{"a method the endpoint does not take", plain, "PUT", plain.agent, "", "", 405, "", "", "method_not_allowed", ""},
		{"a page on another host", plain, "POST", plain.agent, "", strings.ReplaceAll(initialize, "%s", "8"), 403, "", "8", "denied", "does not answer to host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := ""
			if strings.HasPrefix(tt.name, "a page on another host") {
				host = "attacker.example"
			}
			got := sendTo(t, host, tt.method, tt.f.url+"/mcp", tt.key, tt.sid, tt.body)
			if got.status != tt.status {
				t.Errorf("status %d, want %d: %s", got.status, tt.status, got.body)
			}
			if ct := got.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json: %s", ct, got.body)
			}
			if c := got.header.Get("WWW-Authenticate"); c != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", c, tt.challenge)
			}
			var detail map[string]any
			if tt.id != "" {
				var rpc struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   *struct {
						Code    int            `json:"code"`
						Message string         `json:"message"`
						Data    map[string]any `json:"data"`
					} `json:"error"`
				}
				if err := json.Unmarshal(got.body, &rpc); err != nil || rpc.JSONRPC != "2.0" || string(rpc.ID) != tt.id || rpc.Error == nil || rpc.Error.Code >= 0 {
					t.Fatalf("not a JSON-RPC error for id %s: %v: %s", tt.id, err, got.body)
				}
				if !strings.Contains(rpc.Error.Message, tt.says) {
					t.Errorf("message %q, want it to say %q", rpc.Error.Message, tt.says)
				}
				detail = rpc.Error.Data
			} else {
				var env struct {
					Error map[string]any `json:"error"`
				}
				if err := json.Unmarshal(got.body, &env); err != nil || env.Error == nil {
					t.Fatalf("not the error envelope: %v: %s", err, got.body)
				}
				detail = env.Error
			}
			if detail["code"] != tt.code || !strings.Contains(detail["message"].(string), tt.says) || detail["request_id"] == "" {
				t.Errorf("detail %v, want code %q saying %q with a request id", detail, tt.code, tt.says)
			}
		})
	}
}

// The protected resource metadata (RFC 9728) names the resource a client
// asked about and the configured authorization server; without one there
// is no document (the MCP authorization spec requires it to name one), so
// a 401 points nowhere and a client with a bad API key shows the refusal
// instead of starting an OAuth flow.
func TestMCPProtectedResourceMetadata(t *testing.T) {
	t.Parallel()
	plain, oauth := newAuthFixture(t, ""), newAuthFixture(t, "https://issuer.example")
	tests := []struct {
		name         string
		f            *authFixture
		method, path string
		status       int
		resource     string
	}{
		{"the server's", oauth, "GET", mcpserver.MetadataPath, 200, "https://tp.example"},
		{"the MCP endpoint's", oauth, "GET", mcpserver.MetadataPath + "/mcp", 200, "https://tp.example/mcp"},
		{"an endpoint that does not exist", oauth, "GET", mcpserver.MetadataPath + "/mcp/nothing", 404, ""},
		{"written to", oauth, "POST", mcpserver.MetadataPath + "/mcp", 405, ""},
		{"no authorization server: the server's", plain, "GET", mcpserver.MetadataPath, 404, ""},
		{"no authorization server: the MCP endpoint's", plain, "GET", mcpserver.MetadataPath + "/mcp", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := send(t, tt.method, tt.f.url+tt.path, "", "", "")
			if got.status != tt.status {
				t.Errorf("status %d, want %d: %s", got.status, tt.status, got.body)
			}
			if ct := got.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json: %s", ct, got.body)
			}
			if tt.status != 200 {
				var env struct {
					Error map[string]any `json:"error"`
				}
				if err := json.Unmarshal(got.body, &env); err != nil || env.Error == nil || env.Error["code"] == "" {
					t.Errorf("not the error envelope: %v: %s", err, got.body)
				}
				return
			}
			var doc struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				BearerMethods        []string `json:"bearer_methods_supported"`
			}
			if err := json.Unmarshal(got.body, &doc); err != nil {
				t.Fatalf("%v: %s", err, got.body)
			}
			if doc.Resource != tt.resource || len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != "https://issuer.example" ||
				len(doc.BearerMethods) != 1 || doc.BearerMethods[0] != "header" {
				t.Errorf("document %s; want resource %q, authorization_servers [https://issuer.example], bearer_methods_supported [header]", got.body, tt.resource)
			}
		})
	}
}
