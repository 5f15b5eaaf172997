package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serveFor starts toolplane serve with args (and a fresh database) for
// the test, and answers its base URL and the admin and demo agent keys.
func serveFor(t *testing.T, args ...string) (base, admin, agent string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, append([]string{"--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "data", "toolplane.db")}, args...), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Error("serve did not stop")
		}
	})
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
	}
	creds, err := os.ReadFile(filepath.Join(dir, "data", "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	admin = regexp.MustCompile(`TOOLPLANE_ADMIN_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	agent = regexp.MustCompile(`TOOLPLANE_DEMO_AGENT_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	return base, admin, agent
}

// The served doors answer auth as curl sees them: a Bearer challenge
// naming the protected resource metadata of the resource asked (the MCP
// endpoint's, or the server's for the REST API) where a JWT issuer is
// configured, that metadata served, and JSON bodies; without an issuer
// the metadata is 404 and no challenge names it.
func TestServeAuthAnswers(t *testing.T) {
	t.Parallel()
	const (
		issuer = "https://issuer.example"
		public = "http://toolplane.test:8443"
	)
	oauthBase, _, _ := serveFor(t, "--jwt-issuer", issuer, "--jwt-audience", "toolplane", "--jwt-jwks-url", "http://127.0.0.1:1/jwks", "--public-url", public)
	plainBase, admin, _ := serveFor(t)
	tests := []struct {
		name, base, method, path, key string
		status                        int
		challenge                     string
		// resource is the metadata document's; "" when the answer is an error.
		resource string
	}{
		{"/mcp without a key", oauthBase, "POST", "/mcp", "", 401,
			`Bearer realm="toolplane", resource_metadata="` + public + `/.well-known/oauth-protected-resource/mcp"`, ""},
		{"the REST API without a key", oauthBase, "GET", "/v1/tools", "", 401,
			`Bearer realm="toolplane", resource_metadata="` + public + `/.well-known/oauth-protected-resource"`, ""},
		{"the MCP endpoint's metadata", oauthBase, "GET", "/.well-known/oauth-protected-resource/mcp", "", 200, "", public + "/mcp"},
		{"the server's metadata", oauthBase, "GET", "/.well-known/oauth-protected-resource", "", 200, "", public},
		{"an upstream that is not served", oauthBase, "GET", "/.well-known/oauth-protected-resource/mcp/nothing", "", 404, "", ""},
		{"/mcp without a key, no issuer", plainBase, "POST", "/mcp", "", 401, `Bearer realm="toolplane"`, ""},
		{"a person's key on /mcp", plainBase, "POST", "/mcp", admin, 403, "", ""},
		{"no issuer: no metadata", plainBase, "GET", "/.well-known/oauth-protected-resource/mcp", "", 404, "", ""},
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
			if servers, _ := doc["authorization_servers"].([]any); doc["resource"] != tt.resource || len(servers) != 1 || servers[0] != issuer {
				t.Errorf("metadata %s; want resource %q and authorization_servers [%q]", raw, tt.resource, issuer)
			}
		})
	}
}

// The metrics token's refusal is JSON too, with a Bearer challenge.
func TestMetricsRefusalIsJSON(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(bearerOnly("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("metrics")) })))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Error map[string]any `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") || json.Unmarshal(raw, &env) != nil || env.Error["code"] != "unauthenticated" {
		t.Errorf("%d %v %s; want 401, a Bearer challenge and the error envelope", resp.StatusCode, resp.Header, raw)
	}
}
