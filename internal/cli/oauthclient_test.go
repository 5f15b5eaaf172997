package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An MCP client that meets a 401 starts OAuth: the challenge names the
// protected resource metadata, which names toolplane's own authorization
// server (its issuer the public URL), or the external issuer the
// operator chose (--oauth-external-issuer); /register is then an unknown
// route naming where clients register. A client holding an agent's key
// sends it and connects without OAuth.
func TestAnOAuthClientIsPointedAtTheAuthorizationServer(t *testing.T) {
	t.Parallel()
	plain := startServe(t)
	withIssuer := startServe(t, "--jwt-issuer", "https://issuer.example", "--jwt-audience", "toolplane", "--jwt-jwks-url", "http://127.0.0.1:1/jwks", "--oauth-external-issuer").base
	do := func(method, url string) (int, http.Header, map[string]any) { return oauthDo(t, method, url) }
	// The SDK's path, step by step.
	status, h, _ := do("POST", plain.base+"/mcp")
	if want := `resource_metadata="` + plain.base + `/.well-known/oauth-protected-resource/mcp"`; status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), want) {
		t.Errorf("/mcp: %d %q, want 401 naming %s", status, h.Get("WWW-Authenticate"), want)
	}
	status, _, body := do("GET", plain.base+"/.well-known/oauth-protected-resource/mcp")
	if servers, _ := body["authorization_servers"].([]any); status != http.StatusOK || len(servers) != 1 || servers[0] != plain.base || body["resource"] != plain.base+"/mcp" {
		t.Errorf("the metadata of /mcp: %d %v, want its own issuer %s", status, body, plain.base)
	}
	status, _, body = do("POST", plain.base+"/register")
	if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != "not_found" || !strings.Contains(e["message"].(string), plain.base) {
		t.Errorf("/register: %d %v", status, body)
	}
	status, _, body = do("POST", withIssuer+"/register")
	if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != "not_found" || !strings.Contains(e["message"].(string), "https://issuer.example") {
		t.Errorf("/register with an issuer: %d %v", status, body)
	}

	// mcp-remote itself, when it is installed (.ci/run installs it).
	node, client := findMCPRemote(t)
	if client == "" {
		t.Log("mcp-remote not run: " + node)
		return
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{client, plain.base + "/mcp", "--allow-http"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "BROWSER=true")
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := run("--header", "Authorization:Bearer "+plain.agent); !strings.Contains(out, "Connected successfully") || strings.Contains(out, "register") {
		t.Errorf("mcp-remote with the agent's key:\n%s", out)
	}
}

// Without an authorization server (serve --oauth=false, no issuer)
// toolplane publishes no metadata, so the MCP TypeScript SDK (behind
// mcp-remote) takes the server's origin for one and registers at
// /register: that answer, not a bare 404, says why no client registers
// and that the server takes an API key, with how to configure a client.
func TestAnOAuthClientWithNoAuthorizationServerIsToldToSendAKey(t *testing.T) {
	t.Parallel()
	plain := startServe(t, "--oauth=false")
	status, h, _ := oauthDo(t, "POST", plain.base+"/mcp")
	if status != http.StatusUnauthorized || strings.Contains(h.Get("WWW-Authenticate"), "resource_metadata") {
		t.Errorf("/mcp: %d %q", status, h.Get("WWW-Authenticate"))
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		if status, _, _ := oauthDo(t, "GET", plain.base+path); status != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, status)
		}
	}
	status, h, body := oauthDo(t, "POST", plain.base+"/register")
	desc, _ := body["error_description"].(string)
	if status != http.StatusNotFound || body["error"] != "registration_not_supported" || !strings.Contains(desc, "API key") ||
		!strings.Contains(desc, "Authorization: Bearer <key>") || !strings.Contains(desc, "toolplane client config") || h.Get("Cache-Control") != "no-store" {
		t.Errorf("/register: %d %v %v", status, h, body)
	}
	// mcp-remote itself, when it is installed (.ci/run installs it).
	node, client := findMCPRemote(t)
	if client == "" {
		t.Log("mcp-remote not run: " + node)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, client, plain.base+"/mcp", "--allow-http")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "BROWSER=true")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "toolplane has no OAuth authorization server") || !strings.Contains(string(out), "toolplane client config") {
		t.Errorf("mcp-remote without a key:\n%s", out)
	}
}

// oauthDo sends method to url with a registration's body and answers the
// status, the headers and the JSON body.
func oauthDo(t *testing.T, method, url string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(`{"redirect_uris":["http://localhost:1/cb"]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header, body
}

// findMCPRemote answers Node 22 or later and mcp-remote's client script
// (TOOLPLANE_TEST_MCP_REMOTE, else where .ci/run installs it); client is
// "" when either is missing, and node then says why.
func findMCPRemote(t *testing.T) (node, client string) {
	t.Helper()
	cache := os.Getenv("TOOLPLANE_CI_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "toolplane-ci")
	}
	client = os.Getenv("TOOLPLANE_TEST_MCP_REMOTE")
	if client == "" {
		client = filepath.Join(cache, "mcp-remote", "node_modules", "mcp-remote", "dist", "client.js")
	}
	if _, err := os.Stat(client); err != nil {
		return "mcp-remote is not installed at " + client + " (run .ci/run once, or set TOOLPLANE_TEST_MCP_REMOTE)", ""
	}
	candidates, _ := filepath.Glob(filepath.Join(cache, "*", "node_modules", "node-linux-*", "bin", "node"))
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		if major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0]); major >= 22 {
			return p, client
		}
	}
	return "no Node 22 or later on PATH or under " + cache, ""
}
